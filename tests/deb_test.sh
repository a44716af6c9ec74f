#!/usr/bin/env bash
# The Debian package (scripts/build-deb.sh, docs/packaging.md) on this machine, as root:
#   1. two builds (this version and a higher one) pass lintian with no error or warning;
#   2. `dpkg -i` installs the files with their modes; the installed agent runs; the unit verifies;
#   3. an agent started from /usr/bin/steward as the unit starts it (a one-node cluster on
#      127.0.251.11, TLS off) keeps its etcd through `dpkg -i` of the higher version and the
#      SIGHUP of `systemctl reload`: same etcd pid, the agent re-execs the new binary, answers;
#   4. `dpkg -r` removes the files and keeps /etc/steward and /var/lib/steward with their data;
#   5. `dpkg -P` keeps them while they hold data, and removes them once they are empty.
# systemd is not PID 1 here: the maintainer scripts skip systemctl, and the test plays its part.
# Leaves the machine as it found it (trap). Skips (77) when not root, or when the machine
# already has the package, /etc/steward or /var/lib/steward: those are not the test's to touch.
#
#   tests/deb_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
skip() { echo "deb_test: SKIP: $*"; exit 77; }
fail() { echo "deb_test: FAIL: $*" >&2; [ -f "${log:-/nonexistent}" ] && tail -n 30 "$log" >&2; exit 1; }
note() { echo "deb_test: $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (it installs the package with dpkg)"
pkg_status() { dpkg-query -W -f='${db:Status-Status}' etcd-steward 2>/dev/null || true; }
case "$(pkg_status)" in
  "" | not-installed) ;;
  *) skip "etcd-steward is already known to dpkg here ($(pkg_status)); the test would replace it" ;;
esac
for d in /etc/steward /var/lib/steward; do
  [ ! -e "$d" ] || skip "$d exists: an operator's state, not the test's to touch"
done
for tool in lintian dpkg-deb systemd-analyze /usr/bin/etcd; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (scripts/install-deps.sh --test installs it)"
done

work="$(mktemp -d /tmp/steward-deb-test-XXXXXX)"
log="$work/agent.log"
agent_pid=""
etcd_pid=""
mask=/etc/systemd/system/etcd.service
mask_before=no
if [ -e "$mask" ] || [ -L "$mask" ]; then mask_before=yes; fi
cleanup() {
  set +e
  if [ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null; then
    kill -TERM "$agent_pid"
    for _ in $(seq 1 60); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$agent_pid" 2>/dev/null
  fi
  if [ -n "$etcd_pid" ] && [ -d "/proc/$etcd_pid" ] &&
     [ "$(readlink "/proc/$etcd_pid/exe")" = /usr/bin/etcd ]; then
    kill -KILL "$etcd_pid"
  fi
  case "$(pkg_status)" in "" | not-installed) ;; *) dpkg_run -P etcd-steward >/dev/null 2>&1 ;; esac
  # Both were absent when the test began (checked above).
  rm -rf /etc/steward /var/lib/steward
  if [ "$mask_before" = no ] && [ -L "$mask" ]; then rm -f "$mask"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# dpkg_run ARGS: dpkg, waiting (bounded) while another dpkg or apt holds the lock.
dpkg_run() {
  for _ in $(seq 1 60); do
    if dpkg "$@" >"$work/dpkg.out" 2>&1; then cat "$work/dpkg.out"; return 0; fi
    grep -q "lock" "$work/dpkg.out" || { cat "$work/dpkg.out" >&2; return 1; }
    sleep 2
  done
  cat "$work/dpkg.out" >&2
  return 1
}
# wait_for SECONDS COMMAND...: COMMAND succeeds within SECONDS, polled every 0.5 s.
wait_for() {
  local n=$(($1 * 2)); shift
  for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
mode_is() { [ "$(stat -c '%a %U:%G' "$1")" = "$2" ] || fail "$1 is $(stat -c '%a %U:%G' "$1"), want $2"; }

# 1. Two builds, both lintian-clean.
upstream="$(sed -n 's/^project([^)]* VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
deb1="$("$src/scripts/build-deb.sh" "$build" "$work/v1")" || fail "build-deb.sh"
deb2="$(STEWARD_DEB_VERSION="$upstream+test2" "$src/scripts/build-deb.sh" "$build" "$work/v2")" ||
  fail "build-deb.sh (second version)"
for deb in "$deb1" "$deb2"; do
  # (lintian says on stderr that it should not run as root: only that is left out.)
  if ! out="$(lintian --fail-on error,warning "$deb" 2>&1)"; then
    grep -v "running with root privileges" <<<"$out" >&2
    fail "lintian: $(basename "$deb")"
  fi
done
note "built and linted $(basename "$deb1") and $(basename "$deb2")"
contents="$(dpkg-deb -c "$deb1")"
for f in usr/share/man/man1/steward.1.gz usr/share/man/man1/stewardctl.1.gz \
         usr/share/doc/etcd-steward/copyright usr/share/doc/etcd-steward/changelog.Debian.gz; do
  grep -q " \./$f\$" <<<"$contents" || fail "$f is not in the package"
done

# 2. Install.
dpkg_run -i "$deb1" >/dev/null || fail "dpkg -i $(basename "$deb1")"
[ "$(pkg_status)" = installed ] || fail "after dpkg -i the package is $(pkg_status)"
for f in /usr/bin/steward /usr/bin/stewardctl /usr/lib/systemd/system/steward.service \
         /usr/share/bash-completion/completions/stewardctl \
         /usr/share/doc/etcd-steward/examples/node.yaml \
         /usr/share/doc/etcd-steward/examples/steward-alerts.yml; do
  [ -s "$f" ] || fail "missing or empty after install: $f"
done
mode_is /usr/bin/steward "755 root:root"
mode_is /usr/bin/stewardctl "755 root:root"
mode_is /usr/lib/systemd/system/steward.service "644 root:root"
mode_is /etc/steward "750 root:root"
mode_is /var/lib/steward "700 root:root"
if readelf -S /usr/bin/steward | grep -q '\.debug_info'; then fail "/usr/bin/steward is not stripped"; fi
# Captured first: grep -q stops reading at its match, and with pipefail the writer's SIGPIPE
# would count as a failure.
version=$(/usr/bin/steward --version) || fail "installed steward --version"
grep -q "^steward $upstream" <<<"$version" || fail "installed steward --version"
help=$(/usr/bin/stewardctl --help) || fail "installed stewardctl --help"
grep -q restore-backup <<<"$help" || fail "installed stewardctl --help"
grep -q '^ExecStart=/usr/bin/steward --config /etc/steward/node.yaml$' \
  /usr/lib/systemd/system/steward.service || fail "the unit's ExecStart"
if grep -q /usr/local /usr/lib/systemd/system/steward.service; then fail "the unit names /usr/local"; fi
systemd-analyze verify /usr/lib/systemd/system/steward.service || fail "the installed unit does not verify"
# No config yet: the unit is left disabled (postinst).
[ ! -e /etc/systemd/system/multi-user.target.wants/steward.service ] ||
  fail "the unit was enabled without a config"
if dpkg-query -W -f='${db:Status-Status}' etcd-server 2>/dev/null | grep -q installed; then
  [ -L "$mask" ] || fail "etcd-server is installed and its etcd.service is not masked"
fi
note "installed $(basename "$deb1"): files, modes, unit ok"

# 3. An agent as the unit runs it; the upgrade and the reload keep its etcd.
data=/var/lib/steward/n1
cat > /etc/steward/node.yaml <<YAML
# Written by tests/deb_test.sh
cluster:
  name: debtest
  size: 1
  nodes:
    - {name: n1, host: 127.0.251.11}
node:
  name: n1
  data_dir: $data
etcd:
  binary: /usr/bin/etcd
  stop_timeout: 5s
tls:
  mode: off
YAML
chmod 0600 /etc/steward/node.yaml
/usr/bin/steward --config /etc/steward/node.yaml >"$log" 2>&1 &
agent_pid=$!
serving() { /usr/bin/stewardctl status --config /etc/steward/node.yaml; }
wait_for 90 serving || fail "etcd did not serve within 90 s (agent log below)"
wait_for 10 test -s "$data/etcd.pid" || fail "no $data/etcd.pid"
etcd_pid="$(awk '{print $1; exit}' "$data/etcd.pid")"
[ "$(readlink "/proc/$etcd_pid/exe")" = /usr/bin/etcd ] || fail "etcd.pid names $etcd_pid, not an etcd"
note "agent pid $agent_pid runs etcd pid $etcd_pid"

dpkg_run -i "$deb2" >/dev/null || fail "dpkg -i $(basename "$deb2") (upgrade)"
[ "$(dpkg-query -W -f='${Version}' etcd-steward)" = "$upstream+test2-1" ] || fail "not upgraded"
kill -0 "$agent_pid" || fail "the upgrade stopped the agent"
kill -0 "$etcd_pid" || fail "the upgrade stopped etcd"
mode_is /etc/steward "750 root:root"
mode_is /var/lib/steward "700 root:root"
# The agent still runs the replaced binary until the reload.
[[ "$(readlink "/proc/$agent_pid/exe")" == *"(deleted)" ]] ||
  fail "dpkg did not replace /usr/bin/steward under the agent"
kill -HUP "$agent_pid"   # ExecReload=/bin/kill -HUP $MAINPID
reexeced() { [ "$(readlink "/proc/$agent_pid/exe")" = /usr/bin/steward ]; }
wait_for 30 reexeced || fail "the agent did not re-exec /usr/bin/steward within 30 s"
wait_for 60 serving || fail "the reloaded agent did not answer within 60 s"
grep -q "SIGHUP: restarting the agent" "$log" || fail "no SIGHUP restart in the agent log"
# (etcd served throughout, so `serving` proves nothing about the new agent: wait for its word.)
adopted() { grep -q "adopted running etcd pid $etcd_pid" "$log"; }
wait_for 60 adopted || fail "the new agent did not adopt etcd $etcd_pid within 60 s"
kill -0 "$etcd_pid" || fail "etcd $etcd_pid died in the reload"
[ "$(awk '{print $1; exit}' "$data/etcd.pid")" = "$etcd_pid" ] || fail "etcd's pid changed"
note "upgrade + reload: agent re-exec'd, etcd pid $etcd_pid kept"

kill -TERM "$agent_pid"
stopped() { ! kill -0 "$agent_pid" 2>/dev/null; }
wait_for 60 stopped || fail "the agent did not stop within 60 s of SIGTERM"
wait "$agent_pid" || true
agent_pid=""
etcd_gone() { [ ! -d "/proc/$etcd_pid" ]; }
wait_for 10 etcd_gone || fail "etcd $etcd_pid outlived its agent's SIGTERM"
etcd_pid=""

# 4. Remove: the files go, the config and the data stay.
dpkg_run -r etcd-steward >/dev/null || fail "dpkg -r"
for f in /usr/bin/steward /usr/bin/stewardctl /usr/lib/systemd/system/steward.service \
         /usr/share/doc/etcd-steward/copyright; do
  [ ! -e "$f" ] || fail "$f is left after dpkg -r"
done
[ -f /etc/steward/node.yaml ] || fail "dpkg -r removed the config"
[ -d "$data/etcd" ] || fail "dpkg -r removed etcd's data"
mode_is /var/lib/steward "700 root:root"
note "removed: files gone, config and data kept"

# 5. Purge: dirs holding data stay; empty ones go.
dpkg_run -P etcd-steward >/dev/null || fail "dpkg -P"
case "$(pkg_status)" in "" | not-installed) ;; *) fail "after dpkg -P the package is $(pkg_status)" ;; esac
[ -f /etc/steward/node.yaml ] || fail "dpkg -P removed the config"
[ -d "$data/etcd" ] || fail "dpkg -P removed etcd's data"
rm -rf "${data:?}" /etc/steward/node.yaml
dpkg_run -i "$deb2" >/dev/null || fail "dpkg -i (again)"
dpkg_run -P etcd-steward >/dev/null || fail "dpkg -P (empty dirs)"
for d in /etc/steward /var/lib/steward; do
  [ ! -e "$d" ] || fail "dpkg -P left the empty $d"
done
if [ "$mask_before" = yes ]; then
  [ -L "$mask" ] || fail "purge removed an etcd.service mask it did not make"
elif [ -e "$mask" ] || [ -L "$mask" ]; then
  fail "purge left the etcd.service mask it made"
fi
[ ! -e /etc/systemd/system/steward.service ] || fail "purge left steward.service masked"
note "purged: kept dirs with data, removed empty ones"
note "ok"
