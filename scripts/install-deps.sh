#!/usr/bin/env bash
# Installs the Debian packages etcd-steward needs to build, test and run its demo.
# Idempotent: only packages that are not yet installed are passed to apt-get.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcurl4-openssl-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libcli11-dev libzstd-dev libcpp-httplib-dev
  libabsl-dev libgtest-dev libgmock-dev
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
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The Debian etcd-server package starts a system etcd on 127.0.0.1:2379; we never use it and
  # it must not hold ports or disk, so stop it if systemd started it (no-op in containers).
  if command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi

# With --test: what the test suite needs beyond the build (the S3 protocol server, from npm).
if [ "${1:-}" = "--test" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: installing nodejs and npm" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  # faketime: the safety tests run stewardctl with a clock hours ahead.
  if ! command -v faketime >/dev/null 2>&1; then
    echo "install-deps: installing faketime" >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends faketime
  fi
  here="$(cd "$(dirname "$0")/.." && pwd)"
  if [ ! -x "$here/tests/s3rver/node_modules/.bin/s3rver" ]; then
    echo "install-deps: installing s3rver (npm) into tests/s3rver" >&2
    (cd "$here/tests/s3rver" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
