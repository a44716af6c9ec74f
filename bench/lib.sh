# shellcheck shell=bash
# bench/lib.sh: what the bench/ scripts share. Sourced, never run.
#
# - TLS on both sides of a comparison. By default (TLS=on) the agents run as users run them:
#   `tls: {mode: issued}` with a CA made by `stewardctl pki init`, the agents issuing their own
#   certificates at start. The plain etcd processes get the same etcd flags with certificates
#   made beforehand (openssl, EC P-256, the SANs and key usages the agent gives its own), and
#   etcdctl gets --cacert/--cert/--key through a small wrapper, so every call site (including
#   `xargs sh -c`) uses them. TLS=off runs both sides over plain http instead.
# - The result file bench/report reads: $RESULTS_DIR/<bench>.tsv (figures: ours and plain per
#   run, medians, ratio) and $RESULTS_DIR/<bench>.notes.md (markdown the script writes from the
#   run: parameters, per-run breakdowns). Nothing is written without RESULTS_DIR.
#
# The sourcing script sets BENCH (its name, e.g. bootstrap) and defines die and log before it
# sources this file, and calls bench_tls_init once it has its private work dir ($WORK).

# SCHEME and PKI are for the scripts that source this file.
# shellcheck disable=SC2034
TLS="${TLS:-on}"
case "$TLS" in
  on) SCHEME=https ;;
  off) SCHEME=http ;;
  *) die "TLS must be on or off (got '$TLS')" ;;
esac
RESULTS_DIR="${RESULTS_DIR:-}"

# bench_tls_init: with TLS on, a CA and an admin client certificate in $WORK/pki
# (`stewardctl pki init`, from $STEWARDCTL or $BUILD/stewardctl), and $WORK/etcdctl, a wrapper
# that calls $ETCDCTL with the admin certificate; ETCDCTL then names the wrapper. Sets PKI.
bench_tls_init() {
  local ctl_bin=${STEWARDCTL:-$BUILD/stewardctl}
  PKI="$WORK/pki"
  [ "$TLS" = off ] && return 0
  [ -x "$ctl_bin" ] || die "$ctl_bin is missing: TLS on needs stewardctl to make the CA (make build)"
  command -v openssl >/dev/null || die "openssl is required for the plain side's certificates"
  "$ctl_bin" pki init --dir "$PKI" >/dev/null || die "stewardctl pki init --dir $PKI failed"
  cat >"$WORK/etcdctl" <<SH
#!/bin/sh
# etcdctl with the admin client certificate of $PKI (bench/lib.sh)
exec "$ETCDCTL" --cacert="$PKI/ca.crt" --cert="$PKI/admin.crt" --key="$PKI/admin.key" "\$@"
SH
  chmod 0755 "$WORK/etcdctl"
  ETCDCTL="$WORK/etcdctl"
}

# steward_tls_yaml: the agents' tls section, as scripts/demo.sh writes it.
steward_tls_yaml() {
  if [ "$TLS" = off ]; then
    printf 'tls:\n  mode: off\n'
  else
    printf 'tls:\n  mode: issued\n  ca_cert: %s\n  ca_key: %s\n' "$PKI/ca.crt" "$PKI/ca.key"
  fi
}

# plain_certs DIR NAME IP: a plain etcd member's files in DIR, named as the agent names its own
# under <data_dir>/tls/: ca.crt, server.crt/key (client URL) and peer.crt/key (peer URL). Like
# the agent's (src/pki/node_certs.cc): EC P-256, SANs NAME, localhost, 127.0.0.1 and IP,
# serverAuth and clientAuth (etcd dials its peers with the same certificate). Untimed: the
# plain procedure's certificates exist before its clock starts. No-op with TLS off.
plain_certs() {
  local dir=$1 name=$2 ip=$3 role
  [ "$TLS" = off ] && return 0
  mkdir -p "$dir"
  chmod 0700 "$dir"
  cp "$PKI/ca.crt" "$dir/ca.crt"
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature' \
    'extendedKeyUsage=serverAuth,clientAuth' \
    "subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1,IP:$ip" >"$dir/ext.cnf"
  for role in server peer; do
    ( umask 077
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$role.key" 2>/dev/null &&
      openssl req -new -key "$dir/$role.key" -subj "/CN=$name" -out "$dir/$role.csr" 2>/dev/null &&
      openssl x509 -req -in "$dir/$role.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
        -set_serial "0x$(openssl rand -hex 8)" -days 30 -sha256 -extfile "$dir/ext.cnf" \
        -out "$dir/$role.crt" 2>/dev/null
    ) || die "openssl could not issue $dir/$role.crt"
    rm -f "$dir/$role.csr"
  done
  rm -f "$dir/ext.cnf"
}

# etcd_tls_flags DIR: etcd's TLS flags for the files in DIR (as plain_certs or the agent names
# them), one per line, in the order src/etcd/flags.cc renders them. Nothing with TLS off.
etcd_tls_flags() {
  local d=$1
  [ "$TLS" = off ] && return 0
  printf '%s\n' \
    "--cert-file=$d/server.crt" "--key-file=$d/server.key" "--trusted-ca-file=$d/ca.crt" \
    "--client-cert-auth=true" \
    "--peer-cert-file=$d/peer.crt" "--peer-key-file=$d/peer.key" "--peer-trusted-ca-file=$d/ca.crt" \
    "--peer-client-cert-auth=true"
}

# median: of the integers on stdin (the mean of the middle two for an even count, rounded down).
median() {
  sort -n | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
          else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
# median_f: the same for decimals, printed with 3 decimals.
median_f() {
  sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "-"; else if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2];
          else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# ratio A B: A/B with 2 decimals, "-" when B is 0 or either is not a number.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0)
                                     printf "%.2f\n", a / b; else print "-" }'
}

# --- The result files -----------------------------------------------------------------------
# result_begin: starts $RESULTS_DIR/$BENCH.tsv and .notes.md afresh. Call it once the
# measurement is about to start, so a failed run leaves no half-old result.
result_begin() {
  [ -n "$RESULTS_DIR" ] || return 0
  mkdir -p "$RESULTS_DIR"
  printf '# %s\n' "bench/$BENCH, $(date -Is)" >"$RESULTS_DIR/$BENCH.tsv.tmp"
  printf '#columns\tfigure\tunit\truns\tours\tplain\tratio\tours_runs\tplain_runs\tbetter\n' \
    >>"$RESULTS_DIR/$BENCH.tsv.tmp"
  : >"$RESULTS_DIR/$BENCH.notes.md.tmp"
}
# result_meta KEY VALUE: a "#KEY<TAB>VALUE" line bench/report reads: label_ours, label_plain
# (what the two columns are), xlabels (space-separated names of the runs, for the chart).
result_meta() {
  [ -n "$RESULTS_DIR" ] || return 0
  printf '#%s\t%s\n' "$1" "$2" >>"$RESULTS_DIR/$BENCH.tsv.tmp"
}
# result_figure NAME UNIT BETTER "OURS RUNS" "PLAIN RUNS": one figure; the runs are
# space-separated numbers (integers, or decimals for a unit like %). BETTER is lower or higher.
# The medians and the ratio ours/plain are computed here.
result_figure() {
  [ -n "$RESULTS_DIR" ] || return 0
  local name=$1 unit=$2 better=$3 ours=$4 plain=$5 mo mp n
  if [[ "$ours $plain" == *.* ]]; then
    mo=$(tr ' ' '\n' <<<"$ours" | grep . | median_f); mp=$(tr ' ' '\n' <<<"$plain" | grep . | median_f)
  else
    mo=$(tr ' ' '\n' <<<"$ours" | grep . | median); mp=$(tr ' ' '\n' <<<"$plain" | grep . | median)
  fi
  n=$(wc -w <<<"$ours")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$unit" "$n" "$mo" "$mp" \
    "$(ratio "$mo" "$mp")" "$ours" "$plain" "$better" >>"$RESULTS_DIR/$BENCH.tsv.tmp"
}
# result_note: appends stdin (markdown) to the notes.
result_note() {
  [ -n "$RESULTS_DIR" ] || { cat >/dev/null; return 0; }
  cat >>"$RESULTS_DIR/$BENCH.notes.md.tmp"
}
# result_end: publishes both files (renamed into place: a failed run never leaves a half file).
result_end() {
  [ -n "$RESULTS_DIR" ] || return 0
  mv "$RESULTS_DIR/$BENCH.tsv.tmp" "$RESULTS_DIR/$BENCH.tsv"
  mv "$RESULTS_DIR/$BENCH.notes.md.tmp" "$RESULTS_DIR/$BENCH.notes.md"
}
