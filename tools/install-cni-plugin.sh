#!/usr/bin/env bash
# Installs allocnet-cni into a CNI plugin directory (default /opt/cni/bin) by atomic rename: the
# new binary is written beside the old one under a temporary name, synced, then renamed over
# it. A runtime exec'ing the old file at that moment keeps running it (a plain copy over a busy
# binary fails with "Text file busy", Multus's reboot deadlock). Builds the plugin first if
# needed (tools/setup.sh does). Usage: tools/install-cni-plugin.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/opt/cni/bin}"
src=packages/cni-plugin/dist/allocnet-cni
if [ ! -x "$src" ]; then
  (cd packages/cni-plugin && pnpm run --silent build)
fi
mkdir -p "$dir"
tmp="$dir/.allocnet-cni.$$"
trap 'rm -f "$tmp"' EXIT
install -m 0755 "$src" "$tmp"
sync "$tmp"
mv -f "$tmp" "$dir/allocnet-cni"
trap - EXIT
echo "installed $("$dir/allocnet-cni") in $dir"
