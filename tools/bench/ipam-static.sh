#!/bin/bash
# The bridge plugin's ADD with host-local over a directory of R reservation files (host-local's
# format), against the same ADD with `static` IPAM: 10 ADDs of each, interleaved, each into a fresh
# container namespace, the bridge in a node namespace of its own; prints each time and the p50.
# Everything it makes (namespaces prefixed exq-, a temporary directory) is removed on exit.
# A size, not a comparison the suite makes (docs/performance.md).
#
#   R=250 tools/bench/ipam-static.sh
set -euo pipefail
R=${R:-250}
PLUGINS=${PLUGINS:-/usr/lib/cni}
NODE=exq-node
DIR=$(mktemp -d)

cleanup() {
  local n
  for n in $(ip netns list | awk '/^exq-c/{print $1}'); do ip netns del "$n"; done
  ip netns del "$NODE" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
ip netns add "$NODE"

# R reservations as host-local writes them: a file per address holding "<id>\r\n<ifname>".
mkdir -p "$DIR/ipam/exqnet"
for i in $(seq 1 "$R"); do
  printf 'leak-%s\r\neth0' "$i" >"$DIR/ipam/exqnet/10.77.$((i / 250)).$((i % 250 + 2))"
done

conf() { # $1: hl or st, $2: the container's number
  local ipam
  if [ "$1" = hl ]; then
    ipam="{\"type\":\"host-local\",\"dataDir\":\"$DIR/ipam\",\"ranges\":[[{\"subnet\":\"10.77.0.0/16\"}]]}"
  else
    ipam="{\"type\":\"static\",\"addresses\":[{\"address\":\"10.77.200.$2/16\",\"gateway\":\"10.77.0.1\"}]}"
  fi
  echo "{\"cniVersion\":\"1.0.0\",\"name\":\"exqnet\",\"type\":\"bridge\",\"bridge\":\"exqbr0\",\"isGateway\":true,\"ipam\":$ipam}"
}

add() { # $1: hl or st, $2: the container's number; prints the ADD's milliseconds
  local config t0
  ip netns add "exq-c$2"
  config=$(conf "$1" "$2")
  t0=$(date +%s%N)
  echo "$config" | CNI_COMMAND=ADD CNI_CONTAINERID="c$2" CNI_NETNS="/run/netns/exq-c$2" \
    CNI_IFNAME=eth0 CNI_PATH="$PLUGINS" nsenter --net="/run/netns/$NODE" "$PLUGINS/bridge" >/dev/null
  echo $((($(date +%s%N) - t0) / 1000000))
}

p50() { printf '%s\n' "$@" | sort -n | sed -n 5p; }

add hl 0 >/dev/null # makes the bridge
hl=()
st=()
for i in $(seq 1 10); do
  hl+=("$(add hl $((i * 2)))")
  st+=("$(add st $((i * 2 + 1)))")
done
echo "R=$R host-local: ${hl[*]} (p50 $(p50 "${hl[@]}")) | static: ${st[*]} (p50 $(p50 "${st[@]}"))"
