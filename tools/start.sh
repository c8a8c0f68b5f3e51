#!/usr/bin/env bash
# The main job (README): set-up, then a dev agent (`allocnet agent -dev`, in a sandbox network
# namespace) and a walk through allocnet with real commands; it removes everything at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
tools/setup.sh
exec node tools/demo/dist/main.js "$@"
