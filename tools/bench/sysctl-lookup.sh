#!/bin/bash
# What opening /proc/sys/net/ipv4/conf/eth0/arp_notify costs in a new network namespace, the first
# time and after, beside 0 and then N other namespaces that each opened their own (as every
# allocation's namespace does in the bridge plugin's ADD). /proc/sys's dentries are shared by
# every namespace: each namespace's `net`, `ipv4`, `conf` and `eth0` sit in the same hash chain
# as every other's. Everything it makes (namespaces prefixed exs-) is removed on exit.
#
#   N=1000 tools/bench/sysctl-lookup.sh
set -euo pipefail
N=${N:-1000}

cleanup() {
  local n
  for n in $(ip netns list | awk '/^exs-/{print $1}'); do ip netns del "$n"; done
}
trap cleanup EXIT

probe() { # $1: the probe's name
  ip netns add "exs-$1"
  ip -n "exs-$1" link add eth0 type veth peer name p0
  nsenter --net="/run/netns/exs-$1" python3 -c '
import time
p = "/proc/sys/net/ipv4/conf/eth0/arp_notify"
t = time.perf_counter(); open(p).read(); first = time.perf_counter() - t
t = time.perf_counter()
for _ in range(2000): open(p).read()
print("first %.0f us, then %.1f us" % (first * 1e6, (time.perf_counter() - t) / 2000 * 1e6))'
}

echo "0 others: $(probe probe0)"
for i in $(seq 1 "$N"); do
  ip netns add "exs-n$i"
  ip -n "exs-n$i" link add eth0 type veth peer name p0
  nsenter --net="/run/netns/exs-n$i" cat /proc/sys/net/ipv4/conf/eth0/arp_notify >/dev/null
done
echo "$N others: $(probe probe1)"
