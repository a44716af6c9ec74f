#!/usr/bin/env bash
# Builds etcd-steward_<version>_<arch>.deb from an already built tree (`make deb`;
# docs/packaging.md). No debhelper: `cmake --install` into a staging root, the Debian files from
# packaging/deb/, `dpkg-deb --root-owner-group --build`.
#
#   scripts/build-deb.sh [BUILD_DIR [OUT_DIR]]     defaults: build, BUILD_DIR
#
# STEWARD_DEB_VERSION   upstream version (default: project(... VERSION) in CMakeLists.txt)
# STEWARD_DEB_REVISION  Debian revision (default 1): the package is <upstream>-<revision>
# SOURCE_DATE_EPOCH     file and changelog dates (default: the time of the HEAD commit)
# Prints the path of the .deb it wrote.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
out="${2:-$build}"
deb_src="$here/packaging/deb"
fail() { echo "build-deb: $*" >&2; exit 1; }

for tool in dpkg-deb dpkg-shlibdeps strip gzip cmake; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
for b in steward stewardctl; do
  [ -x "$build/$b" ] || fail "$build holds no built $b (make build)"
done
[ -f "$build/man/steward.1" ] || fail "$build/man has no man pages (help2man; make build)"

upstream="${STEWARD_DEB_VERSION:-$(sed -n 's/^project([^)]* VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")}"
[ -n "$upstream" ] || fail "no project VERSION in CMakeLists.txt"
version="$upstream-${STEWARD_DEB_REVISION:-1}"
arch="$(dpkg --print-architecture)"
maintainer="etcd-steward maintainers <maintainers@users.noreply.a-seed-c66f7655.example>"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)}"

umask 022
work="$(mktemp -d /tmp/steward-deb-XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
cmake --install "$build" --prefix "$root/usr" >/dev/null

# The binaries, without their debug info (as dh_strip does).
for b in steward stewardctl; do
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$b"
done

# The unit as packaged: the source unit names the /usr/local paths of `cmake --install`.
unit="$root/usr/lib/systemd/system/steward.service"
sed -e 's|^ExecStart=/usr/local/bin/|ExecStart=/usr/bin/|' \
    -e 's|^Documentation=file:/usr/local/share/|Documentation=file:/usr/share/|' \
    "$here/packaging/systemd/steward.service" > "$unit"
if grep -n /usr/local "$unit" >&2; then fail "the packaged unit still names /usr/local"; fi
grep -q '^ExecStart=/usr/bin/steward ' "$unit" || fail "the packaged unit has no ExecStart=/usr/bin/steward"

doc="$root/usr/share/doc/etcd-steward"
install -m 0644 "$deb_src/copyright" "$doc/copyright"
# The changelog: packaging/deb/changelog, under an entry for this build when its version is not
# the file's latest (a test build, STEWARD_DEB_VERSION).
{
  if ! head -n1 "$deb_src/changelog" | grep -qF "etcd-steward ($version)"; then
    printf 'etcd-steward (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Build of %s from commit %s.\n\n' "$version" \
      "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    printf ' -- %s  %s\n\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
  fi
  cat "$deb_src/changelog"
} | gzip -9n > "$doc/changelog.Debian.gz"
gzip -9n "$root"/usr/share/man/man1/*.1
install -D -m 0644 "$deb_src/lintian-overrides" "$root/usr/share/lintian/overrides/etcd-steward"

# Modes: whatever the build tree's umask was.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +
chmod 0755 "$root/usr/bin/steward" "$root/usr/bin/stewardctl"

# Shared-library dependencies, from dpkg-shlibdeps (it wants a debian/control to read).
mkdir -p "$work/src/debian"
printf 'Source: etcd-steward\n\nPackage: etcd-steward\nArchitecture: any\n' > "$work/src/debian/control"
depends="$(cd "$work/src" && dpkg-shlibdeps -O -e"$root/usr/bin/steward" -e"$root/usr/bin/stewardctl" 2>"$work/shlibdeps.err")" ||
  { cat "$work/shlibdeps.err" >&2; fail "dpkg-shlibdeps failed"; }
depends="${depends#shlibs:Depends=}"
[ -n "$depends" ] || fail "dpkg-shlibdeps found no dependencies"

mkdir -p "$root/DEBIAN"
for s in preinst postinst prerm postrm; do install -m 0755 "$deb_src/$s" "$root/DEBIAN/$s"; done
(cd "$root" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
installed_size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s|@INSTALLED_SIZE@|$installed_size|" -e "s|@DEPENDS@|$depends|" \
    "$deb_src/control.in" > "$root/DEBIAN/control"

# Reproducible: every file dated SOURCE_DATE_EPOCH.
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb="$out/etcd-steward_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
