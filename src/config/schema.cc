#include "config/schema.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace steward {
namespace {

ConfigKey Section(std::string path, std::string doc) {
  return {std::move(path), "", std::move(doc), true, false};
}
ConfigKey Key(std::string path, std::string value, std::string doc) {
  return {std::move(path), std::move(value), std::move(doc), false, false};
}
ConfigKey Commented(std::string path, std::string value, std::string doc) {
  return {std::move(path), std::move(value), std::move(doc), false, true};
}

}  // namespace

const std::vector<ConfigKey>& ConfigSchema() {
  static const std::vector<ConfigKey> kSchema = {
      Section("cluster", "required; the same on every node"),
      Key("cluster.name", "demo",
          "required. Letters, digits, '-', '_', '.'. etcd's token is \"steward-<name>\"."),
      Key("cluster.size", "3", "desired voting members; default min(3, number of nodes); 1..nodes"),
      Key("cluster.nodes",
          "\n- {name: n1, host: 127.0.0.11}\n- {name: n2, host: 127.0.0.12}\n"
          "- {name: n3, host: 127.0.0.13}",
          "required: every node that may host a member, in priority order; each entry:"),
      Key("cluster.nodes[].name", "", "unique; letters, digits, '-', '_', '.'"),
      Key("cluster.nodes[].host", "",
          "the address to bind and advertise; unique (one machine is not listed twice under two "
          "spellings: 127.0.0.1 and localhost, ::1 and [::1])"),
      Section("cluster.ports", "the same on every node; each 1..65535, all different"),
      Key("cluster.ports.client", "2379",
          "etcd client URL https://<host>:<client> (http:// with tls.mode: off)"),
      Key("cluster.ports.peer", "2380",
          "etcd peer URL https://<host>:<peer> (http:// with tls.mode: off)"),
      Key("cluster.ports.agent", "2390", "the agents' own API (gRPC)"),
      Key("cluster.ports.admin", "2391", "/healthz /readyz /leader /metrics (docs/monitoring.md)"),
      Key("cluster.ports.fence", "2392",
          "etcd's client port while a restored cluster is fenced (agents only)"),
      Key("cluster.ports.metrics", "0",
          "etcd's own /metrics in plain HTTP on this port (--listen-metrics-urls); 0: off. "
          "(Before 0.2 the defaults were 2381-2383; 2381 is kubeadm's etcd metrics port. Agents "
          "of both versions talk only if the ports are set.)"),
      Key("cluster.replace_after", "1m",
          "a member unhealthy this long is replaced when a spare node is ready (>= 1s)"),
      Key("cluster.learner_timeout", "1m",
          "a learner that never starts is removed again after this (>= 1s)"),
      Key("cluster.leader_lease_ttl", "5s", "how long a dead leader blocks a new one (>= 2s)"),
      Key("cluster.reconcile_interval", "500ms",
          "pause between reconcile passes that changed nothing"),
      Key("cluster.idle_interval", "10s",
          "pause while the cluster is settled (at spec, healthy); a node whose state changes "
          "nudges the leader at once; a silently dead node and a NOSPACE alarm wait for the next "
          "pass. reconcile_interval..2m"),
      Key("cluster.recover_nospace", "true",
          "the leader clears a NOSPACE alarm itself: compact, defragment member by member "
          "(leader last), disarm; false: leave it to an operator"),
      Key("cluster.hash_check_interval", "5m",
          "the leader compares every member's data (etcd HashKV at one revision) this often, "
          "and after a member restarts or a restore; 0: never; else >= 1s"),
      Key("cluster.repair_diverged", "true",
          "a member whose data differs from a majority that agrees (in two checks in a row) is "
          "set aside and rejoined; false: only named in status, /metrics and the history"),
      Key("cluster.move_leader_off_slow_disk", "true",
          "the leader moves etcd leadership off a member whose disk stays past etcd's guidance "
          "(WAL fsync p99 10 ms, backend commit p99 25 ms) for 1m, to one within it; at most "
          "once in 5m; false: only named in status and /metrics"),
      Key("cluster.defrag_above_percent", "45",
          "the leader defragments a member whose backend file is at least this % free pages "
          "(and at least defrag_min_size): one member at a time, followers first, the etcd "
          "leader after a leadership move, only while every member is healthy; 0: never"),
      Key("cluster.defrag_min_size", "100MiB",
          "a smaller backend file is never defragmented by rule"),
      Key("cluster.defrag_pause", "30s", "between two members' defragmentations"),
      Key("cluster.defrag_window", "\"\"",
          "HH:MM-HH:MM (UTC, may wrap past midnight): defragmentation by rule starts only "
          "inside it; \"\": any time"),
      Commented("cluster.adopt", "",
                "optional: take over a running cluster no agent created (docs/adopt.md). While "
                "set: no bootstrap, no automatic restore. Its keys:"),
      Commented("cluster.adopt.endpoints", "[https://10.0.0.5:2379]",
                "required: its members' client URLs, http(s)://host:port, all one scheme; not a "
                "configured node's own URL"),
      Commented("cluster.adopt.ca_file", "\"\"",
                "https only: the CA of those URLs when the agents' own TLS does not reach them"),
      Commented("cluster.adopt.cert_file", "\"\"",
                "with key_file: the client certificate for them; required for https with "
                "tls.mode: off"),
      Commented("cluster.adopt.key_file", "\"\"", "its key"),

      Section("node", "required; this node's own"),
      Key("node.name", "n1", "required: which entry of cluster.nodes this agent is"),
      Key("node.data_dir", "/var/lib/steward/n1",
          "default /var/lib/steward/<node.name>; created 0700 if missing"),
      Key("node.log_level", "info", "trace, debug, info, warn, error"),

      Section("etcd", "how etcd is run"),
      Key("etcd.binary", "/usr/bin/etcd",
          "must exist and be executable (not checked with runner.kind: static-pod)"),
      Key("etcd.extra_args", "[]",
          "appended to etcd's flags. Refused, naming the flag: flags steward sets itself, "
          "--wal-dir, --config-file, --force-new-cluster, --discovery*, "
          "--strict-reconfig-check=false, --auto-tls/--peer-auto-tls"),
      Key("etcd.stop_timeout", "10s", "SIGTERM -> SIGKILL grace period"),
      Key("etcd.restart_backoff_min", "500ms", "the first wait before etcd is restarted"),
      Key("etcd.restart_backoff_max", "30s", "the longest, after repeated exits"),
      Key("etcd.hang_restart_after", "30s",
          "etcd running but not answering a linearizable read this long, while the other "
          "members serve, is restarted in place, data kept (>= 10s; 0: never); docs/running.md"),
      Key("etcd.versions", "{}",
          "rolling upgrades: version -> binary (static-pod: image); see docs/upgrades.md"),
      Key("etcd.etcdctl", "/usr/bin/etcdctl",
          "used for `snapshot restore` when there is no etcdutl"),
      Key("etcd.etcdutl", "\"\"",
          "etcd >= 3.5's etcdutl; default /usr/bin/etcdutl if present. With restore_in_place "
          "off, restores raise the revision only with it (--bump-revision); `make` fetches "
          "3.5.16's"),
      Key("etcd.restore_in_place", "true",
          "a member's restore edits the backup's DB where it lands instead of running `snapshot "
          "restore` (which copies it; see docs/restore-in-place.md); false, or a DB it refuses: "
          "the tool above (a revision bump then needs etcdutl)"),
      Key("etcd.log_max_size", "64MiB",
          "<data_dir>/etcd.log is rotated once past this (checked every 30 s); B, KiB, MiB, GiB "
          "or KB, MB, GB; at least 1MiB, or 0: never rotated. runner.kind process only. See "
          "docs/monitoring.md, \"Logs\""),
      Key("etcd.log_keep", "3",
          "rotated copies kept, etcd.log.1 (newest) .. etcd.log.<log_keep>; 0..100"),
      Key("etcd.auto_compaction_mode", "periodic",
          "etcd's --auto-compaction-mode: periodic or revision"),
      Key("etcd.auto_compaction_retention", "1h",
          "--auto-compaction-retention. periodic: a duration of whole seconds (1h, 30m, 1d = "
          "24h); revision: how many revisions to keep (required then); 0: no automatic "
          "compaction. If etcd.extra_args sets --auto-compaction-*, those decide (drop-in "
          "configs); both: refused"),

      Section("runner", "where etcd runs"),
      Key("runner.kind", "process",
          "process: a child of the agent; static-pod: a kubelet static pod"),
      Key("runner.manifest_dir", "/etc/kubernetes/manifests",
          "static-pod: the kubelet's staticPodPath (must exist)"),
      Key("runner.image", "\"\"", "static-pod: required, an etcd image with `etcd` on its PATH"),
      Key("runner.pod_spec_file", "\"\"",
          "static-pod: optional base Pod (YAML) merged under what the agent owns"),

      Section("backup", "backups, delta backups, drills and restores"),
      Key("backup.store", "\"\"",
          "file:///abs/dir (must exist; never created) or s3://bucket/prefix; empty: no backups "
          "(warned)"),
      Key("backup.interval", "30m", "periodic backups, taken by the leader"),
      Key("backup.before_change_min_interval", "5m",
          "backups before membership changes, at most this often"),
      Key("backup.auto_restore", "true",
          "after total loss, restore the newest valid backup unasked"),
      Key("backup.delta_interval", "10s",
          "the leader stores the changes since the newest full backup this often (delta "
          "backups; restores replay them); 0: off"),
      Key("backup.drill_interval", "24h",
          "the leader restores the newest backup into a scratch etcd and compares it with the "
          "live cluster this often (restore drill); 0: off"),
      Key("backup.drill_scratch", "\"\"",
          "where the drill's scratch data dir goes; \"\": <node.data_dir>/drill"),
      Key("backup.low_memory_stream", "false",
          "read the snapshot stream of a full backup with a fixed 64 KiB window: the agent's "
          "and stewardctl's memory stays flat (about 26 MiB here) at any DB size and load, for "
          "a backup that takes about twice as long over TLS; false: gRPC sizes the window, and "
          "what etcd sends ahead waits in memory (tens of MiB on a busy machine)"),
      Section("backup.retention", "which backups are kept (the newest always is)"),
      Key("backup.retention.keep_all_for", "1h", "keep every backup this young"),
      Key("backup.retention.hourly_for", "24h", "then one per hour for this long"),
      Key("backup.retention.daily_for", "30d", "then one per day for this long (all three > 0)"),
      Section("backup.s3",
              "an s3:// store; needs libcurl (Debian's libcurl4), loaded when an S3 store is "
              "first used"),
      Key("backup.s3.endpoint", "\"\"", "e.g. http://127.0.0.1:4568; default AWS"),
      Key("backup.s3.region", "\"\"", "default $AWS_DEFAULT_REGION, else us-east-1"),
      Key("backup.s3.path_style", "false",
          "http://endpoint/bucket/key instead of http://bucket.endpoint/key"),
      Key("backup.s3.access_key_id", "\"\"", "default $AWS_ACCESS_KEY_ID"),
      Key("backup.s3.secret_access_key", "\"\"",
          "default $AWS_SECRET_ACCESS_KEY (never logged); a config file that holds it must not "
          "be readable by others"),
      Key("backup.s3.session_token", "\"\"", "default $AWS_SESSION_TOKEN"),
      Key("backup.s3.profile", "\"\"",
          "with no keys above or in AWS_*: this profile of the shared credentials file "
          "($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials); default $AWS_PROFILE, else "
          "\"default\""),
      Key("backup.s3.ca_file", "\"\"",
          "PEM CA bundle for an endpoint behind a private CA (MinIO, Ceph); default "
          "$AWS_CA_BUNDLE, else the system's trust store"),
      Commented("backup.encryption", "",
                "optional; off: status says NOT ENCRYPTED (docs/backup-layout.md). Its keys:"),
      Commented("backup.encryption.key_file", "/etc/steward/backup.key",
                "required: 32 bytes in base64, mode 0600 (openssl rand -base64 32 > "
                "backup.key); new backups are encrypted with it (AES-256-GCM)"),
      Commented("backup.encryption.old_key_files", "[]",
                "earlier keys, to restore backups taken before a rotation"),

      Section("auth", "etcd's authentication and roles (docs/clients.md)"),
      Key("auth.mode", "unmanaged",
          "unmanaged (left as etcd has it), on (the leader keeps it on, with a password-less "
          "root user per agent - its client certificate's CN - and per admin_users entry), off "
          "(the leader keeps it off); on needs TLS"),
      Key("auth.admin_users", "[steward-admin]",
          "CNs given etcd's root role (pki init's admin.crt is steward-admin); never \"root\""),

      Section("tls", "required; see docs/tls.md"),
      Key("tls.mode", "issued", "issued (default), files, or off (must be written explicitly)"),
      Key("tls.ca_cert", "/etc/steward/pki/ca.crt", "issued: required, the CA certificate"),
      Key("tls.ca_key", "/etc/steward/pki/ca.key",
          "issued: required, its key; refused if group or others can read it"),
      Key("tls.cert_lifetime", "365d",
          "issued certificates' lifetime; renewed after two-thirds of it"),
      Key("tls.extra_sans", "[]",
          "issued: more DNS names / IPs in the server certificates (a load balancer, the names a "
          "Kubernetes API server dials); a change re-issues"),
      Commented("tls.cert_file", "server.crt",
                "files: etcd's server certificate (client URL) and the agent API's"),
      Commented("tls.key_file", "server.key", "files: its key"),
      Commented("tls.peer_cert_file", "peer.crt", "files: etcd's peer URL"),
      Commented("tls.peer_key_file", "peer.key", "files: its key"),
      Commented("tls.trusted_ca_file", "ca.crt", "files: the CA that signed them"),
      Commented("tls.client_cert_file", "client.crt",
                "files: what the agent presents as a client (with its role URI)"),
      Commented("tls.client_key_file", "client.key", "files: its key"),
  };
  return kSchema;
}

std::set<std::string> ConfigKeysUnder(const std::string& section) {
  std::set<std::string> out;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const ConfigKey& k : ConfigSchema()) {
    if (k.path.rfind(prefix, 0) != 0) continue;
    const std::string rest = k.path.substr(prefix.size());
    if (rest.find('.') != std::string::npos) continue;
    // "cluster.nodes[].name" is under "cluster.nodes[]", not under "cluster".
    if (rest.find("[]") != std::string::npos) continue;
    out.insert(rest);
  }
  return out;
}

namespace {

constexpr size_t kCommentColumn = 26;
constexpr size_t kWidth = 100;

// `doc` as "# ..." comments: the first from column `first_at` (after the key), the rest
// aligned at kCommentColumn, wrapped at kWidth.
std::string Comment(const std::string& doc, size_t first_at) {
  std::vector<std::string> words = absl::StrSplit(doc, ' ', absl::SkipEmpty());
  std::string out;
  size_t col = first_at;
  std::string line;
  auto flush = [&](bool first) {
    if (!first) out += "\n" + std::string(kCommentColumn, ' ');
    out += "# " + line;
    line.clear();
  };
  bool first = true;
  for (const std::string& w : words) {
    const size_t start = first ? col : kCommentColumn;
    if (!line.empty() && start + 2 + line.size() + 1 + w.size() > kWidth) {
      flush(first);
      first = false;
    }
    line += line.empty() ? w : " " + w;
  }
  if (!line.empty()) flush(first);
  return out;
}

}  // namespace

std::string RenderConfigReference() {
  std::string out;
  for (const ConfigKey& k : ConfigSchema()) {
    const std::vector<std::string> parts = absl::StrSplit(k.path, '.');
    std::string indent((parts.size() - 1) * 2, ' ');
    const std::string& name = parts.back();
    std::string text;
    if (name.find("[]") != std::string::npos || k.path.find("[]") != std::string::npos) {
      // A field of a list's entries: documented under the list, as a comment.
      text = absl::StrCat(indent, "#   ", name, ":");
      text += std::string(text.size() < kCommentColumn ? kCommentColumn - text.size() : 1, ' ');
      out += text + Comment(k.doc, text.size()) + "\n";
      continue;
    }
    // A value that starts on a new line is a block (a list): its lines follow the comment.
    const bool block = !k.value.empty() && k.value[0] == '\n';
    text = absl::StrCat(indent, k.commented ? "# " : "", name, ":",
                        k.section || block ? "" : absl::StrCat(" ", k.value));
    if (text.size() + 1 < kCommentColumn) {
      text += std::string(kCommentColumn - text.size(), ' ');
    } else {
      text += "  ";
    }
    out += text + Comment(k.doc, text.size()) + "\n";
    if (block) {
      for (absl::string_view line : absl::StrSplit(k.value.substr(1), '\n')) {
        absl::StrAppend(&out, indent, "  ", line, "\n");
      }
    }
  }
  return out;
}

}  // namespace steward
