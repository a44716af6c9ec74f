#!/usr/bin/env bash
# The README's "Production quick start: three machines", run as written on three machines made
# of namespaces on this one: each machine is a network namespace (10.0.0.11-13 on a bridge, as
# the README's addresses) with its own mount namespace, in which /etc, /var/lib, /usr/local and
# /mnt are overlays of this machine's: what a step installs or writes stays in that machine.
# A fourth namespace, 10.0.0.10, is "your own machine" for the last step.
#
# The README's code blocks are read from README.md and run; where the test differs, it says so:
#   1. `make build` is what ran before the test suite; `sudo cmake --install build` and `sudo
#      install -d ...` run as written (build = the build dir this test is given), in each machine.
#      `sudo` is a shim in the machine's /usr/local/bin that runs the command (the test is root).
#   2. `pki init` runs as written on n1; ca.crt and ca.key are then copied to n2 and n3 with
#      ca.key at mode 0600, as the README says.
#   3. The config block is written to /etc/steward/node.yaml on each machine with node.name and
#      node.data_dir set per machine as its comment says, and the store line replaced by the
#      README's own alternative, file:///mnt/nfs/etcd-backups: /mnt/nfs is one directory of this
#      machine mounted in all three (as NFS would be), etcd-backups created once.
#   4. The port table becomes a firewall in each machine (nftables: input dropped but for
#      loopback, replies, ICMP and exactly the table's ports): the cluster forming behind it shows
#      that the table names every port the agents need.
#   5. No systemd runs here: the agent is started as the installed unit's ExecStart says.
#   6. The check block runs as written on n1 (`status` until it exits 0, `list-backups` until it
#      lists a backup, `backup`), then the command "from your own machine" with a copy of the
#      config and the admin certificate.
# Skips (77) when not root. Bounded waits; processes stopped by PID; namespaces removed (trap).
#
#   tests/quickstart_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
skip() { echo "quickstart_test: SKIP: $*"; exit 77; }
fail() { echo "quickstart_test: FAIL: $*" >&2; exit 1; }
note() { echo "quickstart_test: $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network and mount namespaces)"
for tool in ip nft nsenter unshare /usr/bin/etcd python3; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (scripts/install-deps.sh --test installs it)"
done

work="$(mktemp -d /tmp/steward-quickstart-XXXXXX)"
tag="qs$$"                      # namespace and link names of this run
holders=()                      # per machine: the process that holds its namespaces
agents=()                       # per machine: the agent's pid
ns_made=()

cleanup() {
  set +e
  local p i
  for p in "${agents[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  for p in "${agents[@]}"; do
    [ -n "$p" ] || continue
    for i in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$p" 2>/dev/null
  done
  for p in "${holders[@]}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  for p in "${holders[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  for i in "${ns_made[@]}"; do ip netns del "$i" 2>/dev/null; done
  # Overlay upper dirs hold root-owned files; the mounts went with the holders.
  rm -rf "$work"
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
grep -q 'cmake --install build' <<<"$install_block" || fail "block 1 is not the install: $install_block"
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
mkdir -p "$work/nfs"
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
# machine I (0: your own machine, in the hub): a holder process in its network namespace with
# a private mount namespace of overlays, entered by nsenter for every command.
for i in 0 1 2 3; do
  ns="$tag-n$i"; [ "$i" = 0 ] && ns="$tag-hub"
  m="$work/m$i"
  for d in etc varlib usrlocal mnt; do mkdir -p "$m/$d.up" "$m/$d.work"; done
  ip netns exec "$ns" unshare -m --propagation private sh -c '
    set -e
    m=$1
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$m/etc.up,workdir=$m/etc.work" /etc
    mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$m/varlib.up,workdir=$m/varlib.work" /var/lib
    mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$m/usrlocal.up,workdir=$m/usrlocal.work" /usr/local
    mount -t overlay overlay -o "lowerdir=/mnt,upperdir=$m/mnt.up,workdir=$m/mnt.work" /mnt
    mkdir -p /mnt/nfs && mount --bind "$2" /mnt/nfs
    printf "%s\n" "#!/bin/sh" "# the quick start test: root already" "exec \"\$@\"" >/usr/local/bin/sudo
    chmod 0755 /usr/local/bin/sudo
    touch "$m/ready"
    exec sleep 3600' sh "$m" "$work/nfs" &
  holders[$i]=$!
done
for i in 0 1 2 3; do
  for _ in $(seq 1 100); do [ -e "$work/m$i/ready" ] && break; sleep 0.1; done
  [ -e "$work/m$i/ready" ] || fail "machine $i did not come up"
done
# on I CMD...: CMD in machine I, in the source dir (where the README's commands run).
on() {
  local i=$1; shift
  nsenter -t "${holders[$i]}" -m -n -- env -C "$src" PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
on 1 ip -4 addr show eth0 | grep -q 10.0.0.11 || fail "machine 1 has no 10.0.0.11"

# --- 1. Install, on each machine ----------------------------------------------------------------
install_cmds=$(sed -e 's/#.*$//' -e 's/^make build && //' -e "s#cmake --install build#cmake --install $build#" <<<"$install_block")
for i in 1 2 3; do
  on "$i" bash -euo pipefail -c "$install_cmds" >"$work/install-$i.log" 2>&1 ||
    fail "the install on n$i failed: $(tail -5 "$work/install-$i.log")"
  on "$i" test -x /usr/local/bin/steward || fail "n$i: no /usr/local/bin/steward after the install"
  on "$i" test -d /var/lib/steward || fail "n$i: no /var/lib/steward"
done
on 0 bash -euo pipefail -c "$install_cmds" >"$work/install-0.log" 2>&1 || fail "the install on your own machine failed"
[ ! -e /usr/local/bin/steward ] || [ /usr/local/bin/steward -ot "$work" ] || fail "the install escaped into this machine's /usr/local"
note "1. installed on n1, n2, n3 (and your own machine)"

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
for i in 1 2 3; do
  on "$i" nft -f - <<NFT || fail "nft refused the firewall on n$i"
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

# --- 5. Start the agents (as the unit's ExecStart) -----------------------------------------------
grep -q 'systemctl daemon-reload && sudo systemctl enable --now steward' <<<"$systemd_block" ||
  fail "the start block changed: $systemd_block (update this test)"
exec_start=$(on 1 sed -n 's/^ExecStart=//p' /usr/local/lib/systemd/system/steward.service)
[ -n "$exec_start" ] || fail "the installed unit has no ExecStart"
for i in 1 2 3; do
  # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it here
  nsenter -t "${holders[$i]}" -m -n -- $exec_start >"$work/agent-n$i.log" 2>&1 &
  agents[$i]=$!
done
note "5. agents started: $exec_start"

# --- 6. Check the cluster and the first backup ---------------------------------------------------
mapfile -t checks < <(sed -e 's/[[:space:]]*#.*$//' -e '/^$/d' <<<"$check_block")
[ ${#checks[@]} = 3 ] || fail "the check block has ${#checks[@]} commands, not 3: update this test"
ok=""
for _ in $(seq 1 120); do
  if on 1 bash -c "${checks[0]}" >"$work/status.out" 2>&1; then ok=1; break; fi
  for i in 1 2 3; do kill -0 "${agents[$i]}" 2>/dev/null || fail "agent n$i exited: $(tail -5 "$work/agent-n$i.log")"; done
  sleep 1
done
[ -n "$ok" ] || fail "'${checks[0]}' did not exit 0 within 120 s: $(cat "$work/status.out")"
grep -q 'n3' "$work/status.out" || fail "status does not show n3: $(cat "$work/status.out")"
note "6. '${checks[0]}' exits 0:"
sed 's/^/      /' "$work/status.out"
ok=""
for _ in $(seq 1 60); do
  on 1 bash -c "${checks[1]}" >"$work/list.out" 2>&1 && grep -Eq '^[0-9]{8}T[0-9]{6}Z' "$work/list.out" && { ok=1; break; }
  sleep 1
done
[ -n "$ok" ] || fail "'${checks[1]}' listed no backup within 60 s: $(cat "$work/list.out")"
note "6. '${checks[1]}' lists the first backup: $(grep -Eo '^[0-9]{8}T[0-9]{6}Z[^ ]*' "$work/list.out" | head -1)"
on 1 bash -c "${checks[2]}" >"$work/backup.out" 2>&1 || fail "'${checks[2]}' failed: $(cat "$work/backup.out")"
name=$(tail -1 "$work/backup.out")
[ -f "$work/nfs/etcd-backups/main/backups/$name/meta.json" ] || fail "'${checks[2]}' printed '$name', which is not in the store"
note "6. '${checks[2]}' took $name"

# From your own machine: a copy of the config and the admin certificate, no root's files.
remote=$(grep -o 'stewardctl status --config node.yaml[^`]*' "$section" | head -1)
[ -n "$remote" ] || fail "the section no longer shows the command from your own machine"
for f in ca.crt admin.crt admin.key; do on 1 cat "/etc/steward/pki/$f" >"$work/$f"; done
on 1 cat /etc/steward/node.yaml >"$work/node.yaml"
nsenter -t "${holders[0]}" -m -n -- env -C "$work" PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c "$remote" >"$work/remote.out" 2>&1 || fail "'$remote' from your own machine failed: $(cat "$work/remote.out")"
grep -q 'n2' "$work/remote.out" || fail "the remote status does not show n2"
note "6. from your own machine (10.0.0.10): '$remote' exits 0"
note "PASS"
