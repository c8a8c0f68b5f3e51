#!/bin/bash
# The bridge plugin's ADD (static IPAM, so no reservation is read) by the ports its bridge holds:
# 11 ADDs with about 12 ports, then P more ports made by the plugin itself (each into a container
# namespace of its own, as allocations are), then 11 ADDs again; prints each time and the p50.
# V6=0 turns IPv6 off in the node namespace first. C6 is IPv6 in the container namespaces: 1 on
# (the default), 0 off in each one's default before its ADD (what the agent does in a namespace it
# made), `after` turned off on its eth0 just after its ADD, outside the time measured (what it does
# in a task driver's namespace). Everything it makes (namespaces prefixed exb-) is removed on exit.
# A size, not a comparison the suite makes (docs/performance.md).
#
#   P=1000 C6=0 tools/bench/bridge-ports.sh
set -euo pipefail
P=${P:-1000}
V6=${V6:-1}
C6=${C6:-1}
PLUGINS=${PLUGINS:-/usr/lib/cni}
NODE=exb-node

cleanup() {
  local n
  for n in $(ip netns list | awk '/^exb-c/{print $1}'); do ip netns del "$n"; done
  ip netns del "$NODE" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$NODE"
if [ "$V6" = 0 ]; then
  nsenter --net="/run/netns/$NODE" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
    net.ipv6.conf.default.disable_ipv6=1
fi

conf() { # $1: the container's number, which picks its address
  local address="10.77.$(($1 / 250)).$(($1 % 250 + 2))/16"
  echo "{\"cniVersion\":\"1.0.0\",\"name\":\"exbnet\",\"type\":\"bridge\",\"bridge\":\"exbbr0\",\"isGateway\":true,\"ipam\":{\"type\":\"static\",\"addresses\":[{\"address\":\"$address\",\"gateway\":\"10.77.0.1\"}]}}"
}

add() { # $1: the container's number; prints the ADD's milliseconds
  local t0 ms
  ip netns add "exb-c$1"
  if [ "$C6" = 0 ]; then
    nsenter --net="/run/netns/exb-c$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
  fi
  t0=$(date +%s%N)
  conf "$1" | CNI_COMMAND=ADD CNI_CONTAINERID="c$1" CNI_NETNS="/run/netns/exb-c$1" \
    CNI_IFNAME=eth0 CNI_PATH="$PLUGINS" nsenter --net="/run/netns/$NODE" "$PLUGINS/bridge" >/dev/null
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [ "$C6" = after ]; then
    nsenter --net="/run/netns/exb-c$1" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
  fi
  echo "$ms"
}

p50() { printf '%s\n' "$@" | sort -n | sed -n 6p; }

add 0 >/dev/null # makes the bridge
few=()
for i in $(seq 1 11); do few+=("$(add $((5000 + i)))"); done
for i in $(seq 1 "$P"); do add "$i" >/dev/null; done
many=()
for i in $(seq 1 11); do many+=("$(add $((6000 + i)))"); done
echo "ports ~12: ${few[*]} (p50 $(p50 "${few[@]}")) | ports ~$((P + 12)): ${many[*]} (p50 $(p50 "${many[@]}"))"
