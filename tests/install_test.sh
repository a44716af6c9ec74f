#!/usr/bin/env bash
# `cmake --install` into a temporary prefix puts everything where README.md says, and what it
# installs works: the binaries run, the unit verifies with the installed path, the completion
# script parses, the man pages render.
set -euo pipefail
build="$1"
prefix="$(mktemp -d /tmp/steward-install-XXXXXX)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
fail() { echo "install_test: $*" >&2; exit 1; }
for f in bin/steward bin/stewardctl lib/systemd/system/steward.service \
         share/doc/etcd-steward/README.md share/doc/etcd-steward/examples/node.yaml \
         share/doc/etcd-steward/docs/drop-in.md share/bash-completion/completions/stewardctl \
         share/man/man1/steward.1 share/man/man1/stewardctl.1; do
  [ -s "$prefix/$f" ] || fail "missing or empty: $f"
done
# Captured first: grep -q stops reading at its match, and with pipefail the writer's SIGPIPE
# would count as a failure.
version=$("$prefix/bin/steward" --version) || fail "steward --version"
grep -q "^steward " <<<"$version" || fail "steward --version"
help=$("$prefix/bin/stewardctl" --help) || fail "stewardctl --help"
grep -q "restore-backup" <<<"$help" || fail "stewardctl --help"
bash -n "$prefix/share/bash-completion/completions/stewardctl" || fail "completion script"
# The completion offers the subcommands.
out=$(bash -c "source '$prefix/share/bash-completion/completions/stewardctl';
  COMP_WORDS=(stewardctl rest); COMP_CWORD=1; _stewardctl; echo \"\${COMPREPLY[*]}\"")
[ "$out" = "restore-backup" ] || fail "completion of 'rest' gave '$out'"
grep -q "restore.\{0,2\}-backup" "$prefix/share/man/man1/stewardctl.1" || fail "stewardctl.1 lacks the subcommands"
command -v systemd-analyze >/dev/null 2>&1 || fail "systemd-analyze is missing (install-deps --test installs it)"
touch "$prefix/node.yaml"
sed "s|ExecStart=/usr/local/bin/steward --config /etc/steward/node.yaml|ExecStart=$prefix/bin/steward --config $prefix/node.yaml|" \
  "$prefix/lib/systemd/system/steward.service" > "$prefix/steward.service"
systemd-analyze verify "$prefix/steward.service" || fail "the installed unit does not verify"
echo "install_test: ok ($prefix)"
