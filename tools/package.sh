#!/usr/bin/env bash
# Builds the Debian package allocnet_<version>_<arch>.deb with dpkg-deb, offline, from what
# tools/setup.sh installed and built: the agent and the CLI with their production node modules
# under /usr/lib/allocnet, `allocnet` and `allocnet-agent` in /usr/bin, allocnet-cni in
# /usr/lib/cni (postinst links it into /opt/cni/bin for Nomad), the systemd unit, the config as a
# conffile, the Prometheus alerting rules. docs/install.md says what goes where and why.
#
# Usage: tools/package.sh [--version V] [--out DIR]
#   --version V  the package's version (default: @allocnet/agent's); stamped into the agent, the
#                CLI and allocnet-cni too, so that an upgrade shows which code runs
#   --out DIR    where the .deb goes (default: dist/deb); its path is the last line printed
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'package.sh: %s\n' "$*" >&2; exit 1; }

version=$(node -p 'require("./packages/agent/package.json").version')
out=dist/deb
while [ $# -gt 0 ]; do
  case "$1" in
  --version) version=${2:?--version needs a value}; shift 2 ;;
  --out) out=${2:?--out needs a value}; shift 2 ;;
  *) die "unknown argument $1 (usage: tools/package.sh [--version V] [--out DIR])" ;;
  esac
done
# Debian's version syntax without an epoch or a revision: a native package.
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || die "--version $version: want digits first, then letters, digits, . + ~"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (Debian's dpkg)"
command -v go >/dev/null || die "go is missing: run tools/setup.sh (it installs golang-go)"
for entry in agent/dist/main.js cli/dist/main.cjs; do
  [ -f "packages/$entry" ] || die "packages/${entry%%/*} is not built: run tools/setup.sh"
done

arch=$(dpkg --print-architecture)
case "$arch" in
amd64) koffi_arch=linux_x64 ;;
arm64) koffi_arch=linux_arm64 ;;
*) die "architecture $arch: koffi's prebuilt binary for it is not mapped here" ;;
esac
# Reproducible: every file dated at the commit's time.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Debian's own variables name who built it.
maintainer="${DEBFULLNAME:-allocnet engineers} <${DEBEMAIL:-allocnet@example.org}>"

stage=$(mktemp -d /tmp/allocnet-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
app=$root/usr/lib/allocnet

# 1. The node modules: a copy of the workspace's manifests and lockfile, installed with
# --prod --offline from pnpm's store, for @allocnet/cli and what it depends on (the agent among
# them). `pnpm deploy` needs the registry's metadata for workspace packages that are not
# injected; a filtered frozen install does not.
mkdir -p "$app"
cp package.json pnpm-workspace.yaml pnpm-lock.yaml .npmrc "$app/"
for manifest in packages/*/package.json tools/*/package.json integration/package.json; do
  mkdir -p "$app/$(dirname "$manifest")"
  cp "$manifest" "$app/$manifest"
done
# Each runtime package's published files (its package.json's "files").
node --input-type=module - "$app" <<'EOF'
import { cpSync, readFileSync, readdirSync } from 'node:fs';
const app = process.argv[2];
for (const dir of readdirSync('packages')) {
  const manifest = JSON.parse(readFileSync(`packages/${dir}/package.json`, 'utf8'));
  if (manifest.private === true) continue;
  for (const entry of manifest.files ?? [])
    cpSync(`packages/${dir}/${entry}`, `${app}/packages/${dir}/${entry}`, { recursive: true });
}
EOF
(cd "$app" && pnpm install --prod --frozen-lockfile --offline --filter '@allocnet/cli...' \
  --reporter=silent --config.confirmModulesPurge=false)
# What only the workspace needed: other importers, manifests at the root, source maps and type
# declarations, pnpm's bookkeeping; sources and build files of the native modules (they load
# prebuilt binaries), their binaries for musl and for other systems; dotfiles of npm tarballs.
rm -rf "$app/tools" "$app/integration" "$app/packages/cni-plugin" \
  "$app/package.json" "$app/pnpm-workspace.yaml" "$app/pnpm-lock.yaml" "$app/.npmrc"
find "$app" -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.cts' -o -name '*.d.mts' \
  -o -name '*.musl.node' -o -name '.eslintrc*' -o -name '.npmignore' -o -name '.gitattributes' \
  -o -name '.editorconfig' -o -name '.travis.yml' \) -delete
for k in "$app"/node_modules/.pnpm/koffi@*/node_modules/koffi; do
  find "$k/build/koffi" -mindepth 1 -maxdepth 1 ! -name "$koffi_arch" -exec rm -rf {} +
  rm -rf "${k:?}/src" "${k:?}/vendor" "${k:?}/doc" "${k:?}/lib"
done
rm -rf "$app"/node_modules/.pnpm/lmdb@*/node_modules/lmdb/dependencies \
  "$app"/node_modules/.pnpm/lmdb@*/node_modules/lmdb/src
[ -n "$(find "$app"/node_modules/.pnpm -path "*koffi/build/koffi/$koffi_arch/*" -name '*.node')" ] ||
  die "koffi has no prebuilt binary for $koffi_arch"
# pnpm links each file from its store: identical files of different modules are one inode. The
# package gets plain copies (symlinks stay symlinks), and the native modules stripped.
cp -R "$app" "$app.copy" && rm -rf "$app" && mv "$app.copy" "$app"
find "$app" -type f -name '*.node' -exec strip --strip-unneeded {} +
# The version every @allocnet package reports (agent, CLI).
node --input-type=module - "$app" "$version" <<'EOF'
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
const [app, version] = process.argv.slice(2);
for (const dir of readdirSync(`${app}/packages`)) {
  const file = `${app}/packages/${dir}/package.json`;
  const manifest = JSON.parse(readFileSync(file, 'utf8'));
  manifest.version = version;
  writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`);
}
EOF

# 2. The commands: node run on the packages' entry points.
mkdir -p "$root/usr/bin"
for bin in allocnet:cli/dist/main.cjs allocnet-agent:agent/dist/main.js; do
  printf '#!/bin/sh\nexec /usr/bin/node /usr/lib/allocnet/packages/%s "$@"\n' \
    "${bin#*:}" >"$root/usr/bin/${bin%%:*}"
  chmod 0755 "$root/usr/bin/${bin%%:*}"
done

# 3. allocnet-cni, built here with the package's version, into Debian's CNI plugin dir.
mkdir -p "$root/usr/lib/cni"
(cd packages/cni-plugin && CGO_ENABLED=0 GOPROXY=off GOFLAGS=-mod=mod go build -trimpath \
  -ldflags="-s -X main.Version=$version" -o "$root/usr/lib/cni/allocnet-cni" .)

# 4. The unit, the config, the alerting rules, the docs.
install -D -m 0644 packages/agent/systemd/allocnet-agent.service \
  "$root/lib/systemd/system/allocnet-agent.service"
install -D -m 0644 packages/agent/systemd/agent.example.yaml "$root/etc/allocnet/agent.yaml"
install -D -m 0644 packages/agent/prometheus/allocnet-alerts.yml \
  "$root/usr/share/allocnet/prometheus/allocnet-alerts.yml"
install -D -m 0644 tools/debian/allocnet.1 "$root/usr/share/man/man1/allocnet.1"
install -D -m 0644 tools/debian/allocnet-agent.8 "$root/usr/share/man/man8/allocnet-agent.8"
gzip -9n "$root/usr/share/man/man1/allocnet.1" "$root/usr/share/man/man8/allocnet-agent.8"
install -D -m 0644 tools/debian/lintian-overrides "$root/usr/share/lintian/overrides/allocnet"
doc=$root/usr/share/doc/allocnet
install -D -m 0644 tools/debian/copyright "$doc/copyright"
install -m 0644 docs/install.md "$doc/install.md"
{
  printf 'allocnet (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Built from commit %s of the allocnet repository.\n\n' "$commit"
  printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"

# 5. DEBIAN/: control, conffiles, maintainer scripts, md5sums.
mkdir -p "$root/DEBIAN"
size=$(du -sk --apparent-size "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s|@MAINTAINER@|$maintainer|" \
  tools/debian/control.in >"$root/DEBIAN/control"
echo /etc/allocnet/agent.yaml >"$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "tools/debian/$script" "$root/DEBIAN/$script"
done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control" "$root/DEBIAN/conffiles"

# Modes as Debian wants them whatever the umask or the store: directories 0755, scripts (#!) and
# the plugin 0755, every other file (native modules included) 0644.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +
find "$root" -type f -exec sh -c 'for f; do [ "$(head -c2 "$f")" = "#!" ] && chmod 0755 "$f"; done; true' sh {} +
chmod 0755 "$root/usr/lib/cni/allocnet-cni"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$(cd "$out" && pwd)/allocnet_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB, $(find "$root" -type f | wc -l) files) from $commit"
echo "$deb"
