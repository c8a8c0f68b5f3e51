#!/usr/bin/env bash
# Sets up a Debian machine for allocnet, as root, idempotently: system packages (the CNI plugins,
# iptables, iproute2, …), pnpm at the version package.json pins, the node modules from the
# committed lockfile, and a build. Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root: it installs Debian packages, and allocnet manages network namespaces and iptables"
command -v apt-get >/dev/null || die "this script needs Debian (apt-get)"

# containernetworking-plugins: the CNI plugins in /usr/lib/cni; iptables: iptables(-save/-restore),
# nf_tables backend; iproute2: ip netns; util-linux: nsenter, setpriv; procps: sysctl;
# iputils-ping: the namespace tests send packets across; shellcheck: lint of these scripts;
# openssl: test certificates for the agent's TLS tests; fonts-dejavu-core: text in the benchmark's charts;
# golang-go: builds allocnet-cni, the thin CNI plugin (stdlib-only Go, offline: GOPROXY=off).
# The CNI clients the tests run through allocnet-cni: golang-github-containerd-go-cni-dev (go-cni's
# and libcni's sources, for the go-cni driver built offline in GOPATH mode), containerd (1.6, with
# its CRI plugin; pulls runc), podman (4.3, CNI backend) with crun (podman's runc cannot run
# without cgroups: "not compatible with NoCgroups") and busybox-static (the podman test's rootfs).
# The Debian package (tools/package.sh) and its tests: binutils (strip), lintian, systemd
# (systemd-analyze verify of the unit), prometheus (promtool checks the alerting rules; the
# alerts test runs the server in a throwaway namespace).
PACKAGES=(containernetworking-plugins iptables iproute2 util-linux procps iputils-ping shellcheck ca-certificates openssl fonts-dejavu-core golang-go
  golang-github-containerd-go-cni-dev golang-github-appc-cni-dev containerd podman crun busybox-static
  binutils lintian systemd prometheus)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  # Packages with a service (prometheus, containerd) must not start it on this host: without
  # systemd their init scripts would. A policy-rc.d of our own says no, unless one is there.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v node >/dev/null || die "Node.js 20.19 or newer is needed (Debian's nodejs package is too old)"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' \
  || die "Node.js $(node --version) is too old: allocnet needs 20.19 or newer"

want=$(node -p 'require("./package.json").packageManager.replace(/^pnpm@/, "")')
if [ "$(pnpm --version 2>/dev/null || true)" != "$want" ]; then
  say "installing pnpm $want"
  npm install --global --silent --no-fund --no-audit "pnpm@$want" >/dev/null
fi

say "installing node modules (frozen lockfile)"
pnpm install --frozen-lockfile --reporter=silent
say "building"
pnpm run --silent build --output-logs=errors-only
say "ready"
