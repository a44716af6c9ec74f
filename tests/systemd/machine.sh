# shellcheck shell=bash
# tests/systemd/machine.sh: machines with a real systemd as PID 1, for the tests (issue 51).
# To be sourced by a test that runs as root. The facts behind it (this host's PID 1 is not
# systemd; nspawn needs a cgroup of its own; SIGRTMIN+4 powers off) are in
# ../shared/SYSTEMD-CONTAINERS.md, as measured on 2026-12-01.
#
# One Debian 12 (bookworm) minbase root per build dir, built with mmdebstrap and cached under
# BUILD/systemd-root/rootfs. Its stamp holds what it was built from (suite, mirrors, packages,
# the packages pre-downloaded into its apt cache, this file's MACHINE_FORMAT); a root whose stamp
# differs is rebuilt, never while a machine uses it (flock: machines hold the lock shared,
# a rebuild takes it exclusive). Every machine is a throw-away overlay of that root
# (BUILD/systemd-root/machines/NAME/{upper,work,merged}) booted with systemd-nspawn.
#
#   machine_require                      exit 77 (skip, saying why) without root or the tools
#   machine_root BUILD_DIR [PKG...]      the cached root, with PKG... (and their dependencies) in
#                                        its apt cache, so that a machine with a private network
#                                        can `apt-get install` them. Sets MACHINE_ROOT.
#   machine_root_for_deb BUILD_DIR DEB   machine_root with what `apt-get install DEB etcd-client`
#                                        needs (its Depends, etcd-server, etcd-client): every test
#                                        that installs the package asks for the same list, so they
#                                        share one root
#   machine_boot NAME [--bind H[:C]] [--bind-ro H[:C]] [--private-network | --netns PATH]
#                                        boots NAME (its overlay kept from an earlier boot, so a
#                                        power off and a boot is a reboot); returns once systemd
#                                        says running or degraded, 1 otherwise (console shown)
#   machine_exec NAME [-t SECS] CMD...   CMD in the machine's namespaces, stdin kept, its exit
#                                        code returned; killed after SECS (default 60): 124
#   machine_poweroff NAME                SIGRTMIN+4 to its PID 1; SIGKILL after
#                                        MACHINE_STOP_TIMEOUT; its cgroups and mount go, its
#                                        upper dir stays (for the next boot)
#   machine_destroy NAME                 powers off and removes the overlay
#   machine_cleanup                      machine_destroy of every machine this shell booted,
#                                        then checks that none left a mount, a cgroup, a process
#                                        or /run/systemd/nspawn/propagate/NAME (1 if one did)
#   machine_leader NAME                  host pid of the machine's PID 1
#   machine_upper NAME                   the overlay's upper dir: the machine's disk, as this host
#                                        sees it (change it only while the machine is off)
#
# Environment: MACHINE_TAG (prefix of messages), MACHINE_BOOT_TIMEOUT (60 s),
# MACHINE_STOP_TIMEOUT (90 s), MACHINE_MAX_LIFETIME (1800 s: a machine's hard cap, so that one
# left by a killed test powers itself off), MACHINE_MIRROR and MACHINE_SECURITY_MIRROR (default:
# the machine's own apt sources, as scripts/install-deps.sh takes them).
# Only processes this shell started are signalled, by pid.

MACHINE_FORMAT=1  # raise when the root's preparation below changes: the cached roots are rebuilt
MACHINE_SUITE=bookworm
MACHINE_INCLUDE=systemd,systemd-sysv,dbus,libpam-systemd,procps,iproute2,ca-certificates
MACHINE_TAG=${MACHINE_TAG:-machine}
MACHINE_BOOT_TIMEOUT=${MACHINE_BOOT_TIMEOUT:-60}
MACHINE_STOP_TIMEOUT=${MACHINE_STOP_TIMEOUT:-90}
MACHINE_MAX_LIFETIME=${MACHINE_MAX_LIFETIME:-1800}
MACHINE_PATH_IN=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
MACHINE_NAMES=()
MACHINE_BASE=""
MACHINE_ROOT=""

_machine_say() { echo "$MACHINE_TAG: $*" >&2; }
_machine_now() { date +%s.%N; }
_machine_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# The cgroup hierarchies nspawn and the container's systemd use: name=systemd and the cgroup2
# of a hybrid host, or a unified host's one cgroup2.
_machine_hierarchies() {
  local h
  for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
    if mountpoint -q "$h"; then echo "$h"; fi
  done
  if ! mountpoint -q /sys/fs/cgroup/systemd && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo /sys/fs/cgroup
  fi
}

machine_require() {
  [ "$(id -u)" -eq 0 ] || { echo "$MACHINE_TAG: SKIP: needs root (overlay mounts, systemd-nspawn)"; exit 77; }
  local t
  for t in systemd-nspawn mmdebstrap nsenter setsid flock mountpoint; do
    command -v "$t" >/dev/null 2>&1 || {
      echo "$MACHINE_TAG: SKIP: $t is missing (scripts/install-deps.sh --test installs systemd-container and mmdebstrap)"
      exit 77
    }
  done
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
  grep -qw overlay /proc/filesystems || { echo "$MACHINE_TAG: SKIP: the kernel has no overlayfs"; exit 77; }
  [ -n "$(_machine_hierarchies)" ] || { echo "$MACHINE_TAG: SKIP: no cgroup hierarchy for systemd under /sys/fs/cgroup"; exit 77; }
}

# The Debian mirror and the security mirror of this machine's apt sources (the first of each).
_machine_mirrors() {
  local uris
  uris=$(grep -hoE '^(URIs:|deb( \[[^]]*\])?) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources \
           /etc/apt/sources.list 2>/dev/null | grep -oE 'https?://[^ ]+' || true)
  MIRROR=${MACHINE_MIRROR:-$(grep -v security <<<"$uris" | head -n1 || true)}
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  SECURITY=${MACHINE_SECURITY_MIRROR:-$(grep security <<<"$uris" | head -n1 || true)}
  SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
}

_machine_alive() {  # a running process (a zombie child of this shell is not)
  local s
  [ -n "${1:-}" ] || return 1
  s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $s != Z* ]]
}

_machine_dir() { echo "$MACHINE_BASE/machines/$1"; }
_machine_read() { local f; f="$(_machine_dir "$1")/$2"; if [ -s "$f" ]; then cat "$f"; fi; }
_machine_cgroup() { echo "steward-machine-$1"; }

# A machine under machines/ whose nspawn is gone (its test was killed): unmounted and removed.
# Runs under the exclusive lock only, so no other test is booting one.
_machine_reap_stale() {
  local d n
  for d in "$MACHINE_BASE"/machines/*/; do
    [ -d "$d" ] || continue
    n=$(basename "$d")
    if ! _machine_alive "$(_machine_read "$n" nspawn.pid)"; then
      _machine_say "removing machine $n, left by an earlier run"
      _machine_teardown "$n" || true
      if mountpoint -q "$d/merged"; then umount -l "$d/merged" || true; fi
      mountpoint -q "$d/merged" || rm -rf --one-file-system "$d"
    fi
  done
}

# Builds the root into $MACHINE_BASE/rootfs (about 80 s and 230 MB from a Debian mirror).
_machine_build_root() {
  local want=$1; shift
  local MIRROR SECURITY t0 new=$MACHINE_BASE/rootfs.new
  _machine_mirrors
  rm -rf --one-file-system "$new"
  t0=$(_machine_now)
  _machine_say "building the Debian $MACHINE_SUITE root (mmdebstrap, $MIRROR) into $MACHINE_BASE/rootfs"
  local download=":"
  if [ $# -gt 0 ]; then
    download="chroot \"\$1\" apt-get install -y -q --download-only $* >/dev/null"
  fi
  # The hooks, in order: no hostname of this host (nspawn sets the machine's); an empty
  # machine-id (each boot gets one); no policy-rc.d, so maintainer scripts really start units;
  # apt's daily timers masked (they would take the dpkg lock in the middle of a test). Then the
  # packages a test installs, downloaded into the apt cache, which is kept with the package
  # lists (--skip=cleanup/apt) so that apt needs no network in the machines.
  # shellcheck disable=SC2016
  if ! nice -n 10 mmdebstrap --mode=root --variant=minbase --include="$MACHINE_INCLUDE" \
      --aptopt='Acquire::Languages "none"' --skip=cleanup/apt \
      --customize-hook='rm -f "$1/etc/hostname" "$1/usr/sbin/policy-rc.d"; : > "$1/etc/machine-id"' \
      --customize-hook='for t in apt-daily.timer apt-daily-upgrade.timer; do ln -sf /dev/null "$1/etc/systemd/system/$t"; done' \
      --customize-hook="$download" \
      "$MACHINE_SUITE" "$new" \
      "deb $MIRROR $MACHINE_SUITE main" \
      "deb $MIRROR $MACHINE_SUITE-updates main" \
      "deb $SECURITY $MACHINE_SUITE-security main" >"$MACHINE_BASE/mmdebstrap.log" 2>&1; then
    tail -n 30 "$MACHINE_BASE/mmdebstrap.log" >&2
    rm -rf --one-file-system "$new"
    return 1
  fi
  rm -rf --one-file-system "$MACHINE_BASE/rootfs"
  mv "$new" "$MACHINE_BASE/rootfs"
  echo "$want" > "$MACHINE_BASE/stamp"
  _machine_say "root built in $(_machine_since "$t0") s ($(du -sh "$MACHINE_BASE/rootfs" | cut -f1)," \
    "$(find "$MACHINE_BASE/rootfs/var/cache/apt/archives" -name '*.deb' | wc -l) packages in its apt cache)"
}

machine_root() {
  local build=$1; shift
  MACHINE_BASE="$build/systemd-root"
  mkdir -p "$MACHINE_BASE/machines"
  local MIRROR SECURITY want
  _machine_mirrors
  want="format=$MACHINE_FORMAT suite=$MACHINE_SUITE mirror=$MIRROR security=$SECURITY include=$MACHINE_INCLUDE download=$(printf '%s\n' "$@" | LC_ALL=C sort -u | tr '\n' ' ')"
  # The lock stays held (shared) while this shell's machines use the root.
  exec {MACHINE_LOCK_FD}>"$MACHINE_BASE/lock"
  flock -s -w 900 "$MACHINE_LOCK_FD" || { _machine_say "the root's lock was not free within 900 s"; return 1; }
  if [ "$(cat "$MACHINE_BASE/stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$MACHINE_BASE/rootfs/usr/lib/systemd" ]; then
    flock -u "$MACHINE_LOCK_FD"
    flock -x -w 900 "$MACHINE_LOCK_FD" || { _machine_say "the root's lock was not free within 900 s"; return 1; }
    _machine_reap_stale
    if [ "$(cat "$MACHINE_BASE/stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$MACHINE_BASE/rootfs/usr/lib/systemd" ]; then
      if [ -n "$(ls -A "$MACHINE_BASE/machines")" ]; then
        _machine_say "the root must be rebuilt but machines under $MACHINE_BASE/machines use it"
        return 1
      fi
      _machine_build_root "$want" "$@" || return 1
    fi
    flock -s -w 900 "$MACHINE_LOCK_FD" || return 1
  fi
  MACHINE_ROOT="$MACHINE_BASE/rootfs"
}

machine_root_for_deb() {
  local pkgs
  # The Depends line's packages (first alternatives, no versions).
  mapfile -t pkgs < <(dpkg-deb -f "$2" Depends | tr ',' '\n' |
    sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -v '^$')
  machine_root "$1" "${pkgs[@]}" etcd-server etcd-client
}

_machine_mount() {
  local d; d=$(_machine_dir "$1")
  mkdir -p "$d/upper" "$d/work" "$d/merged"
  mountpoint -q "$d/merged" && return 0
  mount -t overlay overlay -o "lowerdir=$MACHINE_ROOT,upperdir=$d/upper,workdir=$d/work" "$d/merged"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$1" \
    > "$d/merged/etc/hosts"
}

# The container's PID 1: the child of systemd-nspawn (the child of `timeout`) in another PID
# namespace.
_machine_find_leader() {
  local npid c
  npid=$(ps -o pid= --ppid "$1" 2>/dev/null | head -n1 | tr -d ' ')
  [ -n "$npid" ] || return 1
  for c in $(ps -o pid= --ppid "$npid" 2>/dev/null); do
    if [ "$(readlink "/proc/$c/ns/pid" 2>/dev/null)" != "$(readlink /proc/self/ns/pid)" ]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

machine_leader() {
  local l; l=$(_machine_read "$1" leader)
  _machine_alive "$l" || { _machine_say "machine $1 is not running"; return 1; }
  echo "$l"
}

machine_upper() { echo "$(_machine_dir "$1")/upper"; }

_machine_nsx() {  # LEADER CMD...: CMD in the machine's namespaces with a clean environment
  local leader=$1; shift
  nsenter -t "$leader" -a -r -w env -i PATH="$MACHINE_PATH_IN" HOME=/root LANG=C.UTF-8 TERM=dumb \
    DEBIAN_FRONTEND=noninteractive SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 container=systemd-nspawn "$@"
}

machine_exec() {
  local name=$1 secs=60; shift
  if [ "${1:-}" = -t ]; then secs=$2; shift 2; fi
  local leader; leader=$(machine_leader "$name") || return 125
  # The inner timeout bounds the command; the outer one nsenter itself.
  timeout -k 5 $((secs + 15)) nsenter -t "$leader" -a -r -w env -i PATH="$MACHINE_PATH_IN" \
    HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive SYSTEMD_PAGER=cat \
    SYSTEMD_COLORS=0 container=systemd-nspawn timeout -k 5 "$secs" "$@"
}

machine_boot() {
  local name=$1; shift
  [[ $name =~ ^[a-z0-9][a-z0-9-]{0,30}$ ]] || { _machine_say "bad machine name '$name'"; return 1; }
  [ -n "$MACHINE_ROOT" ] || { _machine_say "machine_root first"; return 1; }
  local opts=()
  while [ $# -gt 0 ]; do
    case $1 in
      --bind | --bind-ro) opts+=("$1=$2"); shift 2 ;;
      --private-network) opts+=(--private-network); shift ;;
      --netns) opts+=("--network-namespace-path=$2"); shift 2 ;;
      *) _machine_say "machine_boot: unknown option $1"; return 1 ;;
    esac
  done
  local d; d=$(_machine_dir "$name")
  if _machine_alive "$(_machine_read "$name" nspawn.pid)"; then
    _machine_say "machine $name is already running"
    return 1
  fi
  [[ " ${MACHINE_NAMES[*]} " == *" $name "* ]] || MACHINE_NAMES+=("$name")
  _machine_mount "$name"
  rm -f "$d/nspawn.pid" "$d/leader"
  local h cg; cg=$(_machine_cgroup "$name")
  for h in $(_machine_hierarchies); do mkdir -p "$h/$cg"; done
  local t0; t0=$(_machine_now)
  # A cgroup of its own on each hierarchy: nspawn, not started by systemd, splits the cgroup it
  # starts in into supervisor/ and payload/ (from the root cgroup those would be every
  # machine's). --register=no --keep-unit: no machined and no system bus on this host.
  # setsid: out of the test's process group; timeout: the machine's hard cap.
  (
    for h in $(_machine_hierarchies); do echo "$BASHPID" > "$h/$cg/cgroup.procs"; done
    exec setsid sh -c 'echo $$ > "$0"; exec "$@"' "$d/nspawn.pid" \
      timeout -k 30 "$MACHINE_MAX_LIFETIME" \
      systemd-nspawn --quiet --boot --directory="$d/merged" --machine="$name" \
      --register=no --keep-unit --console=passive "${opts[@]}" </dev/null >"$d/console.log" 2>&1
  ) &
  local deadline=$(($(date +%s) + MACHINE_BOOT_TIMEOUT)) tpid="" leader=""
  while [ "$(date +%s)" -lt "$deadline" ]; do
    tpid=$(_machine_read "$name" nspawn.pid)
    if [ -n "$tpid" ]; then
      leader=$(_machine_find_leader "$tpid" || true)
      [ -n "$leader" ] && break
      _machine_alive "$tpid" || break
    fi
    sleep 0.1
  done
  if [ -z "$leader" ]; then
    _machine_say "machine $name did not start; its console:"
    sed 's/^/  /' "$d/console.log" >&2 || true
    machine_poweroff "$name" || true
    return 1
  fi
  echo "$leader" > "$d/leader"
  local state=""
  while [ "$(date +%s)" -lt "$deadline" ]; do
    _machine_alive "$leader" || break
    # "offline": PID 1 has not made /run/systemd/system yet; keep asking.
    state=$(timeout 10 nsenter -t "$leader" -a -r -w systemctl is-system-running --wait 2>/dev/null || true)
    case $state in running | degraded | maintenance | stopping) break ;; esac
    sleep 0.2
  done
  case $state in
    running | degraded)
      _machine_say "machine $name booted: $state after $(_machine_since "$t0") s"
      if [ "$state" = degraded ]; then _machine_nsx "$leader" systemctl --failed --no-legend --plain >&2 || true; fi
      return 0 ;;
  esac
  _machine_say "machine $name did not boot within ${MACHINE_BOOT_TIMEOUT} s (state '${state:-none}'); its console:"
  sed 's/^/  /' "$d/console.log" >&2 || true
  machine_poweroff "$name" || true
  return 1
}

# Removes what a machine's boot made on the host (its nspawn already gone): cgroups, nspawn's
# propagation dir, the overlay mount.
_machine_teardown() {
  local name=$1 d h cg rc=0; d=$(_machine_dir "$name"); cg=$(_machine_cgroup "$name")
  for h in $(_machine_hierarchies); do
    [ -d "$h/$cg" ] || continue
    for _ in $(seq 1 50); do
      find "$h/$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [ -d "$h/$cg" ] || break
      sleep 0.2
    done
    if [ -d "$h/$cg" ]; then _machine_say "warning: $h/$cg is still in use"; rc=1; fi
  done
  # nspawn cannot remove it itself when the host's /run is not a tmpfs.
  rm -rf --one-file-system "/run/systemd/nspawn/propagate/$name" 2>/dev/null || true
  if mountpoint -q "$d/merged"; then
    umount "$d/merged" 2>/dev/null || { sleep 1; umount "$d/merged"; } || { _machine_say "warning: $d/merged is busy"; rc=1; }
  fi
  return $rc
}

machine_poweroff() {
  local name=$1 d tpid leader npid t0; d=$(_machine_dir "$name")
  [ -d "$d" ] || return 0
  tpid=$(_machine_read "$name" nspawn.pid)
  leader=$(_machine_read "$name" leader)
  t0=$(_machine_now)
  if _machine_alive "$tpid"; then
    # SIGRTMIN+4: systemd starts poweroff.target, as `systemctl poweroff` would.
    if _machine_alive "$leader"; then kill -s RTMIN+4 "$leader" 2>/dev/null || true; fi
    local deadline=$(($(date +%s) + MACHINE_STOP_TIMEOUT))
    while _machine_alive "$tpid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
    if _machine_alive "$tpid"; then
      _machine_say "machine $name did not power off within ${MACHINE_STOP_TIMEOUT} s: killing it"
      npid=$(ps -o pid= --ppid "$tpid" 2>/dev/null | head -n1 | tr -d ' ')
      if _machine_alive "$leader"; then kill -KILL "$leader" 2>/dev/null || true; fi
      sleep 1
      if _machine_alive "$npid"; then kill -KILL "$npid" 2>/dev/null || true; fi
      kill -KILL "$tpid" 2>/dev/null || true
      for _ in $(seq 1 50); do _machine_alive "$tpid" || break; sleep 0.1; done
    fi
    _machine_say "machine $name: off after $(_machine_since "$t0") s"
  fi
  if _machine_alive "$leader"; then kill -KILL "$leader" 2>/dev/null || true; sleep 0.5; fi
  # Reap it if it is this shell's child.
  if [ -n "$tpid" ]; then wait "$tpid" 2>/dev/null || true; fi
  rm -f "$d/nspawn.pid" "$d/leader"
  _machine_teardown "$name"
}

machine_destroy() {
  local name=$1 d rc=0; d=$(_machine_dir "$name")
  [ -d "$d" ] || return 0
  machine_poweroff "$name" || rc=1
  if mountpoint -q "$d/merged"; then
    _machine_say "warning: $d/merged is still mounted: kept"
    return 1
  fi
  rm -rf --one-file-system "$d"
  return $rc
}

# What a machine left behind on the host, one line each (nothing: clean).
_machine_leftovers() {
  local name=$1 d h; d=$(_machine_dir "$name")
  if [ -n "$MACHINE_BASE" ] && mountpoint -q "$d/merged" 2>/dev/null; then echo "mount $d/merged"; fi
  for h in $(_machine_hierarchies); do
    if [ -e "$h/$(_machine_cgroup "$name")" ]; then echo "cgroup $h/$(_machine_cgroup "$name")"; fi
  done
  if [ -e "/run/systemd/nspawn/propagate/$name" ]; then echo "/run/systemd/nspawn/propagate/$name"; fi
  local p cmd
  for p in $(pgrep -x systemd-nspawn || true); do
    cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null || true)
    if [[ $cmd == *" --machine=$name "* ]]; then echo "process $p (systemd-nspawn of $name)"; fi
  done
}

machine_cleanup() {
  local n rc=0 left
  for n in "${MACHINE_NAMES[@]}"; do
    machine_destroy "$n" || rc=1
    left=$(_machine_leftovers "$n")
    if [ -n "$left" ]; then
      _machine_say "machine $n left behind: $left"
      rc=1
    fi
  done
  MACHINE_NAMES=()
  return $rc
}
