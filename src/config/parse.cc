// Parsing and loading a config file (config.h: ParseConfig, LoadConfig, LoadClientConfig,
// BackupStoreFromUrl): the top level, cluster, node, etcd and runner here; the other
// sections in sections.cc.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/log_rotate.h"
#include "config/aws_credentials.h"
#include "config/config.h"
#include "config/encryption_key.h"
#include "config/parse_util.h"
#include "config/schema.h"
#include "config/sections.h"
#include "yaml-cpp/yaml.h"

namespace steward {
namespace {

// The parser's helpers and sections (parse_util.h): shared with sections.cc.
using namespace config_internal;  // NOLINT(build/namespaces)

// The flags steward derives itself; setting them in extra_args would fight the agent.
const std::set<std::string>& ManagedFlags() {
  static const std::set<std::string> kFlags = {
      "--name", "--data-dir", "--listen-client-urls", "--advertise-client-urls",
      "--listen-peer-urls", "--initial-advertise-peer-urls", "--initial-cluster",
      "--initial-cluster-state", "--initial-cluster-token", "--cert-file", "--key-file",
      "--trusted-ca-file", "--client-cert-auth", "--peer-cert-file", "--peer-key-file",
      "--peer-trusted-ca-file", "--peer-client-cert-auth", "--auto-tls", "--peer-auto-tls",
      // The agent reads the WAL under <data-dir>/member/wal to tell a member from an empty or
      // partial data dir: a WAL elsewhere would make a live member look empty.
      "--wal-dir"};
  return kFlags;
}

// etcd.auto_compaction_mode / _retention, checked and put in the form etcd takes. With
// neither key set and etcd.extra_args setting --auto-compaction-*, the mode is left empty: the
// agent renders nothing and extra_args decide (drop-in configs carry etcd's own settings there).
void ParseAutoCompaction(const YAML::Node& ec, Config* c) {
  const bool mode_set = ec["auto_compaction_mode"] && !ec["auto_compaction_mode"].IsNull();
  const bool retention_set =
      ec["auto_compaction_retention"] && !ec["auto_compaction_retention"].IsNull();
  for (size_t i = 0; i < c->etcd.extra_args.size(); ++i) {
    const std::string& arg = c->etcd.extra_args[i];
    if (arg.find("-auto-compaction-") > 2) continue;  // "--auto-…" or "-auto-…" only
    if (mode_set || retention_set) {
      Fail(absl::StrCat("etcd.extra_args[", i, "]"),
           absl::StrCat(arg.substr(0, arg.find('=')), " is also set by etcd.",
                        mode_set ? "auto_compaction_mode" : "auto_compaction_retention",
                        "; set one or the other"));
    }
    c->etcd.auto_compaction_mode.clear();
    c->etcd.auto_compaction_retention.clear();
    return;
  }
  auto& mode = c->etcd.auto_compaction_mode;
  auto& retention = c->etcd.auto_compaction_retention;
  mode = GetString(ec, "etcd", "auto_compaction_mode", false, mode);
  if (mode != "periodic" && mode != "revision") {
    Fail("etcd.auto_compaction_mode",
         absl::StrCat("must be periodic or revision, got \"", mode, "\""));
  }
  if (!retention_set) {
    if (mode == "revision") {
      Fail("etcd.auto_compaction_retention",
           "is required with auto_compaction_mode revision: the number of revisions to keep, "
           "e.g. 10000 (or 0: off)");
    }
    return;  // periodic, 1h
  }
  const std::string text = GetString(ec, "etcd", "auto_compaction_retention", false, "");
  if (text == "0") {
    retention = "0";  // etcd: no automatic compaction
    return;
  }
  if (mode == "revision") {
    int64_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 0) {
      Fail("etcd.auto_compaction_retention",
           absl::StrCat("with auto_compaction_mode revision, must be a number of revisions "
                        "(e.g. 10000; 0: off), got \"",
                        text, "\""));
    }
    retention = absl::StrCat(n);
    return;
  }
  auto d = ParseDuration(text);
  if (!d.ok() || d->count() < 1000 || d->count() % 1000 != 0) {
    Fail("etcd.auto_compaction_retention",
         absl::StrCat("with auto_compaction_mode periodic, must be a duration of whole seconds, "
                      "at least 1s, such as 1h or 30m (0: off), got \"",
                      text, "\""));
  }
  // Go's durations have no days: the largest unit that divides it.
  const int64_t s = d->count() / 1000;
  retention = s % 3600 == 0 ? absl::StrCat(s / 3600, "h")
              : s % 60 == 0 ? absl::StrCat(s / 60, "m")
                            : absl::StrCat(s, "s");
}

// Flags that would let etcd act behind the agent's back; empty if `arg` (flag `flag`) is fine.
std::string UnsafeFlag(const std::string& flag, const std::string& arg) {
  if (flag == "--config-file") {
    return "--config-file would configure etcd behind the agent's flags; put the settings in "
           "etcd.extra_args";
  }
  if (flag == "--force-new-cluster") {
    return "--force-new-cluster discards the cluster's membership; use stewardctl "
           "restore-backup to recover a cluster";
  }
  if (flag.rfind("--discovery", 0) == 0) {
    return flag + ": the agents form and grow the cluster themselves (discovery would fight them)";
  }
  if (flag == "--strict-reconfig-check") {
    const std::string v = arg.size() > flag.size() ? arg.substr(flag.size() + 1) : "true";
    if (v != "true") {
      return "--strict-reconfig-check must stay on: it is what refuses a membership change "
             "that would lose quorum";
    }
  }
  return "";
}

void ParseRunner(const YAML::Node& r, Config* c) {
  if (!r || r.IsNull()) return;
  if (!r.IsMap()) Fail("runner", "must be a mapping");
  CheckKeys(r, "runner", ConfigKeysUnder("runner"));
  RunnerConfig& rc = c->runner;
  rc.kind = GetString(r, "runner", "kind", false, rc.kind);
  if (rc.kind != "process" && rc.kind != "static-pod") {
    Fail("runner.kind", absl::StrCat("\"", rc.kind, "\" is not one of process, static-pod"));
  }
  rc.manifest_dir = GetString(r, "runner", "manifest_dir", false, rc.manifest_dir);
  rc.image = GetString(r, "runner", "image", false, "");
  rc.pod_spec_file = GetString(r, "runner", "pod_spec_file", false, "");
  if (rc.kind != "static-pod") {
    if (!rc.image.empty() || !rc.pod_spec_file.empty()) {
      Fail(rc.image.empty() ? "runner.pod_spec_file" : "runner.image",
           "is only used with runner.kind: static-pod");
    }
    return;
  }
  if (rc.image.empty()) Fail("runner.image", "is required with runner.kind: static-pod");
  std::error_code ec;
  if (!std::filesystem::is_directory(rc.manifest_dir, ec)) {
    Fail(
        "runner.manifest_dir",
        absl::StrCat("\"", rc.manifest_dir, "\" is not a directory (the kubelet's staticPodPath)"));
  }
  if (!rc.pod_spec_file.empty()) {
    std::ifstream in(rc.pod_spec_file);
    if (!in) Fail("runner.pod_spec_file", absl::StrCat("cannot read \"", rc.pod_spec_file, "\""));
    rc.pod_spec.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    YAML::Node base;
    try {
      base = YAML::Load(rc.pod_spec);
    } catch (const YAML::Exception& e) {
      Fail("runner.pod_spec_file", absl::StrCat("is not YAML: ", e.what()));
    }
    if (!base.IsMap() || (base["kind"] && base["kind"].as<std::string>("") != "Pod")) {
      Fail("runner.pod_spec_file", "must hold one Pod (kind: Pod)");
    }
  }
}

// The addresses a host stands for, as canonical text, without asking DNS (validation must not
// hang on a resolver): IP literals, and "localhost". Other names yield nothing.
std::set<std::string> HostAddresses(const std::string& host) {
  if (host == "localhost" || host == "localhost.localdomain") return {"127.0.0.1", "::1"};
  std::set<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  std::string literal = host;
  if (literal.size() > 2 && literal.front() == '[' && literal.back() == ']') {
    literal = literal.substr(1, literal.size() - 2);
  }
  if (getaddrinfo(literal.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    const void* addr =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, addr, buf, sizeof(buf)) != nullptr) out.insert(buf);
  }
  freeaddrinfo(res);
  return out;
}

// cluster.nodes: each {name, host}, no name or host:port twice, no machine listed twice.
void ParseNodes(const YAML::Node& cl, Config* c) {
  const YAML::Node nodes = cl["nodes"];
  if (!nodes || nodes.IsNull()) Fail("cluster.nodes", "is required");
  if (!nodes.IsSequence()) Fail("cluster.nodes", "must be a list of {name, host}");
  if (nodes.size() == 0) Fail("cluster.nodes", "must list at least one node");
  std::map<std::string, size_t> seen_names, seen_hosts;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string p = absl::StrCat("cluster.nodes[", i, "]");
    CheckKeys(nodes[i], p, ConfigKeysUnder("cluster.nodes[]"));
    NodeSpec n;
    n.name = GetString(nodes[i], p, "name", true);
    n.host = GetString(nodes[i], p, "host", true);
    if (!ValidName(n.name)) {
      Fail(p + ".name", "must be 1-63 characters of letters, digits, '-', '_' or '.'");
    }
    if (!ValidHost(n.host)) Fail(p + ".host", absl::StrCat("\"", n.host, "\" is not a valid host"));
    if (auto it = seen_names.find(n.name); it != seen_names.end()) {
      Fail(p + ".name", absl::StrCat("duplicate node name \"", n.name, "\" (also cluster.nodes[",
                                     it->second, "])"));
    }
    seen_names[n.name] = i;
    // Ports are the same on every node, so a repeated host means repeated host:port pairs.
    if (auto it = seen_hosts.find(n.host); it != seen_hosts.end()) {
      Fail(p + ".host",
           absl::StrCat("duplicate host:port pairs: host \"", n.host, "\" is also cluster.nodes[",
                        it->second, "] and every node uses the same ports"));
    }
    seen_hosts[n.host] = i;
    c->cluster.nodes.push_back(n);
  }
  // The same machine under two spellings (127.0.0.1 and localhost, ::1 and [::1]).
  std::map<std::string, size_t> seen_addresses;
  for (size_t i = 0; i < c->cluster.nodes.size(); ++i) {
    for (const auto& a : HostAddresses(c->cluster.nodes[i].host)) {
      auto [it, fresh] = seen_addresses.emplace(a, i);
      if (!fresh && it->second != i) {
        Fail(absl::StrCat("cluster.nodes[", i, "].host"),
             absl::StrCat("\"", c->cluster.nodes[i].host, "\" is the same address (", a,
                          ") as cluster.nodes[", it->second, "] (\"",
                          c->cluster.nodes[it->second].host, "\"): one machine listed twice"));
      }
    }
  }
}

// cluster.ports: each in range and none used twice.
void ParsePorts(const YAML::Node& cl, Config* c) {
  if (const YAML::Node ports = cl["ports"]; ports && !ports.IsNull()) {
    CheckKeys(ports, "cluster.ports", ConfigKeysUnder("cluster.ports"));
    c->cluster.ports.client = GetInt(ports, "cluster.ports", "client", c->cluster.ports.client);
    c->cluster.ports.peer = GetInt(ports, "cluster.ports", "peer", c->cluster.ports.peer);
    c->cluster.ports.agent = GetInt(ports, "cluster.ports", "agent", c->cluster.ports.agent);
    c->cluster.ports.admin = GetInt(ports, "cluster.ports", "admin", c->cluster.ports.admin);
    c->cluster.ports.fence = GetInt(ports, "cluster.ports", "fence", c->cluster.ports.fence);
    c->cluster.ports.metrics = GetInt(ports, "cluster.ports", "metrics", c->cluster.ports.metrics);
  }
  const std::pair<const char*, int> port_list[] = {{"client", c->cluster.ports.client},
                                                   {"peer", c->cluster.ports.peer},
                                                   {"agent", c->cluster.ports.agent},
                                                   {"admin", c->cluster.ports.admin},
                                                   {"fence", c->cluster.ports.fence}};
  std::map<int, std::string> seen_ports;
  std::vector<std::pair<const char*, int>> ports_in_use(std::begin(port_list), std::end(port_list));
  if (c->cluster.ports.metrics != 0) ports_in_use.emplace_back("metrics", c->cluster.ports.metrics);
  for (const auto& [name, port] : ports_in_use) {
    std::string key = absl::StrCat("cluster.ports.", name);
    if (port < 1 || port > 65535) {
      Fail(key, absl::StrCat("port ", port, " is out of range (1-65535)"));
    }
    if (auto it = seen_ports.find(port); it != seen_ports.end()) {
      Fail(key, absl::StrCat("port ", port, " is already cluster.ports.", it->second));
    }
    seen_ports[port] = name;
  }
}

// cluster's timers and switches (replace_after, learner_timeout, the leader's intervals).
void ParseTimers(const YAML::Node& cl, Config* c) {
  c->cluster.replace_after = GetDuration(cl, "cluster", "replace_after", c->cluster.replace_after);
  c->cluster.learner_timeout =
      GetDuration(cl, "cluster", "learner_timeout", c->cluster.learner_timeout);
  c->cluster.leader_lease_ttl =
      GetDuration(cl, "cluster", "leader_lease_ttl", c->cluster.leader_lease_ttl);
  c->cluster.reconcile_interval =
      GetDuration(cl, "cluster", "reconcile_interval", c->cluster.reconcile_interval);
  if (c->cluster.leader_lease_ttl < std::chrono::seconds(2)) {
    Fail("cluster.leader_lease_ttl", "must be at least 2s");
  }
  // 0 would replace a member on its first missed health check, or remove every learner at once.
  if (c->cluster.replace_after < std::chrono::seconds(1)) {
    Fail("cluster.replace_after", "must be at least 1s (0 would replace members on any hiccup)");
  }
  if (c->cluster.learner_timeout < std::chrono::seconds(1)) {
    Fail("cluster.learner_timeout", "must be at least 1s");
  }
  if (c->cluster.reconcile_interval < std::chrono::milliseconds(100)) {
    Fail("cluster.reconcile_interval", "must be at least 100ms");
  }
  c->cluster.idle_interval = GetDuration(cl, "cluster", "idle_interval", c->cluster.idle_interval);
  // (At most 2m: /healthz calls a loop that has not come round for 5m stuck.)
  if (c->cluster.idle_interval < c->cluster.reconcile_interval ||
      c->cluster.idle_interval > std::chrono::minutes(2)) {
    Fail("cluster.idle_interval", "must be between cluster.reconcile_interval and 2m");
  }
  c->cluster.recover_nospace =
      GetBool(cl, "cluster", "recover_nospace", c->cluster.recover_nospace);
  c->cluster.hash_check_interval =
      GetDuration(cl, "cluster", "hash_check_interval", c->cluster.hash_check_interval);
  if (c->cluster.hash_check_interval.count() != 0 &&
      c->cluster.hash_check_interval < std::chrono::seconds(1)) {
    Fail("cluster.hash_check_interval", "must be 0 (off) or at least 1s");
  }
  c->cluster.repair_diverged =
      GetBool(cl, "cluster", "repair_diverged", c->cluster.repair_diverged);
  c->cluster.move_leader_off_slow_disk =
      GetBool(cl, "cluster", "move_leader_off_slow_disk", c->cluster.move_leader_off_slow_disk);
  c->cluster.defrag_above_percent =
      GetInt(cl, "cluster", "defrag_above_percent", c->cluster.defrag_above_percent);
  if (c->cluster.defrag_above_percent < 0 || c->cluster.defrag_above_percent > 99) {
    Fail("cluster.defrag_above_percent",
         absl::StrCat("must be 0 (off) or 1..99, got ", c->cluster.defrag_above_percent));
  }
  if (const YAML::Node n = cl["defrag_min_size"]; n && !n.IsNull()) {
    if (!n.IsScalar()) Fail("cluster.defrag_min_size", "must be a size such as 100MiB");
    auto size = ParseByteSize(n.Scalar());
    if (!size.ok()) Fail("cluster.defrag_min_size", std::string(size.status().message()));
    c->cluster.defrag_min_size = static_cast<int64_t>(*size);
  }
  c->cluster.defrag_pause = GetDuration(cl, "cluster", "defrag_pause", c->cluster.defrag_pause);
  c->cluster.defrag_window = GetString(cl, "cluster", "defrag_window", false, "");
  if (!c->cluster.defrag_window.empty() && !ParseDailyWindow(c->cluster.defrag_window)) {
    Fail("cluster.defrag_window",
         absl::StrCat("must be HH:MM-HH:MM (UTC), such as 02:00-05:00, got \"",
                      c->cluster.defrag_window, "\""));
  }
}

// node: which of cluster.nodes this agent is, its data dir and log level.
void ParseNode(const YAML::Node& nd, Config* c) {
  if (!nd) Fail("node", "is required");
  CheckKeys(nd, "node", ConfigKeysUnder("node"));
  c->node.name = GetString(nd, "node", "name", true);
  if (std::none_of(c->cluster.nodes.begin(), c->cluster.nodes.end(),
                   [&](const NodeSpec& n) { return n.name == c->node.name; })) {
    std::vector<std::string> names;
    for (const auto& n : c->cluster.nodes) names.push_back(n.name);
    Fail("node.name", absl::StrCat("\"", c->node.name, "\" is not among cluster.nodes (",
                                   absl::StrJoin(names, ", "), ")"));
  }
  c->node.data_dir =
      GetString(nd, "node", "data_dir", false, absl::StrCat("/var/lib/steward/", c->node.name));
  if (c->node.data_dir.empty()) Fail("node.data_dir", "must not be empty");
  c->node.log_level = GetString(nd, "node", "log_level", false, c->node.log_level);
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(c->node.log_level)) {
    Fail("node.log_level",
         absl::StrCat("\"", c->node.log_level, "\" is not one of trace, debug, info, warn, error"));
  }
}

// etcd.versions: version -> binary (or image), for rolling upgrades.
void ParseEtcdVersions(const YAML::Node& vs, Config* c) {
  if (!vs || vs.IsNull()) return;
  if (!vs.IsMap())
    Fail("etcd.versions", "must map versions to binaries, e.g. 3.5.16: /opt/etcd-3.5.16/etcd");
  for (const auto& kv : vs) {
    const std::string version = kv.first.as<std::string>("");
    const std::string key = absl::StrCat("etcd.versions.", version);
    const std::vector<std::string> parts = absl::StrSplit(version, '.');
    bool ok = parts.size() == 3;
    for (const auto& p : parts) {
      int x = 0;
      ok = ok && absl::SimpleAtoi(p, &x) && x >= 0;
    }
    if (!ok) Fail(key, "the key must be an etcd version like 3.5.16");
    if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
      Fail(key, "must be the path of that version's etcd binary (or its image)");
    }
    c->etcd.versions[version] = kv.second.Scalar();
  }
}

// etcd.extra_args: appended to etcd's flags, never one steward sets or an unsafe one.
void ParseExtraArgs(const YAML::Node& ea, Config* c) {
  if (!ea || ea.IsNull()) return;
  if (!ea.IsSequence()) Fail("etcd.extra_args", "must be a list of strings");
  for (size_t i = 0; i < ea.size(); ++i) {
    std::string key = absl::StrCat("etcd.extra_args[", i, "]");
    if (!ea[i].IsScalar()) Fail(key, "must be a string");
    std::string arg = ea[i].Scalar();
    std::string flag = arg.substr(0, arg.find('='));
    // etcd (Go's flag package) takes -flag as well as --flag.
    if (flag.size() > 1 && flag[0] == '-' && flag[1] != '-') flag = "-" + flag;
    if (ManagedFlags().count(flag)) {
      Fail(key, absl::StrCat(flag, " is set by steward from the config and cannot be overridden"));
    }
    if (std::string why = UnsafeFlag(flag, arg); !why.empty()) Fail(key, why);
    if (flag == "--listen-metrics-urls" && c->cluster.ports.metrics != 0) {
      Fail(key, "--listen-metrics-urls is set from cluster.ports.metrics; set one or the other");
    }
    c->etcd.extra_args.push_back(arg);
  }
}

// etcd: how etcd is run (absent: every default).
void ParseEtcd(const YAML::Node& ec, Config* c) {
  if (!ec || ec.IsNull()) return;
  CheckKeys(ec, "etcd", ConfigKeysUnder("etcd"));
  ParseEtcdVersions(ec["versions"], c);
  c->etcd.binary = GetString(ec, "etcd", "binary", false, c->etcd.binary);
  c->etcd.etcdctl = GetString(ec, "etcd", "etcdctl", false, c->etcd.etcdctl);
  c->etcd.etcdutl = GetString(ec, "etcd", "etcdutl", false, "");
  if (!c->etcd.etcdutl.empty()) CheckBinary("etcd.etcdutl", c->etcd.etcdutl);
  c->etcd.restore_in_place = GetBool(ec, "etcd", "restore_in_place", c->etcd.restore_in_place);
  ParseExtraArgs(ec["extra_args"], c);
  c->etcd.stop_timeout = GetDuration(ec, "etcd", "stop_timeout", c->etcd.stop_timeout);
  c->etcd.restart_backoff_min =
      GetDuration(ec, "etcd", "restart_backoff_min", c->etcd.restart_backoff_min);
  c->etcd.restart_backoff_max =
      GetDuration(ec, "etcd", "restart_backoff_max", c->etcd.restart_backoff_max);
  c->etcd.hang_restart_after =
      GetDuration(ec, "etcd", "hang_restart_after", c->etcd.hang_restart_after);
  if (c->etcd.hang_restart_after.count() != 0 &&
      c->etcd.hang_restart_after < std::chrono::seconds(10)) {
    Fail("etcd.hang_restart_after",
         "must be 0 (off) or at least 10s (a long fsync or a slow apply is not a hang)");
  }
  if (c->etcd.restart_backoff_min.count() <= 0) {
    Fail("etcd.restart_backoff_min", "must be greater than 0");
  }
  if (c->etcd.restart_backoff_max < c->etcd.restart_backoff_min) {
    Fail("etcd.restart_backoff_max", "must not be less than etcd.restart_backoff_min");
  }
  if (const YAML::Node n = ec["log_max_size"]; n && !n.IsNull()) {
    if (!n.IsScalar()) Fail("etcd.log_max_size", "must be a size such as 64MiB, or 0");
    auto size = ParseByteSize(n.Scalar());
    if (!size.ok()) Fail("etcd.log_max_size", std::string(size.status().message()));
    if (*size != 0 && *size < (1ULL << 20)) {
      Fail("etcd.log_max_size",
           absl::StrCat("must be at least 1MiB (or 0: never rotate), got \"", n.Scalar(), "\""));
    }
    c->etcd.log_max_size = *size;
  }
  c->etcd.log_keep = GetInt(ec, "etcd", "log_keep", c->etcd.log_keep);
  if (c->etcd.log_keep < 0 || c->etcd.log_keep > 100) {
    Fail("etcd.log_keep", absl::StrCat("must be between 0 and 100, got ", c->etcd.log_keep));
  }
  ParseAutoCompaction(ec, c);
}

Config Parse(const YAML::Node& root) {
  Config c;
  if (!root || root.IsNull()) Fail("cluster", "is required (the file is empty)");
  CheckKeys(root, "", ConfigKeysUnder(""));

  // cluster
  const YAML::Node cl = root["cluster"];
  if (!cl) Fail("cluster", "is required");
  CheckKeys(cl, "cluster", ConfigKeysUnder("cluster"));
  c.cluster.name = GetString(cl, "cluster", "name", true);
  if (!ValidName(c.cluster.name)) {
    Fail("cluster.name", "must be 1-63 characters of letters, digits, '-', '_' or '.'");
  }
  ParseNodes(cl, &c);
  const int n_nodes = static_cast<int>(c.cluster.nodes.size());
  c.cluster.size = GetInt(cl, "cluster", "size", std::min(3, n_nodes));
  if (c.cluster.size < 1 || c.cluster.size > n_nodes) {
    Fail("cluster.size", absl::StrCat("must be between 1 and the number of nodes (", n_nodes,
                                      "), got ", c.cluster.size));
  }
  ParsePorts(cl, &c);
  ParseTimers(cl, &c);
  ParseNode(root["node"], &c);
  ParseEtcd(root["etcd"], &c);
  ParseRunner(root["runner"], &c);
  // A static pod runs the image's etcd: the host needs none.
  if (c.runner.kind == "process") {
    CheckBinary("etcd.binary", c.etcd.binary);
    for (const auto& [version, binary] : c.etcd.versions) {
      CheckBinary(absl::StrCat("etcd.versions.", version), binary);
    }
  }
  if (c.etcd.etcdutl.empty() && ::access("/usr/bin/etcdutl", X_OK) == 0) {
    c.etcd.etcdutl = "/usr/bin/etcdutl";
  }
  ParseBackup(root["backup"], &c);
  ParseTls(root["tls"], &c);
  ParseAuth(root["auth"], &c);
  ParseAdopt(cl["adopt"], &c);
  // The adopted members are reached with another identity (cluster.adopt's files, or none),
  // which would be no etcd user: with auth on, the agents would be locked out of them.
  if (c.auth.mode == "on" && c.cluster.adopt.enabled()) {
    Fail("auth.mode",
         "on cannot be combined with cluster.adopt; turn it on once the adoption is "
         "done and cluster.adopt is removed");
  }
  CheckDataDir("node.data_dir", c.node.data_dir);
  return c;
}

}  // namespace

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text, const std::string& source) {
  try {
    YAML::Node root = YAML::Load(yaml_text);
    Config c = Parse(root);
    c.source = source;
    return c;
  } catch (const ConfigError& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.key, ": ", e.problem));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": line ", e.mark.line + 1, ": invalid YAML: ", e.msg));
  }
}

absl::StatusOr<BackupConfig> BackupStoreFromUrl(const std::string& url) {
  YAML::Node b;
  b["store"] = url;
  // The AWS SDKs' variables for an S3-compatible endpoint (MinIO, Ceph), which wants
  // path-style addressing.
  const std::string endpoint = EnvOr("AWS_ENDPOINT_URL_S3", EnvOr("AWS_ENDPOINT_URL", ""));
  if (!endpoint.empty()) {
    b["s3"]["endpoint"] = endpoint;
    b["s3"]["path_style"] = "true";
  }
  // The AWS CLI's variable for an https endpoint behind a private CA: a PEM bundle.
  if (const std::string bundle = EnvOr("AWS_CA_BUNDLE", ""); !bundle.empty()) {
    if (auto pem = ReadFile(bundle); !pem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--backup-store: AWS_CA_BUNDLE: ", pem.status().message()));
    }
    b["s3"]["ca_file"] = bundle;
  }
  Config c;
  WithoutHostChecks without;
  try {
    ParseBackup(b, &c);
  } catch (const ConfigError& e) {
    std::string problem = absl::StrCat(e.key, ": ", e.problem);
    for (const char* key : {"backup.s3.access_key_id/secret_access_key, ", "backup.store: "}) {
      if (size_t at = problem.find(key); at != std::string::npos) problem.erase(at, strlen(key));
    }
    return absl::InvalidArgumentError(absl::StrCat("--backup-store: ", problem));
  }
  if (c.backup.store.empty()) return absl::InvalidArgumentError("--backup-store: is empty");
  return c.backup;
}

absl::StatusOr<Config> LoadClientConfig(const std::string& path) {
  WithoutHostChecks without;
  return LoadConfig(path);
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read config: ", text.status().message()));
  }
  auto config = ParseConfig(*text, path);
  if (!config.ok()) return config;
  // A secret in a file others can read is a leaked secret: refuse before using it.
  struct stat st;
  if (!config->backup.s3.secret_access_key.empty() &&
      text->find("secret_access_key") != std::string::npos && ::stat(path.c_str(), &st) == 0 &&
      (st.st_mode & 007) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: backup.s3.secret_access_key: the file holds an S3 secret and is readable by others "
        "(mode %04o); chmod 640 or 600 it, or give the secret in AWS_SECRET_ACCESS_KEY",
        path, st.st_mode & 07777));
  }
  return config;
}

}  // namespace steward
