#!/usr/bin/env bash
# The Debian package under a real systemd (issue 51): `make deb`'s package installed with apt in
# a booted Debian 12 machine (systemd-nspawn, tests/systemd/machine.sh), with Debian's etcd-server
# 3.4 (the package recommends it), a one-node cluster with TLS on (tls.mode: issued, the CA of
# `stewardctl pki init`) and a file backup store. Each check fails with what went wrong:
#   1. `apt-get install ./etcd-steward_<v>.deb etcd-client` (the unit left disabled: no config);
#   2. `systemctl enable --now steward`: etcd serves a put and a get; `systemctl status` shows the
#      agent's sd_notify status; is-active says active; `journalctl -u steward` holds the agent's
#      lines; the unit's hardening took effect (NoNewPrivs);
#   3. `systemctl reload steward`: same MainPID, the agent re-execs and adopts etcd (same pid);
#   4. `kill -9` of the MainPID: systemd restarts the agent (Restart=always), which adopts the
#      same etcd;
#   5. `apt-get install ./etcd-steward_<v+1>.deb`: same etcd pid, the agent re-exec'd the new
#      binary (same MainPID), config and data as they were;
#   6. hardening against the agent's own work: the leader's first backup in the file store, a
#      `stewardctl backup`, and `stewardctl restore-backup` of it, which the agent carries out in
#      its data dir under the unit;
#   7. a reboot (power off, boot the same overlay) with the unit enabled: the same member ID and
#      the keys;
#   8. `systemctl stop steward`: etcd stops, with no SIGKILL from the agent or from systemd;
#   9. `apt-get remove` (the agent running): prerm stops it; /etc/steward and /var/lib/steward
#      stay; `apt-get purge`: they stay while they hold data; empty, a second purge removes them,
#      and the etcd.service mask the package made.
# The machine has a private network (loopback only): apt installs from the root's apt cache,
# which machine_root filled with the package's dependencies and etcd.
# Skips (77) without root or without systemd-nspawn/mmdebstrap (scripts/install-deps.sh --test).
#
#   tests/deb_systemd_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
MACHINE_TAG=deb_systemd_test
# shellcheck source=tests/systemd/machine.sh
source "$src/tests/systemd/machine.sh"
note() { echo "deb_systemd_test: $*"; }
t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

machine_require
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null 2>&1 || { echo "deb_systemd_test: FAIL: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

work="$(mktemp -d /tmp/steward-deb-systemd-XXXXXX)"
name="debsd-$$"
booted=no
cleanup() {
  local rc=$?
  set +e
  if ! machine_cleanup; then
    echo "deb_systemd_test: FAIL: the machine left something behind (above)" >&2
    rc=1
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "deb_systemd_test: FAIL: $*" >&2
  if [ "$booted" = yes ]; then
    echo "--- journalctl -u steward (last 40 lines)" >&2
    machine_exec "$name" journalctl -b -u steward --no-pager -n 40 >&2 || true
  fi
  exit 1
}

# 0. Two builds (as tests/deb_test.sh), and the root with their dependencies in its apt cache.
upstream="$(sed -n 's/^project([^)]* VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
mkdir -p "$work/debs"
deb1="$("$src/scripts/build-deb.sh" "$build" "$work/debs")" || fail "build-deb.sh"
deb2="$(STEWARD_DEB_VERSION="$upstream+test2" "$src/scripts/build-deb.sh" "$build" "$work/debs")" ||
  fail "build-deb.sh (second version)"
v1="$upstream-1" v2="$upstream+test2-1"
t0=$(date +%s.%N)
machine_root_for_deb "$build" "$deb1" || fail "no root for the machines"
note "root ready in $(since "$t0") s ($MACHINE_ROOT)"

mx() { machine_exec "$name" "$@"; }
boot() {
  local t; t=$(date +%s.%N)
  machine_boot "$name" --private-network --bind-ro "$work/debs:/debs" || fail "the machine did not boot"
  booted=yes
  note "booted in $(since "$t") s"
}
# wait_for SECONDS COMMAND...: COMMAND succeeds within SECONDS, polled every 0.5 s.
wait_for() {
  local n=$(($1 * 2)); shift
  for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
prop() { mx systemctl show -p "$1" --value steward.service; }
journal() { mx journalctl -b -u steward.service -o cat --no-pager; }
# mark: the journal's length now; after MARK: what came after it.
mark() { journal | wc -l; }
after() { journal | tail -n "+$(($1 + 1))"; }
journal_has() {  # MARK TEXT: a line after MARK holds TEXT
  local j; j=$(after "$1") || return 1
  grep -qF -- "$2" <<<"$j"
}
data=/var/lib/steward/n1
etcdctl() {
  mx env ETCDCTL_API=3 etcdctl --endpoints=https://127.0.251.11:2379 --cacert=/etc/steward/pki/ca.crt \
    --cert=/etc/steward/pki/admin.crt --key=/etc/steward/pki/admin.key --command-timeout=5s "$@"
}
ctl() { mx stewardctl --config /etc/steward/node.yaml "$@"; }
etcd_pid() {  # the pid in etcd.pid, if it is a running /usr/bin/etcd
  local p
  p=$(mx awk '{ print $1; exit }' "$data/etcd.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && [ "$(mx readlink "/proc/$p/exe" 2>/dev/null)" = /usr/bin/etcd ] || return 1
  echo "$p"
}
etcd_alive() { [ "$(mx readlink "/proc/$1/exe" 2>/dev/null)" = /usr/bin/etcd ]; }
member_id() { local l; l=$(etcdctl member list -w simple) && [ -n "$l" ] && echo "${l%%,*}"; }
get() { etcdctl get --print-value-only "$1"; }
serving() { [ "$(get /probe 2>/dev/null)" = ok ] || etcdctl put /probe ok >/dev/null; get /probe >/dev/null; }
agent_answers() { ctl status >/dev/null; }

boot

# 1. Install as a user would: the package from a file, its recommends (etcd-server), etcdctl.
t0=$(date +%s.%N)
apt_out=$(mx -t 300 apt-get install -y "/debs/$(basename "$deb1")" etcd-client 2>&1) ||
  { echo "$apt_out" >&2; fail "apt-get install $(basename "$deb1") etcd-client"; }
note "apt-get install $(basename "$deb1") etcd-client (etcd-server recommended): $(since "$t0") s"
[ "$(mx dpkg-query -W -f='${Version}' etcd-steward)" = "$v1" ] || fail "etcd-steward $v1 is not installed"
[ "$(mx systemctl is-enabled steward 2>&1)" = disabled ] || fail "the unit is enabled without a config"
[ "$(mx systemctl is-enabled etcd 2>&1)" = masked ] || fail "Debian's etcd.service is not masked"
# etcd-server's postinst starts Debian's etcd.service unless it is masked by then: the
# package's preinst masks it before apt configures anything.
if [ "$(mx systemctl is-active etcd 2>&1)" = active ]; then
  fail "Debian's etcd.service runs after the install (the preinst's mask came too late)"
fi
unit=$(mx systemctl cat steward) || fail "systemctl cat steward"
grep -q '^ExecStart=/usr/bin/steward --config /etc/steward/node.yaml$' <<<"$unit" ||
  fail "the installed unit's ExecStart is not /usr/bin/steward"
mx systemd-analyze verify steward.service || fail "systemd-analyze verify steward.service"

# 2. A one-node config, TLS on, a file store; enable --now.
mx stewardctl pki init --dir /etc/steward/pki >/dev/null || fail "stewardctl pki init"
mx install -d -m 0700 /var/backups/steward || fail "install -d /var/backups/steward"
mx sh -c 'cat > /etc/steward/node.yaml && chmod 0600 /etc/steward/node.yaml' <<YAML || fail "writing the config"
# Written by tests/deb_systemd_test.sh
cluster:
  name: debsd
  size: 1
  nodes:
    - {name: n1, host: 127.0.251.11}
node:
  name: n1
  data_dir: $data
etcd:
  binary: /usr/bin/etcd
tls:
  mode: issued
  ca_cert: /etc/steward/pki/ca.crt
  ca_key: /etc/steward/pki/ca.key
backup:
  store: file:///var/backups/steward
YAML
config_sum=$(mx sha256sum /etc/steward/node.yaml) || fail "sha256sum"
t0=$(date +%s.%N)
mx -t 120 systemctl enable --now steward || fail "systemctl enable --now steward"
wait_for 90 serving || fail "etcd did not serve a put and a get within 90 s of enable --now"
note "enable --now: etcd served a put and a get after $(since "$t0") s"
[ "$(get /probe)" = ok ] || fail "get /probe"
[ "$(mx systemctl is-active steward)" = active ] || fail "systemctl is-active steward: not active"
status=$(mx systemctl status steward --no-pager) || fail "systemctl status steward exits non-zero"
grep -qE "Status: \"agent $upstream running; etcd supervised\"" <<<"$status" ||
  { echo "$status" >&2; fail "systemctl status shows no sd_notify status of the agent"; }
j=$(journal) || fail "journalctl -u steward"
grep -q "started etcd pid" <<<"$j" || fail "journalctl -u steward holds no agent line ('started etcd pid')"
# etcd, once ready, would send its own READY=1 if it saw the agent's NOTIFY_SOCKET.
if grep -F "Got notification message from PID" <<<"$j" >&2; then fail "systemd got sd_notify messages from a child of the agent"; fi
main=$(prop MainPID)
[ "$main" -gt 0 ] || fail "MainPID is $main"
proc_status=$(mx cat "/proc/$main/status") || fail "reading /proc/$main/status"
grep -qP '^NoNewPrivs:\t1$' <<<"$proc_status" || fail "NoNewPrivileges=yes did not take effect"
wait_for 10 etcd_pid || fail "no running etcd named in $data/etcd.pid"
etcd=$(etcd_pid)
mx test -s "$data/tls/server.crt" || fail "the agent issued no $data/tls/server.crt"
etcdctl put /k before-backup >/dev/null || fail "put /k"
member=$(member_id) || fail "etcdctl member list"
note "agent MainPID $main runs etcd pid $etcd, member $member; status and journal ok"

# 3. Reload: the agent re-execs in place, etcd keeps running and is adopted.
m=$(mark)
mx -t 60 systemctl reload steward || fail "systemctl reload steward"
wait_for 30 journal_has "$m" "SIGHUP: restarting the agent" ||
  fail "systemctl reload: no 'SIGHUP: restarting the agent' in the journal within 30 s (ExecReload?)"
wait_for 60 journal_has "$m" "adopted running etcd pid $etcd" ||
  fail "systemctl reload: the agent did not adopt etcd pid $etcd within 60 s"
[ "$(prop MainPID)" = "$main" ] || fail "systemctl reload: MainPID changed from $main to $(prop MainPID)"
etcd_alive "$etcd" || fail "systemctl reload: etcd pid $etcd is gone"
[ "$(etcd_pid)" = "$etcd" ] || fail "systemctl reload: etcd's pid changed"
wait_for 30 agent_answers || fail "systemctl reload: the agent did not answer stewardctl status within 30 s"
[ "$(mx systemctl is-active steward)" = active ] || fail "systemctl reload: not active after it"
note "reload: MainPID $main re-exec'd, adopted etcd pid $etcd"

# 4. kill -9 of the agent: systemd restarts it; the new agent adopts the same etcd.
m=$(mark)
restarts=$(prop NRestarts)
mx kill -9 "$main" || fail "kill -9 $main"
restarted() { local p; p=$(prop MainPID) && [ "$p" -gt 0 ] && [ "$p" != "$main" ]; }
wait_for 30 restarted ||
  fail "kill -9: systemd did not restart the agent within 30 s (Restart=?; $(prop ActiveState)/$(prop Result))"
[ "$(prop NRestarts)" -gt "$restarts" ] || fail "kill -9: NRestarts did not grow"
wait_for 60 journal_has "$m" "adopted running etcd pid $etcd" ||
  fail "kill -9: the restarted agent did not adopt etcd pid $etcd within 60 s"
etcd_alive "$etcd" || fail "kill -9: etcd pid $etcd is gone"
wait_for 30 agent_answers || fail "kill -9: the restarted agent did not answer within 30 s"
main=$(prop MainPID)
note "kill -9: systemd restarted the agent (MainPID $main), which adopted etcd pid $etcd"

# 5. The next version: the agent reloads in place, etcd keeps running, config and data stay.
m=$(mark)
t0=$(date +%s.%N)
apt_out=$(mx -t 300 apt-get install -y "/debs/$(basename "$deb2")" 2>&1) ||
  { echo "$apt_out" >&2; fail "apt-get install $(basename "$deb2") (upgrade)"; }
[ "$(mx dpkg-query -W -f='${Version}' etcd-steward)" = "$v2" ] || fail "not upgraded to $v2"
wait_for 60 journal_has "$m" "adopted running etcd pid $etcd" ||
  fail "upgrade: the agent did not re-exec and adopt etcd pid $etcd within 60 s"
[ "$(prop MainPID)" = "$main" ] || fail "upgrade: MainPID changed (the agent was restarted, not reloaded)"
[ "$(mx readlink "/proc/$main/exe")" = /usr/bin/steward ] ||
  fail "upgrade: the agent runs $(mx readlink "/proc/$main/exe"), not the new /usr/bin/steward"
etcd_alive "$etcd" || fail "upgrade: etcd pid $etcd is gone"
[ "$(etcd_pid)" = "$etcd" ] || fail "upgrade: etcd's pid changed"
[ "$(mx sha256sum /etc/steward/node.yaml)" = "$config_sum" ] || fail "upgrade: the config changed"
[ "$(get /k)" = before-backup ] || fail "upgrade: /k is not as written"
[ "$(member_id)" = "$member" ] || fail "upgrade: the member ID changed"
[ "$(mx systemctl is-enabled steward)" = enabled ] || fail "upgrade: the unit is no longer enabled"
note "upgrade to $v2 in $(since "$t0") s: MainPID $main re-exec'd, etcd pid $etcd kept, config and data kept"

# 6. The agent's own work under the unit's hardening: backups into the file store, a restore
# into its data dir.
agent_backup() { mx sh -c 'grep -l "\"node\": *\"n1\"" /var/backups/steward/debsd/backups/*/meta.json'; }
wait_for 60 agent_backup || fail "the agent wrote no backup (meta.json by n1) into file:///var/backups/steward within 60 s"
backup=$(ctl backup) || fail "stewardctl backup"
backup=$(tail -n1 <<<"$backup")
list=$(ctl list-backups) || fail "stewardctl list-backups"
grep -qF "$backup" <<<"$list" || fail "list-backups does not list $backup"
etcdctl put /k after-backup >/dev/null || fail "put /k (after the backup)"
t0=$(date +%s.%N)
m=$(mark)
out=$(mx -t 240 stewardctl --config /etc/steward/node.yaml restore-backup "$backup" --yes --wait 180 2>&1) ||
  { echo "$out" >&2; fail "stewardctl restore-backup $backup"; }
wait_for 60 serving || fail "restore: etcd did not serve within 60 s"
[ "$(get /k)" = before-backup ] || fail "restore: /k is '$(get /k)', not the backup's 'before-backup'"
new_etcd=$(etcd_pid) || fail "restore: no etcd after it"
[ "$new_etcd" != "$etcd" ] || fail "restore: etcd was not restarted on the restored data"
j=$(after "$m")
if grep -qiE "permission denied|read-only file system" <<<"$j"; then
  grep -iE "permission denied|read-only file system" <<<"$j" >&2
  fail "restore: the journal shows the unit's sandbox in the way"
fi
etcd=$new_etcd
member=$(member_id) || fail "etcdctl member list (after the restore)"
note "backups by the agent and stewardctl in the file store; restore of $backup in $(since "$t0") s (etcd pid $etcd, member $member)"

# 7. Reboot: the enabled unit brings the node back on its data.
etcdctl put /reboot kept >/dev/null || fail "put /reboot"
t0=$(date +%s.%N)
booted=no
machine_poweroff "$name" || fail "power off"
boot
wait_for 90 serving || fail "reboot: etcd did not serve within 90 s of the boot"
note "reboot: etcd served $(since "$t0") s after the power off began"
[ "$(mx systemctl is-active steward)" = active ] || fail "reboot: steward is not active"
[ "$(member_id)" = "$member" ] || fail "reboot: the member ID is $(member_id), was $member"
[ "$(get /reboot)" = kept ] || fail "reboot: /reboot is gone"
[ "$(get /k)" = before-backup ] || fail "reboot: /k is gone"
etcd=$(etcd_pid) || fail "reboot: no etcd"

# 8. stop: etcd stops gracefully.
# no_sigkill MARK: no SIGKILL after MARK but the agent's "stopping etcd pid N (SIGTERM, SIGKILL
# after ...)" announcement.
no_sigkill() {
  local j; j=$(after "$1" | grep -F SIGKILL | grep -vE 'stopping etcd pid [0-9]+ \(SIGTERM, SIGKILL after' || true)
  [ -z "$j" ] || { echo "$j" >&2; return 1; }
}
m=$(mark)
mx -t 90 systemctl stop steward || fail "systemctl stop steward"
[ "$(mx systemctl is-active steward 2>&1)" = inactive ] || fail "stop: steward is $(mx systemctl is-active steward 2>&1)"
[ "$(prop Result)" = success ] || fail "stop: the unit's Result is $(prop Result)"
if etcd_alive "$etcd"; then fail "stop: etcd pid $etcd still runs"; fi
journal_has "$m" "etcd pid $etcd stopped" || fail "stop: no 'etcd pid $etcd stopped' in the journal"
no_sigkill "$m" || fail "stop: SIGKILL in the journal (above)"
note "stop: etcd pid $etcd stopped gracefully, no SIGKILL"

# 9. remove (agent running), then purge.
mx -t 120 systemctl start steward || fail "systemctl start steward"
wait_for 60 serving || fail "start: etcd did not serve within 60 s"
etcd=$(etcd_pid) || fail "no etcd"
m=$(mark)
mx -t 300 apt-get remove -y etcd-steward >/dev/null 2>&1 || fail "apt-get remove etcd-steward"
if etcd_alive "$etcd"; then fail "remove: etcd pid $etcd still runs"; fi
journal_has "$m" "etcd pid $etcd stopped" || fail "remove: prerm did not stop etcd through the agent"
no_sigkill "$m" || fail "remove: SIGKILL in the journal (above)"
for f in /usr/bin/steward /usr/lib/systemd/system/steward.service; do
  if mx test -e "$f"; then fail "remove: $f is left"; fi
done
for f in /etc/steward/node.yaml /etc/steward/pki/ca.key "$data/etcd/member"; do
  mx test -e "$f" || fail "remove: $f is gone"
done
[ "$(mx systemctl is-enabled steward 2>&1)" = masked ] || fail "remove: the unit is not masked (as debhelper does)"
mx -t 300 apt-get purge -y etcd-steward >/dev/null 2>&1 || fail "apt-get purge etcd-steward"
for f in /etc/steward/node.yaml /etc/steward/pki/ca.key "$data/etcd/member"; do
  mx test -e "$f" || fail "purge: $f (data) is gone"
done
if mx test -e /var/lib/steward/.etcd-service-masked-by-package; then fail "purge: the mask marker is left"; fi
if mx test -L /etc/systemd/system/etcd.service; then fail "purge: the etcd.service mask the package made is left"; fi
if mx test -e /etc/systemd/system/steward.service; then fail "purge: steward.service is still masked"; fi
if mx test -e /etc/systemd/system/multi-user.target.wants/steward.service; then fail "purge: the unit is still enabled"; fi
mx rm -rf /etc/steward /var/lib/steward
mx -t 300 apt-get install -y "/debs/$(basename "$deb2")" >/dev/null 2>&1 || fail "apt-get install (again)"
[ "$(mx systemctl is-enabled steward 2>&1)" = disabled ] || fail "install (again): enabled without a config"
mx -t 300 apt-get purge -y etcd-steward >/dev/null 2>&1 || fail "apt-get purge (empty dirs)"
for d in /etc/steward /var/lib/steward; do
  if mx test -e "$d"; then fail "purge: the empty $d is left"; fi
done
note "remove kept config and data; purge kept them while they held data, removed them empty"

booted=no
machine_poweroff "$name" || fail "power off"
note "ok in $(since "$t_start") s"
