#!/usr/bin/env bash
# The README's "Production quick start: three machines", run as written on three machines booted
# with systemd as PID 1 (systemd-nspawn containers of a Debian 12 root, tests/systemd/machine.sh).
# Each machine joins a network namespace this test makes (10.0.0.11-13 on a bridge, as the
# README's addresses); the bridge's own namespace, 10.0.0.10, is "your own machine".
#
# The README's code blocks are read from README.md and run; where the test differs, it says so:
#   1. `make deb` is this test's scripts/build-deb.sh of the build dir it is given (make test
#      built it); the .deb is bind-mounted read-only at /debs in each machine, and `sudo apt
#      install ./etcd-steward_*_amd64.deb` runs there as written. apt installs from the root's
#      cache (the machines have no route out). `sudo` is a shim in each machine that runs the
#      command (the test is root).
#   2. `pki init` runs as written on n1; ca.crt and ca.key are then copied to n2 and n3 with
#      ca.key at mode 0600, as the README says.
#   3. The config block is written to /etc/steward/node.yaml on each machine with node.name and
#      node.data_dir set per machine as its comment says, and the store line replaced by the
#      README's own alternative, file:///mnt/nfs/etcd-backups: /mnt/nfs is one directory of this
#      machine bound into all three (as NFS would be), etcd-backups created once.
#   4. The port table becomes a firewall in each machine's namespace (nftables: input dropped but
#      for loopback, replies, ICMP and exactly the table's ports): the cluster forming behind it
#      shows that the table names every port the agents need.
#   5. The systemd block runs as written in each machine.
#   6. The check block runs as written on n1 (`status` until it exits 0, `list-backups` until it
#      lists a backup, `backup`), then the command "from your own machine" with a copy of the
#      config and the admin certificate (stewardctl of the build dir, in the bridge's namespace).
# Then, beyond the steps, with keys written from your own machine (etcdctl, admin certificate):
#   7. n2 is powered off and its /var/lib/steward emptied; once it boots, it rejoins as a new
#      member and serves the keys;
#   8. all three are powered off and booted again: the same members come back with the keys.
# Skips (77) without root or without systemd-nspawn/mmdebstrap. Bounded waits; the machines are
# powered off and removed, the namespaces deleted (trap), and nothing may be left behind.
#
#   tests/quickstart_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
MACHINE_TAG=quickstart_test
# shellcheck source=tests/systemd/machine.sh
source "$src/tests/systemd/machine.sh"
fail() { echo "quickstart_test: FAIL: $*" >&2; exit 1; }
note() { echo "quickstart_test: $*"; }
t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

machine_require
for tool in ip nft etcdctl python3 dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (scripts/install-deps.sh --test installs it)"
done

work="$(mktemp -d /tmp/steward-quickstart-XXXXXX)"
tag="qs$$"                      # namespace, link and machine names of this run
ns_made=()

cleanup() {
  local rc=$?
  set +e
  if ! machine_cleanup; then
    echo "quickstart_test: FAIL: a machine left something behind (above)" >&2
    rc=1
  fi
  local i
  for i in "${ns_made[@]}"; do ip netns del "$i" 2>/dev/null; done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# --- The README's blocks -------------------------------------------------------------------------
section="$work/quickstart.md"
awk '/^## Production quick start/ { on = 1; next } on && /^## / { exit } on' "$src/README.md" >"$section"
[ -s "$section" ] || fail "README.md has no \"Production quick start\" section"
# block N: the Nth fenced code block of the section (any language), without its fences.
block() {
  awk -v want="$1" '/^```/ { if (open) { open = 0; next } open = 1; n++; next }
                    open && n == want { print }' "$section"
}
install_block=$(block 1); pki_block=$(block 2); config_block=$(block 3)
systemd_block=$(block 4); check_block=$(block 5)
grep -q 'make deb' <<<"$install_block" && grep -q 'apt install ./etcd-steward_' <<<"$install_block" ||
  fail "block 1 is not the package's install: $install_block"
grep -q 'pki init' <<<"$pki_block" || fail "block 2 is not pki init: $pki_block"
grep -q '^cluster:' <<<"$config_block" || fail "block 3 is not the config"
grep -q 'systemctl' <<<"$systemd_block" || fail "block 4 is not the systemd start"
grep -q 'stewardctl status' <<<"$check_block" || fail "block 5 is not the check"
ports=$(awk -F'|' '/^\| [0-9]+ \|/ { gsub(/ /, "", $2); print $2 }' "$section" | paste -sd, -)
[ -n "$ports" ] || fail "no port table in the section"
note "the README's ports: $ports"

# --- The machines --------------------------------------------------------------------------------
ip netns add "$tag-hub" && ns_made+=("$tag-hub")
ip -n "$tag-hub" link set lo up
ip -n "$tag-hub" link add br0 type bridge
ip -n "$tag-hub" addr add 10.0.0.10/24 dev br0
ip -n "$tag-hub" link set br0 up
mkdir -p "$work/nfs" "$work/debs"
for i in 1 2 3; do
  ns="$tag-n$i"
  ip netns add "$ns" && ns_made+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "n$i" netns "$tag-hub"
  ip -n "$ns" addr add "10.0.0.1$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$tag-hub" link set "n$i" master br0
  ip -n "$tag-hub" link set "n$i" up
done

# "make deb", then the root with the package's dependencies in its apt cache.
t0=$(date +%s.%N)
deb="$("$src/scripts/build-deb.sh" "$build" "$work/debs")" || fail "build-deb.sh (make deb)"
machine_root_for_deb "$build" "$deb" || fail "no root for the machines"
note "make deb and the machines' root: $(since "$t0") s"

machine() { echo "$tag-n$1"; }
# on I CMD...: CMD in machine I (its root's home directory), stdin kept, bounded (-t SECS first).
on() { local i=$1; shift; machine_exec "$(machine "$i")" "$@"; }
boot() {
  local i=$1 t; t=$(date +%s.%N)
  machine_boot "$(machine "$i")" --netns "/run/netns/$tag-n$i" --bind "$work/nfs:/mnt/nfs" \
    --bind-ro "$work/debs:/debs" || fail "machine n$i did not boot"
}
for i in 1 2 3; do boot "$i"; done
for i in 1 2 3; do
  on "$i" sh -c 'printf "%s\n" "#!/bin/sh" "# the quick start test: root already" "exec \"\$@\"" >/usr/local/bin/sudo &&
    chmod 0755 /usr/local/bin/sudo' || fail "n$i: the sudo shim"
done
on 1 ip -4 addr show eth0 | grep -q 10.0.0.11 || fail "machine n1 has no 10.0.0.11"
on 1 readlink /proc/1/exe | grep -q systemd || fail "machine n1's PID 1 is not systemd"
journal() { on "$1" journalctl -b -u steward.service -o cat --no-pager 2>/dev/null | tail -n "${2:-20}"; }
show_journals() { local i; for i in 1 2 3; do echo "--- n$i: journalctl -u steward" >&2; journal "$i" 30 >&2 || true; done; }

# --- 1. Install, on each machine ----------------------------------------------------------------
apt_line=$(sed -e 's/[[:space:]]*#.*$//' -e '/^$/d' <<<"$install_block" | grep -v '^make deb$')
[ "$(wc -l <<<"$apt_line")" = 1 ] || fail "block 1 has more than 'make deb' and the apt line: update this test"
for i in 1 2 3; do
  t0=$(date +%s.%N)
  # apt asks "Do you want to continue?": answered as a user would.
  echo y | on "$i" -t 300 bash -euo pipefail -c "cd /debs && $apt_line" >"$work/install-$i.log" 2>&1 ||
    fail "the install on n$i failed: $(tail -5 "$work/install-$i.log")"
  on "$i" test -x /usr/bin/steward || fail "n$i: no /usr/bin/steward after the install"
  on "$i" test -x /usr/bin/etcd || fail "n$i: apt did not install etcd-server (recommended)"
  on "$i" test -d /var/lib/steward || fail "n$i: no /var/lib/steward"
  if [ "$(on "$i" systemctl is-active etcd 2>&1)" = active ]; then fail "n$i: Debian's etcd.service runs after the install"; fi
  note "1. n$i: '$apt_line' in $(since "$t0") s"
done

# --- 2. The CA ----------------------------------------------------------------------------------
on 1 bash -euo pipefail -c "$pki_block" >"$work/pki.log" 2>&1 || fail "pki init failed: $(cat "$work/pki.log")"
for f in ca.crt ca.key admin.crt admin.key; do on 1 test -s "/etc/steward/pki/$f" || fail "pki init made no $f"; done
for i in 2 3; do
  on "$i" install -d -m 0700 /etc/steward/pki
  on 1 cat /etc/steward/pki/ca.crt | on "$i" install -m 0644 /dev/stdin /etc/steward/pki/ca.crt
  on 1 cat /etc/steward/pki/ca.key | on "$i" install -m 0600 /dev/stdin /etc/steward/pki/ca.key
done
note "2. CA made on n1 and copied to n2, n3"

# --- 3. One config per node ---------------------------------------------------------------------
for i in 1 2 3; do
  awk -v i="$i" '
    /^node:/ { in_node = 1; print; next }
    /^[a-z]/ { in_node = 0 }
    in_node && /^  name: n1/ { print "  name: n" i; next }
    in_node && /^  data_dir: / { sub(/n1$/, "n" i); print; next }
    /^  store: s3:/ { print "  store: file:///mnt/nfs/etcd-backups"; skip = 1; next }
    skip && /^ +#/ { next }
    { skip = 0; print }' <<<"$config_block" | on "$i" install -D -m 0600 /dev/stdin /etc/steward/node.yaml
done
on 1 grep -q 'name: n1' /etc/steward/node.yaml || fail "n1's config lost its name"
on 3 grep -q 'data_dir: /var/lib/steward/n3' /etc/steward/node.yaml || fail "n3's config has not its data_dir"
on 1 mkdir /mnt/nfs/etcd-backups   # "created once"
note "3. configs written; the store is file:///mnt/nfs/etcd-backups"

# --- 4. The ports --------------------------------------------------------------------------------
# Each machine's netfilter tables belong to its network namespace: this machine's nft sets them.
for i in 1 2 3; do
  ip netns exec "$tag-n$i" nft -f - <<NFT || fail "nft refused the firewall on n$i"
table inet quickstart {
  chain input {
    type filter hook input priority 0; policy drop;
    iif lo accept
    ct state established,related accept
    ip protocol icmp accept
    tcp dport { $ports } accept
  }
}
NFT
done
note "4. firewalls: only $ports open"

# --- 5. Start the agents under systemd ----------------------------------------------------------
for i in 1 2 3; do
  on "$i" -t 120 bash -euo pipefail -c "$systemd_block" >"$work/start-$i.log" 2>&1 ||
    fail "n$i: '$systemd_block' failed: $(cat "$work/start-$i.log")"
done
t_formed=$(date +%s.%N)
note "5. on each machine: $systemd_block"

# --- 6. Check the cluster and the first backup ---------------------------------------------------
mapfile -t checks < <(sed -e 's/[[:space:]]*#.*$//' -e '/^$/d' <<<"$check_block")
[ ${#checks[@]} = 3 ] || fail "the check block has ${#checks[@]} commands, not 3: update this test"
# status_ok I: the check block's status exits 0 on machine I and names every node.
status_ok() {
  on "$1" -t 30 bash -c "${checks[0]}" >"$work/status.out" 2>&1 &&
    grep -q n1 "$work/status.out" && grep -q n2 "$work/status.out" && grep -q n3 "$work/status.out"
}
wait_status() {  # I SECS WHAT
  local n
  for n in $(seq 1 "$2"); do
    status_ok "$1" && return 0
    sleep 1
  done
  show_journals
  fail "$3: '${checks[0]}' on n$1 did not exit 0 within $2 s: $(cat "$work/status.out")"
}
wait_status 1 180 "6. the cluster did not form"
note "6. '${checks[0]}' exits 0, $(since "$t_formed") s after the agents started:"
sed 's/^/      /' "$work/status.out"
ok=""
for _ in $(seq 1 60); do
  on 1 bash -c "${checks[1]}" >"$work/list.out" 2>&1 && grep -Eq '^[0-9]{8}T[0-9]{6}Z' "$work/list.out" && { ok=1; break; }
  sleep 1
done
[ -n "$ok" ] || fail "'${checks[1]}' listed no backup within 60 s: $(cat "$work/list.out")"
note "6. '${checks[1]}' lists the first backup: $(grep -Eo '^[0-9]{8}T[0-9]{6}Z[^ ]*' "$work/list.out" | head -1)"
on 1 -t 120 bash -c "${checks[2]}" >"$work/backup.out" 2>&1 || fail "'${checks[2]}' failed: $(cat "$work/backup.out")"
name=$(tail -1 "$work/backup.out")
[ -f "$work/nfs/etcd-backups/main/backups/$name/meta.json" ] || fail "'${checks[2]}' printed '$name', which is not in the store"
note "6. '${checks[2]}' took $name"

# From your own machine: a copy of the config and the admin certificate, no root's files.
remote=$(grep -o 'stewardctl status --config node.yaml[^`]*' "$section" | head -1)
[ -n "$remote" ] || fail "the section no longer shows the command from your own machine"
mkdir -p "$work/mine"
for f in ca.crt admin.crt admin.key; do on 1 cat "/etc/steward/pki/$f" >"$work/mine/$f"; done
on 1 cat /etc/steward/node.yaml >"$work/mine/node.yaml"
mine() { ip netns exec "$tag-hub" env -C "$work/mine" PATH="$build:/usr/sbin:/usr/bin:/sbin:/bin" "$@"; }
mine timeout 60 bash -c "$remote" >"$work/remote.out" 2>&1 || fail "'$remote' from your own machine failed: $(cat "$work/remote.out")"
grep -q 'n2' "$work/remote.out" || fail "the remote status does not show n2"
note "6. from your own machine (10.0.0.10): '$remote' exits 0"

# --- 7. Beyond the steps: a machine whose disk is wiped rejoins ---------------------------------
# etcdctl from your own machine, through the endpoint of node I (1, 2, 3).
ectl() {
  local i=$1; shift
  mine env ETCDCTL_API=3 etcdctl --endpoints="https://10.0.0.1$i:2379" --cacert=ca.crt --cert=admin.crt \
    --key=admin.key --command-timeout=5s "$@"
}
member_of() {  # I: the member ID of node nI, from the member list
  ectl 1 member list -w simple 2>/dev/null | awk -F', ' -v n="n$1" '$3 == n { print $1 }'
}
ectl 1 put /qs/before-wipe v1 >/dev/null || fail "put /qs/before-wipe"
old2=$(member_of 2)
[ -n "$old2" ] || fail "no member n2 in the member list"
t0=$(date +%s.%N)
machine_poweroff "$(machine 2)" || fail "power off n2"
# While it is off, its disk: what this machine sees of it is the overlay's upper dir.
upper="$(machine_upper "$(machine 2)")"
[ -d "$upper/var/lib/steward/n2" ] || fail "n2 has no data dir in its overlay ($upper/var/lib/steward/n2)"
find "$upper/var/lib/steward" -mindepth 1 -delete
ectl 1 put /qs/while-off v2 >/dev/null || fail "put /qs/while-off (two of three members up)"
boot 2
rejoined() {
  local id v
  id=$(member_of 2) && [ -n "$id" ] && [ "$id" != "$old2" ] || return 1
  v=$(ectl 2 get --print-value-only /qs/while-off 2>/dev/null) && [ "$v" = v2 ] || return 1
  status_ok 1
}
ok=""
for _ in $(seq 1 240); do rejoined && { ok=1; break; }; sleep 1; done
[ -n "$ok" ] || { show_journals; fail "7. n2 did not rejoin within 240 s of its boot (member $(member_of 2), was $old2)"; }
[ "$(ectl 2 get --print-value-only /qs/before-wipe)" = v1 ] || fail "7. n2 does not serve /qs/before-wipe"
note "7. n2 powered off, its /var/lib/steward emptied, booted: rejoined as member $(member_of 2) (was $old2), $(since "$t0") s from the power off"

# --- 8. Beyond the steps: all three powered off and booted again --------------------------------
ectl 1 put /qs/before-poweroff v3 >/dev/null || fail "put /qs/before-poweroff"
members=$(for i in 1 2 3; do member_of "$i"; done | paste -sd' ' -)
t0=$(date +%s.%N)
for i in 1 2 3; do machine_poweroff "$(machine "$i")" || fail "power off n$i"; done
for i in 1 2 3; do boot "$i"; done
wait_status 1 180 "8. the cluster did not come back after all three booted"
now=$(for i in 1 2 3; do member_of "$i"; done | paste -sd' ' -)
[ "$now" = "$members" ] || fail "8. the members are '$now', were '$members'"
for k in before-wipe:v1 while-off:v2 before-poweroff:v3; do
  for i in 1 2 3; do
    [ "$(ectl "$i" get --print-value-only "/qs/${k%%:*}")" = "${k#*:}" ] || fail "8. n$i does not serve /qs/${k%%:*}"
  done
done
note "8. all three powered off and booted: the same members ($members) and every key, $(since "$t0") s from the first power off"

for i in 1 2 3; do machine_poweroff "$(machine "$i")" || fail "power off n$i"; done
note "PASS in $(since "$t_start") s"
