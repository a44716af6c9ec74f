// The agent's configuration: one YAML file per node. The `cluster` section is meant to be
// identical on every node; `node` says which of the cluster's nodes this agent is.
//
// Every field below shows its default; docs/configuration.md documents each key.
// Loading validates everything before the caller touches anything: the first problem found is
// returned as InvalidArgument whose message starts with the key ("cluster.size: ...").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace steward {

struct NodeSpec {
  std::string name;  // required; [A-Za-z0-9._-]+, unique
  std::string host;  // required; an address or DNS name etcd and agents bind to and advertise
};

struct Ports {
  int client = 2379;  // etcd client URL
  int peer = 2380;    // etcd peer URL
  int agent = 2390;   // steward's agent-to-agent API
  int admin = 2391;   // steward's /healthz /readyz /leader /metrics (admin/server.h)
  // etcd's client URL while a restored cluster is fenced: only the agents use it, until the
  // leases that came with the backup are revoked (see RestoreCoordinator).
  int fence = 2392;
  // etcd's own Prometheus metrics in plain HTTP (--listen-metrics-urls http://<host>:<port>),
  // so a scraper needs no etcd client certificate. 0: off (etcd's /metrics stays on its
  // client URL, behind client-certificate authentication).
  int metrics = 0;
};

// Adopting a running cluster that no agent created: the agents join it (each node as a learner,
// promoted once caught up) until cluster.size of them are voters, and never remove or stop the
// members they do not manage (`stewardctl retire-unmanaged` removes them, one at a time).
// While set, no node bootstraps and no restore starts by itself. docs/adopt.md.
struct AdoptConfig {
  std::vector<std::string> endpoints;  // client URLs of the running cluster's members
  // TLS files to reach those endpoints when the agents' own do not (another CA); empty: an
  // https endpoint is dialled with the agents' own client certificate, http in plain text.
  std::string ca_file, cert_file, key_file;
  bool enabled() const { return !endpoints.empty(); }
};

struct ClusterConfig {
  std::string name;             // required; part of etcd's initial cluster token
  int size = 0;                 // desired voting members; default min(3, nodes)
  std::vector<NodeSpec> nodes;  // required, at least one
  Ports ports;
  // A member unhealthy this long is replaced when a spare node is ready.
  std::chrono::milliseconds replace_after{60000};
  // A learner whose node does not bring it up within this long is removed again.
  std::chrono::milliseconds learner_timeout{60000};
  // TTL of the leader's lease: how long a dead leader blocks a new one.
  std::chrono::milliseconds leader_lease_ttl{5000};
  // Pause between reconcile passes that changed nothing.
  std::chrono::milliseconds reconcile_interval{500};
  // Pause between passes while the cluster is settled (at its spec, every member healthy).
  // A node whose state changes nudges the leader, so healing does not wait for it. What waits
  // for it: noticing a node that died silently (machine gone; replaced after replace_after
  // anyway) and a NOSPACE alarm. 10 s keeps a settled leader near 0.1 % of a core.
  std::chrono::milliseconds idle_interval{10000};
  // The steward leader clears a NOSPACE alarm by itself: compact, defragment member by member,
  // disarm (reconcile/space.h). false: an operator does it (stewardctl defrag, alarm disarm).
  bool recover_nospace = true;
  // The steward leader compares etcd's HashKV of every member at one revision this often (and
  // after a member restarts or a restore); 0: never (reconcile/divergence.h).
  std::chrono::milliseconds hash_check_interval{300000};
  // A member whose data differs from a majority that agrees is set aside and rejoined (plan
  // rule DV4). false: named in status, /metrics and the history, never repaired.
  bool repair_diverged = true;
  // The steward leader moves etcd leadership off a member whose disk stays past etcd's guidance
  // to a member whose disk is within it (reconcile/leader_move.h). false: only named.
  bool move_leader_off_slow_disk = true;
  // Defragmentation by rule (reconcile/defrag_rule.h): a member whose backend file is at least
  // defrag_min_size and at least defrag_above_percent % free pages is defragmented, one member
  // at a time, followers first, the etcd leader after a leadership move; 0: never.
  int defrag_above_percent = 45;
  int64_t defrag_min_size = int64_t{100} << 20;
  // Between two members' defrags.
  std::chrono::milliseconds defrag_pause{30000};
  // "HH:MM-HH:MM" (UTC, may wrap past midnight): defrags by rule start only inside; "" any time.
  std::string defrag_window;
  AdoptConfig adopt;
};

struct NodeConfig {
  std::string name;                // required; one of cluster.nodes[].name
  std::string data_dir;            // default /var/lib/steward/<node.name>
  std::string log_level = "info";  // trace, debug, info, warn, error
};

struct EtcdConfig {
  std::string binary = "/usr/bin/etcd";
  std::string etcdctl = "/usr/bin/etcdctl";  // used for `snapshot restore` without etcdutl
  // etcd >= 3.5's etcdutl, for `snapshot restore --bump-revision` (etcd 3.4 runs on what it
  // writes). Default: /usr/bin/etcdutl when it exists; empty: only the in-place restore raises
  // a restore's revision (without either, restores do not raise it, warned).
  std::string etcdutl;
  // A member's restore edits the backup's DB where it lands (etcd/restore_in_place.h) instead
  // of running etcdctl/etcdutl `snapshot restore` (which copies it); false: always the tool.
  bool restore_in_place = true;
  std::vector<std::string> extra_args;  // passed to etcd after the flags steward manages
  // Rolling upgrades: etcd version ("3.5.16") -> its binary (or, with runner.kind static-pod,
  // its image). The same on every node. `stewardctl configure-cluster --etcd-version V` asks
  // for V; a node runs the version it last switched to (its etcd-version marker).
  std::map<std::string, std::string> versions;
  std::chrono::milliseconds stop_timeout{10000};         // SIGTERM -> SIGKILL grace
  std::chrono::milliseconds restart_backoff_min{500};    // first restart delay
  std::chrono::milliseconds restart_backoff_max{30000};  // cap on restart delay
  // The node's watchdog (node/hang_decision.h): etcd running but not answering a linearizable
  // read this long, while the other members serve, is restarted in place (data kept). 0: off.
  std::chrono::milliseconds hang_restart_after{30000};
  // <data_dir>/etcd.log is rotated past this size (copy, then truncate in place:
  // common/log_rotate.h); 0: never. runner.kind process only (a kubelet keeps a static pod's).
  uint64_t log_max_size = 64ULL << 20;
  int log_keep = 3;  // rotated copies kept, etcd.log.1 (newest) .. etcd.log.<log_keep>; 0..100
  // etcd's own automatic compaction (--auto-compaction-mode/-retention), so old revisions do
  // not fill the backend up to its quota (NOSPACE). "periodic" (default, as kubeadm runs etcd):
  // keep `auto_compaction_retention` of history, a duration (1h); "revision": keep that many
  // revisions. Retention "0": off. Mode empty: not rendered, because etcd.extra_args sets the
  // flags itself (a drop-in config); both at once are refused.
  std::string auto_compaction_mode = "periodic";
  std::string auto_compaction_retention = "1h";  // as etcd takes it: "1h", "30m", "10000"
};

// How etcd is run. "process" (the default): a child of the agent. "static-pod": a kubelet
// static pod — the agent writes a Pod manifest into manifest_dir and the kubelet runs it; the
// agent judges etcd by its data dir and URLs, not by a child pid.
struct RunnerConfig {
  std::string kind = "process";                            // process, static-pod
  std::string manifest_dir = "/etc/kubernetes/manifests";  // static-pod: must exist
  std::string image;          // static-pod: required (an etcd image with `etcd` on its PATH)
  std::string pod_spec_file;  // static-pod: optional base Pod spec (YAML) merged into
  // The base spec's text, read and checked when the config is loaded.
  std::string pod_spec;
};

struct RetentionConfig {
  std::chrono::milliseconds keep_all_for{3600000};       // keep every backup this young
  std::chrono::milliseconds hourly_for{24LL * 3600000};  // then one an hour for this long
  std::chrono::milliseconds daily_for{30LL * 86400000};  // then one a day for this long
};

struct S3Config {
  std::string endpoint;  // default: AWS (https://s3.<region>.amazonaws.com)
  std::string region;    // default: $AWS_DEFAULT_REGION, else us-east-1
  bool path_style = false;
  std::string access_key_id;      // default: $AWS_ACCESS_KEY_ID
  std::string secret_access_key;  // default: $AWS_SECRET_ACCESS_KEY (never logged)
  std::string session_token;      // default: $AWS_SESSION_TOKEN (never logged)
  // Without keys in the config or AWS_*: this profile of the shared credentials file
  // ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials); default $AWS_PROFILE, else "default".
  std::string profile;
  // PEM bundle of the CA(s) that signed the endpoint's certificate (MinIO or Ceph behind a
  // private CA); empty: the system's trust store.
  std::string ca_file;
};

// Backups encrypted at rest (backup/encryption.h): key files of 32 bytes in base64.
struct EncryptionConfig {
  std::string key_file;                    // new backups; "": in clear (status warns)
  std::vector<std::string> old_key_files;  // earlier keys, for restoring older backups
  bool enabled() const { return !key_file.empty(); }
};

struct BackupConfig {
  std::string store;  // file:///dir or s3://bucket/prefix; empty: no backups (a warning)
  std::chrono::milliseconds interval{30LL * 60000};
  // Backups before membership changes are taken at most this often.
  std::chrono::milliseconds before_change_min_interval{5LL * 60000};
  bool auto_restore = true;  // restore the newest valid backup after total loss, unasked
  // The leader stores what changed since the newest full backup this often (delta backups,
  // backup/delta.h); 0 turns them off.
  std::chrono::milliseconds delta_interval{10000};
  // The steward leader restores the newest backup into a scratch etcd and compares it with the
  // live cluster this often (a restore drill, backup/drill_scheduler.h); 0 turns drills off.
  std::chrono::milliseconds drill_interval{24LL * 3600000};
  // Where the drill's scratch data dir is made; "": <node.data_dir>/drill. Needs the DB's size
  // + 128 MiB free, else the drill is skipped and says why.
  std::string drill_scratch;
  // Full backups read etcd's snapshot stream with a fixed 64 KiB window: flat memory however
  // large the DB and however busy the machine, for a stream about half as fast over TLS.
  bool low_memory_stream = false;
  RetentionConfig retention;
  S3Config s3;
  EncryptionConfig encryption;
};

// etcd's authentication and roles (docs/clients.md). Mode "unmanaged" (the default): the agents
// leave etcd's auth as they find it. "on": the steward leader keeps auth enabled, with a
// password-less user holding etcd's root role for every agent (its client certificate's common
// name) and for each of admin_users; applications get confined users with `stewardctl access
// grant`. "off": the leader keeps auth disabled. "on" needs TLS (users are certificate names).
struct AuthConfig {
  std::string mode = "unmanaged";                            // unmanaged, on, off
  std::vector<std::string> admin_users = {"steward-admin"};  // the CN `stewardctl pki init` gives
  bool managed() const { return mode != "unmanaged"; }
};

// TLS on etcd's client and peer URLs and on the agents' API. Mode "issued" (the default): each
// agent issues its own certificates from the operator's CA. Mode "files": the operator's own
// files, with etcd's (and etcd-wrapper's) names. Mode "off": plain text, only when written.
struct TlsConfig {
  std::string mode = "issued";  // issued, files, off
  std::string ca_cert;          // issued: required
  std::string ca_key;           // issued: required; must not be readable by group or others
  std::chrono::milliseconds cert_lifetime{365LL * 86400000};
  // issued: more subjectAltNames for the server certificates (etcd's client and peer URLs,
  // the agent API): DNS names or IP addresses clients dial, e.g. a load balancer in front of
  // etcd for a Kubernetes API server.
  std::vector<std::string> extra_sans;
  // files mode
  std::string cert_file, key_file;                // etcd server (client URL) and agent API
  std::string peer_cert_file, peer_key_file;      // etcd peer URL
  std::string trusted_ca_file;                    // the CA that signed all of them
  std::string client_cert_file, client_key_file;  // what the agent presents as a client
  bool enabled() const { return mode != "off"; }
};

// The files each TLS role uses, wherever they come from.
struct TlsPaths {
  std::string ca;
  std::string server_cert, server_key;  // etcd's client URL
  std::string peer_cert, peer_key;      // etcd's peer URL
  std::string agent_cert, agent_key;    // the agent API server
  std::string client_cert, client_key;  // outgoing connections (etcd, other agents)
};

struct Config {
  ClusterConfig cluster;
  NodeConfig node;
  EtcdConfig etcd;
  RunnerConfig runner;
  BackupConfig backup;
  TlsConfig tls;
  AuthConfig auth;
  std::string source;  // the file it was loaded from, for messages

  const NodeSpec& self() const;  // REQUIRES: a validated config
  std::string ClientUrl(const NodeSpec& n) const;
  std::string PeerUrl(const NodeSpec& n) const;
  std::string FenceUrl(const NodeSpec& n) const;      // etcd's client URL while fenced
  std::string AgentAddress(const NodeSpec& n) const;  // host:port of the agent API
  std::vector<std::string> AllClientUrls() const;
  // Where the cluster is reached: the nodes' client URLs, then cluster.adopt.endpoints.
  std::vector<std::string> ClusterClientUrls() const;
  // etcd's --initial-cluster-token for a first bootstrap of this cluster.
  std::string ClusterToken() const;
  // Where the agent keeps etcd's own data dir, its log and its pid file.
  std::string EtcdDataDir() const;
  std::string EtcdLogPath() const;
  std::string EtcdPidPath() const;
  std::string Scheme() const { return tls.enabled() ? "https" : "http"; }
  // REQUIRES: tls.enabled().
  TlsPaths Tls() const;
};

// Parses and validates YAML text. `source` names the file in messages. Checks the
// filesystem for etcd.binary (exists, executable) and node.data_dir (exists or can be created)
// but changes nothing.
absl::StatusOr<Config> ParseConfig(const std::string& yaml_text, const std::string& source);

// Reads and parses `path`.
absl::StatusOr<Config> LoadConfig(const std::string& path);

// The same for stewardctl on any machine, without root: every key is parsed and checked, but
// not what only the agent's machine has (etcd binaries, a writable data dir or file store,
// readable CA key and TLS files).
absl::StatusOr<Config> LoadClientConfig(const std::string& path);

// A backup store named by URL alone (stewardctl --backup-store, on a machine without a node's
// config): file:///dir, or s3://bucket/prefix with the credentials, region and endpoint from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION/AWS_DEFAULT_REGION and
// AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL (path-style when an endpoint is given).
absl::StatusOr<BackupConfig> BackupStoreFromUrl(const std::string& url);

}  // namespace steward
