#!/usr/bin/env bash
# The one test command (README, .ci/run): set-up, then lint, unit tests and the integration tests
# against real iptables, namespaces and plugins, then the isolation check. The run fails if any
# namespace a test made is still there, or if the root namespace's links or iptables/ip6tables
# rules changed. Run as root on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1

tools/setup.sh

# Every namespace a test makes starts with this prefix (tools/testns), so leaks are found by name.
ALLOCNET_TESTNS_PREFIX="ant-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
export ALLOCNET_TESTNS_PREFIX

# The CLI's code cache (packages/cli's code-cache.ts) of every command a test runs: a directory of
# the run's own, not root's /var/cache/allocnet, which the isolation check watches.
ALLOCNET_CLI_CACHE_DIR=$(mktemp -d /tmp/allocnet-test-cli-cache.XXXXXX)
export ALLOCNET_CLI_CACHE_DIR
trap 'rm -rf "$ALLOCNET_CLI_CACHE_DIR"' EXIT
root_cache() { ls -la --time-style=full-iso /var/cache/allocnet 2>/dev/null || true; }

root_rules() {
  { iptables-save; ip6tables-save; } | sed -E '/^#/d; s/\[[0-9]+:[0-9]+\]/[0:0]/'
}
root_links() { ip -o link show | awk -F': ' '{print $2}' | sort; }

rules_before=$(root_rules)
links_before=$(root_links)
cache_before=$(root_cache)

status=0
# Integration tests share the machine's kernel: one package at a time, each with its own namespaces.
pnpm exec turbo run lint lint:root test --output-logs=full || status=$?
if [ "$status" -eq 0 ]; then
  pnpm exec turbo run test:integration --concurrency=1 --output-logs=full || status=$?
fi

echo "== isolation check (namespace prefix $ALLOCNET_TESTNS_PREFIX)"
leaked=$(ip netns list | awk '{print $1}' | grep "^${ALLOCNET_TESTNS_PREFIX}-" || true)
if [ -n "$leaked" ]; then
  echo "FAIL: tests left these namespaces behind (now removed):"
  for ns in $leaked; do
    echo "  $ns"
    ip netns del "$ns" || true
  done
  status=1
fi
if [ "$(root_rules)" != "$rules_before" ]; then
  echo "FAIL: the root namespace's iptables/ip6tables rules changed during the tests:"
  diff <(echo "$rules_before") <(root_rules) || true
  status=1
fi
if [ "$(root_links)" != "$links_before" ]; then
  echo "FAIL: the root namespace's links changed during the tests:"
  diff <(echo "$links_before") <(root_links) || true
  status=1
fi
if [ "$(root_cache)" != "$cache_before" ]; then
  echo "FAIL: a test wrote the CLI's code cache in /var/cache/allocnet (ALLOCNET_CLI_CACHE_DIR not passed on):"
  diff <(echo "$cache_before") <(root_cache) || true
  status=1
fi
if [ "$status" -eq 0 ]; then echo "isolation check passed: no namespace left, root rules, links and /var/cache/allocnet unchanged"; fi
exit "$status"
