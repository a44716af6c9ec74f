#!/usr/bin/env bash
# Installs the Debian packages etcd-steward needs to build, test and run its demo.
# Idempotent: only packages that are not yet installed are passed to apt-get.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcurl4-openssl-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev libtinyxml2-dev
  libspdlog-dev libfmt-dev libcli11-dev libzstd-dev libcpp-httplib-dev
  libabsl-dev libgtest-dev libgmock-dev help2man curl python3
  etcd-server etcd-client
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  # Debian's etcd-server package enables and starts its own etcd (127.0.0.1:2379, data in
  # /var/lib/etcd): on a real node, a second etcd unrelated to the cluster steward runs. Mask
  # its unit before the package is installed, so it never starts (a mask is a link to
  # /dev/null under /etc/systemd/system; it works with or without systemd running).
  if [[ " ${missing[*]} " == *" etcd-server "* ]] && [ -d /etc/systemd/system ] &&
     [ ! -e /etc/systemd/system/etcd.service ]; then
    echo "install-deps: masking Debian's etcd.service (steward runs etcd itself)" >&2
    $SUDO ln -s /dev/null /etc/systemd/system/etcd.service
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # And stop it if it was started anyway (an older install; a no-op in containers).
  if command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi

here="$(cd "$(dirname "$0")/.." && pwd)"

# fetch_etcd SUITE MINOR DEST: Debian SUITE's etcd-server (etcd MINOR.x) unpacked into DEST,
# with a private apt configuration (the machine's own sources stay as they are): the same URI
# the machine's Debian source uses, with the other suite; `apt-get download`; `dpkg-deb -x`.
# The suite's version may move with point releases; DEST's name stays.
fetch_etcd() {
  local suite=$1 minor=$2 dest=$3
  echo "install-deps: fetching etcd $minor (Debian $suite) into $dest" >&2
  local apt_root="$here/.deps/apt-$suite"
  mkdir -p "$apt_root/lists/partial" "$apt_root/cache/archives/partial" "$apt_root/debs"
  local uri
  uri=$(grep -hoE '^(URIs:|deb( \[[^]]*\])?) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources \
          /etc/apt/sources.list 2>/dev/null | grep -oE 'https?://[^ ]+' | grep -v security \
          | head -n1 || true)
  uri=${uri:-http://deb.debian.org/debian}
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" \
    > "$apt_root/sources.list"
  local apt_opts=(-o Dir::Etc::sourcelist="$apt_root/sources.list" -o Dir::Etc::sourceparts=-
                  -o Dir::State::Lists="$apt_root/lists" -o Dir::Cache="$apt_root/cache"
                  -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq
  rm -f "$apt_root/debs"/etcd-server_*.deb
  (cd "$apt_root/debs" && apt-get "${apt_opts[@]}" download "etcd-server/$suite" >/dev/null)
  local debs=("$apt_root/debs"/etcd-server_"$minor".*.deb)
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  dpkg-deb -x "${debs[0]}" "$dest.tmp"
  # Output captured first: with pipefail, `grep -q` ending early makes the writer die of
  # SIGPIPE and the pipe fail (CI saw it once).
  local version
  version=$("$dest.tmp/usr/bin/etcd" --version 2>&1 || true)
  [[ $version == *"etcd Version: $minor"* ]] || {
    echo "install-deps: ${debs[0]} holds no etcd $minor" >&2
    exit 1
  }
  FETCHED="$dest.tmp"
}

# etcd 3.5 (Debian trixie), for its etcdutl (`snapshot restore --bump-revision`: etcd 3.4 has
# no such option, and etcd 3.4 runs on the data dir it writes, docs/architecture.md) and for the
# rolling upgrade tests. The demo and the tests point there.
ETCD35="$here/.deps/etcd-3.5.16"
if [ ! -x "$ETCD35/usr/bin/etcdutl" ]; then
  fetch_etcd trixie 3.5 "$ETCD35"
  help=$("$FETCHED/usr/bin/etcdutl" snapshot restore --help 2>&1 || true)
  if [[ $help != *--bump-revision* ]]; then
    echo "install-deps: trixie's etcdutl has no --bump-revision" >&2
    exit 1
  fi
  rm -rf "$ETCD35" && mv "$FETCHED" "$ETCD35"
fi

# etcd 3.5 at the newest patch Debian has (sid: 3.5.30 on 2026-12-01), a supported etcd with the
# fixes of etcd #19557 and #20793 (docs/etcd-versions.md): `make demo` runs it, and the tests
# roll a 3.5.16 cluster to it. Its binaries are static and run on Debian 12.
ETCD35NEW="$here/.deps/etcd-3.5-sid"
if [ ! -x "$ETCD35NEW/usr/bin/etcdutl" ]; then
  fetch_etcd sid 3.5 "$ETCD35NEW"
  rm -rf "$ETCD35NEW" && mv "$FETCHED" "$ETCD35NEW"
fi

# With --bench: what bench/ needs beyond the build: gnuplot for bench/report's charts (gnuplot-nox:
# no X11; its pngcairo terminal draws the PNGs), jq, curl, openssl and /usr/bin/time for the scripts.
if [ "${1:-}" = "--bench" ]; then
  bench_missing=()
  for p in gnuplot-nox jq curl openssl time; do
    if [ "$p" = gnuplot-nox ] && command -v gnuplot >/dev/null 2>&1; then continue; fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      bench_missing+=("$p")
    fi
  done
  if [ ${#bench_missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${bench_missing[*]} (for make bench)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${bench_missing[@]}"
  fi
fi

# With --test: what the test suite needs beyond the build (the S3 protocol server, from npm).
if [ "${1:-}" = "--test" ]; then
  # etcd 3.3 (Debian bullseye), for the rolling upgrade tests (3.3 -> 3.4 -> 3.5).
  ETCD33="$here/.deps/etcd-3.3"
  if [ ! -x "$ETCD33/usr/bin/etcd" ]; then
    fetch_etcd bullseye 3.3 "$ETCD33"
    rm -rf "$ETCD33" && mv "$FETCHED" "$ETCD33"
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: installing nodejs and npm" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  # clang: the thread-safety check (ThreadSafety.*, scripts/check_thread_safety.py) runs
  # clang++ -Wthread-safety over src/; the build itself stays on g++.
  if ! command -v clang++ >/dev/null 2>&1; then
    echo "install-deps: installing clang (for the thread-safety check)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends clang
  fi
  # clang-format: Format.Clean checks every C++ file against .clang-format with it.
  if ! command -v clang-format >/dev/null 2>&1; then
    echo "install-deps: installing clang-format (for the format check)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends clang-format
  fi
  # faketime: the safety tests run stewardctl with a clock hours ahead.
  if ! command -v faketime >/dev/null 2>&1; then
    echo "install-deps: installing faketime" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends faketime
  fi
  # promtool (from Debian's prometheus package): the admin test checks a live /metrics with it.
  # Only unpacked under .deps (dpkg-deb -x): installing the package would start a Prometheus
  # server from its init script.
  PROMTOOL="$here/.deps/prometheus/usr/bin/promtool"
  if [ ! -x "$PROMTOOL" ]; then
    echo "install-deps: fetching promtool (Debian's prometheus package) into .deps" >&2
    prom_debs="$here/.deps/apt-prometheus"
    mkdir -p "$prom_debs"
    $SUDO apt-get update -qq
    rm -f "$prom_debs"/prometheus_*.deb
    (cd "$prom_debs" && apt-get -o APT::Sandbox::User=root download prometheus >/dev/null)
    rm -rf "$here/.deps/prometheus" && mkdir -p "$here/.deps/prometheus"
    dpkg-deb -x "$prom_debs"/prometheus_*.deb "$here/.deps/prometheus"
    "$PROMTOOL" --version >/dev/null
  fi
  # chromium: the status page test loads the page in headless Chromium and reads its DOM.
  if ! command -v chromium >/dev/null 2>&1; then
    echo "install-deps: installing chromium (for the status page test)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium
  fi
  # systemd-analyze: the tests verify the systemd unit with it (Debian's systemd package; in a
  # container it is only installed, not started).
  if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "install-deps: installing systemd (for systemd-analyze)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends systemd
  fi
  # nftables: the quick start test (tests/quickstart_test.sh) firewalls each namespace machine
  # with the README's port table.
  if ! command -v nft >/dev/null 2>&1; then
    echo "install-deps: installing nftables (for the quick start test)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends nftables
  fi
  # lintian: the package test (tests/deb_test.sh) lints the .deb that `make deb` builds.
  if ! command -v lintian >/dev/null 2>&1; then
    echo "install-deps: installing lintian (for the package test)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends lintian
  fi
  # systemd-nspawn and mmdebstrap: the package test under a real systemd
  # (tests/deb_systemd_test.sh) boots a Debian 12 root it builds with mmdebstrap.
  if ! command -v systemd-nspawn >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "install-deps: installing systemd-container and mmdebstrap (for the systemd package test)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends systemd-container mmdebstrap
  fi
  # Patroni 3.0.2 (etcd3 backend): the auth test runs patronictl through etcd's HTTP gateway.
  # python3-idna is only recommended by python3-urllib3, yet Patroni fails every request
  # without it (docs/clients.md).
  if [ ! -x /usr/bin/patronictl ] || ! /usr/bin/python3 -c 'import idna' 2>/dev/null; then
    echo "install-deps: installing patroni and python3-idna (for the auth test)" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends patroni python3-idna
  fi
  if [ ! -x "$here/tests/s3rver/node_modules/.bin/s3rver" ]; then
    echo "install-deps: installing s3rver (npm) into tests/s3rver" >&2
    (cd "$here/tests/s3rver" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
