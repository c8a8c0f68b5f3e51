#!/usr/bin/env bash
# The main job (README): set-up, then run. Until the agent lands this runs the iptables-node demo
# in a throwaway namespace; the command stays the same when the agent replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
tools/setup.sh
exec node tools/demo/dist/main.js "$@"
