#include "ctl/ctl.h"

#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "backup/delta.h"
#include "backup/drill.h"
#include "backup/layout.h"
#include "backup/open.h"
#include "backup/pipeline.h"
#include "backup/scheduler.h"
#include "common/duration.h"
#include "config/config.h"
#include "control/destroy.h"
#include "control/history.h"
#include "control/records.h"
#include "ctl/access_cmd.h"
#include "ctl/backup_cmd.h"
#include "ctl/check_disk_cmd.h"
#include "ctl/common.h"
#include "ctl/dashboard.h"
#include "ctl/destroy_cmd.h"
#include "ctl/maintenance_cmd.h"
#include "ctl/pki_check_cmd.h"
#include "ctl/pki_cmd.h"
#include "ctl/progress.h"
#include "ctl/recover_cmd.h"
#include "ctl/restart_cmd.h"
#include "ctl/retire.h"
#include "ctl/retire_cmd.h"
#include "ctl/rotate_ca_cmd.h"
#include "ctl/snapshot_cmd.h"
#include "ctl/space_cmd.h"
#include "ctl/status.h"
#include "ctl/verify_cmd.h"
#include "etcd/advisories.h"
#include "etcd/client.h"
#include "etcd/keys.h"
#include "etcd/version.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "pki/node_certs.h"
#include "reconcile/plan.h"
#include "reconcile/reconciler.h"
#include "reconcile/restart_roll.h"

namespace steward {
namespace {

// The restart roll asked last (reconcile/restart_roll.h) and the nodes it has left, as their
// agents say: {"id", "reason", "nodes", "left"}; null if there is none or it cannot be read.
nlohmann::json RollState(EtcdClient& client, const Config& config,
                         const std::map<std::string, peer::NodeState>& states) {
  auto text = client.Get(RestartKey(config.cluster.name));
  if (!text.ok() || !text->has_value()) return nullptr;
  auto roll = RestartRollFromJson(**text);
  if (!roll.ok()) return nullptr;
  std::vector<std::string> left;
  for (const auto& n : roll->nodes) {
    auto it = states.find(n);
    if (it == states.end() || (it->second.has_data() && it->second.restarted_for() != roll->id)) {
      left.push_back(n);
    }
  }
  return {{"id", roll->id}, {"reason", roll->reason}, {"nodes", roll->nodes}, {"left", left}};
}

// Now, for the ages DescribeStewardState prints.

int RunStatus(const Common& c) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(endpoints, o);
  ClusterView view = CollectStatus(client, o.timeout, nodes);
  nlohmann::json steward = nlohmann::json::object();
  if (!c.config_path.empty() && view.reachable) {
    if (auto config = LoadClientConfig(c.config_path); config.ok()) {
      // Without a quorum a linearizable read waits out its deadline: read what a member holds.
      steward = ReadStewardState(client, *config, /*local=*/!view.quorum);
    }
  }
  // No etcd answers: a destroyed cluster says so (the store's mark), rather than only "down".
  std::string destroyed;
  if (!c.config_path.empty() && !view.reachable) {
    auto config = LoadClientConfig(c.config_path);
    if (config.ok() && !config->backup.store.empty()) {
      if (auto store = OpenStore(config->backup, /*tolerate_unreadable_keys=*/true); store.ok()) {
        if (auto mark = ReadDestroyMark(**store, config->cluster.name);
            mark.ok() && mark->has_value()) {
          destroyed = DescribeDestroyMark(config->cluster.name, **mark);
        }
      }
    }
  }
  // Asked here, not by the status page (which polls): each probe is a failed login in etcd's log.
  std::optional<bool> auth;
  if (view.reachable && view.quorum) {  // (Authenticate is a proposal: it needs the quorum)
    if (auto on = client.AuthEnabled(); on.ok()) auth = *on;
  }
  // A CA rotation under way (stewardctl pki rotate-ca): each node's phase, as its agent says.
  std::map<std::string, std::string> rotation;
  // Flags the config changed since a member's etcd started (they wait for its restart), and
  // the restart roll asked last (stewardctl restart).
  std::map<std::string, std::vector<std::string>> pending;
  nlohmann::json roll;
  if (!c.config_path.empty()) {
    if (auto config = LoadClientConfig(c.config_path); config.ok()) {
      const auto states = AgentStates(*config, o.credentials, std::chrono::milliseconds(1000));
      for (const auto& [node, st] : states) {
        if (!st.ca_rotation().empty()) rotation[node] = st.ca_rotation();
        if (!st.pending_restart().empty()) {
          pending[node].assign(st.pending_restart().begin(), st.pending_restart().end());
        }
      }
      roll = RollState(client, *config, states);
    }
  }
  if (c.output == "json") {
    nlohmann::json j = StatusToJson(view);
    j["steward"] = steward;
    if (!rotation.empty()) j["ca_rotation"] = rotation;
    j["pending_restart"] = pending;
    if (!roll.is_null()) j["restart_roll"] = roll;
    if (auth) j["auth_enabled"] = *auth;
    if (!destroyed.empty()) j["destroyed"] = destroyed;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << RenderStatusTable(view);
    if (!steward.empty()) std::cout << DescribeStewardState(steward, UnixNow());
    if (auth) {
      std::cout << (*auth ? "auth:           on: applications see only what their etcd user may "
                            "(stewardctl access list)\n"
                          : "auth:           off: any certificate of the CA reads and writes every "
                            "key (auth.mode: on, docs/clients.md)\n");
    }
    if (!destroyed.empty()) std::cout << destroyed << "\n";
    if (!rotation.empty()) {
      std::vector<std::string> parts;
      for (const auto& [node, phase] : rotation) parts.push_back(absl::StrCat(node, ": ", phase));
      std::cout << "CA rotation:    " << absl::StrJoin(parts, ", ")
                << " (stewardctl pki rotate-ca goes on; phase 3 = only the new CA trusted)\n";
    }
    for (const auto& [node, flags] : pending) {
      std::cout << "pending restart: " << node << ": " << absl::StrJoin(flags, " ")
                << " (the config changed them since its etcd started; stewardctl restart "
                   "--pending rolls them out)\n";
    }
    if (!roll.is_null() && !roll["left"].empty()) {
      std::vector<std::string> left = roll["left"].get<std::vector<std::string>>();
      std::cout << "restart roll:   " << roll["id"].get<std::string>() << ": " << left.size()
                << " of " << roll["nodes"].size() << " left (" << absl::StrJoin(left, ", ")
                << "): " << roll["reason"].get<std::string>() << "\n";
    }
  }
  return view.healthy ? 0 : 1;
}

int RunConfigureCluster(const Common& c, int size, const std::string& version, bool untested,
                        bool force) {
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: configure-cluster needs --config FILE (any node's)\n";
    return 2;
  }
  if (size == 0 && version.empty()) {
    std::cerr << "stewardctl: configure-cluster needs --size N or --etcd-version V\n";
    return 2;
  }
  auto config = LoadClientConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return 2;
  }
  const int nodes = static_cast<int>(config->cluster.nodes.size());
  if (size != 0 && (size < 1 || size > nodes)) {
    std::cerr << "stewardctl: --size must be between 1 and the number of nodes (" << nodes
              << "), got " << size << "\n";
    return 2;
  }
  if (!version.empty() && !config->etcd.versions.count(version)) {
    std::cerr << "stewardctl: --etcd-version " << version << " has no binary in etcd.versions (";
    bool first = true;
    for (const auto& [v, b] : config->etcd.versions) {
      std::cerr << (first ? "" : ", ") << v;
      first = false;
    }
    std::cerr << (first ? "none" : "") << ")\n";
    return 2;
  }
  if (!version.empty() && UntestedEtcd(version)) {
    if (!untested) {
      std::cerr << "stewardctl: refusing to roll to etcd " << version << ": etcd 3.6 and later "
                << "are untested with etcd-steward (Debian ships none). docs/etcd-3.6.md says "
                << "what changes (restores only through etcdutl, meta/storageVersion, removed "
                << "flags; 3.5.32 or later first) and what is not done yet. Nothing was "
                << "changed; add --untested to roll to it anyway.\n";
      return 2;
    }
    std::cerr << "warning: etcd " << version << " is untested with etcd-steward (--untested); "
              << "see docs/etcd-3.6.md\n";
  }
  if (!version.empty()) {
    // The advisory table (etcd/advisories.h): a version that breaks data or membership is
    // refused before anything is stored; the others are said.
    if (const EtcdAdvisory* a = RollRefusal(version); a != nullptr && !force) {
      std::cerr << "stewardctl: refusing to roll to etcd " << version << ": " << AdvisoryLine(*a)
                << " Nothing was changed; add --force to roll to it anyway.\n";
      return 2;
    }
    for (const EtcdAdvisory* a : AdvisoriesFor(version)) {
      std::cerr << "warning: etcd " << version << ": " << AdvisoryLine(*a)
                << (a->effect == AdvisoryEffect::kRefuseRoll ? " (--force)" : "") << "\n";
    }
  }
  if (size % 2 == 0 && size != 0) {
    std::cerr << "warning: an even size tolerates no more failures than size " << size - 1
              << " and needs a larger quorum (" << size / 2 + 1 << ")\n";
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  nlohmann::json spec = {{"size", config->cluster.size}};
  if (auto stored = client.Get(SpecKey(*config)); stored.ok() && stored->has_value()) {
    auto j = nlohmann::json::parse(**stored, nullptr, false);
    if (!j.is_discarded() && j.is_object()) spec = j;
  } else if (!stored.ok()) {
    std::cerr << "stewardctl: reading the spec: " << stored.status().message() << "\n";
    return 1;
  }
  const int previous = spec.value("size", config->cluster.size);
  const std::string previous_version = spec.value("version", std::string());
  if (size != 0) spec["size"] = size;
  if (!version.empty()) spec["version"] = version;
  if (absl::Status s = client.Put(SpecKey(*config), spec.dump()); !s.ok()) {
    std::cerr << "stewardctl: storing the spec: " << s.message() << "\n";
    return 1;
  }
  // The leader looks at the spec on its next pass: a settled one passes only every
  // cluster.idle_interval, so ask it to look now (best effort).
  if (auto leader = client.Get(LeaderKey(*config)); leader.ok() && leader->has_value()) {
    for (const NodeSpec& n : config->cluster.nodes) {
      if (n.name != **leader) continue;
      PeerClient agent(config->AgentAddress(n), o.credentials);
      if (absl::Status s = agent.Nudge("stewardctl", std::chrono::milliseconds(2000)); !s.ok()) {
        std::cerr << "note: the leader " << n.name << " did not answer (" << s.message()
                  << "); it sees the change on its next pass\n";
      }
    }
  }
  if (size != 0) {
    std::cout << "desired size: " << size << " (was " << previous
              << "); the leader adds or removes one member at a time\n";
  }
  if (!version.empty()) {
    std::cout << "desired etcd version: " << version << " (was "
              << (previous_version.empty() ? "unset" : previous_version)
              << "); the leader takes a backup, then switches one member at a time, followers "
                 "first, each once the cluster is healthy (stewardctl status shows the mix)\n";
  }
  return 0;
}

// The config and its backup store, or an exit status.

int RunBackup(const Common& c) {
  WithStore w = OpenFromConfig(c, "backup");
  if (w.rc != 0) return w.rc;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(w.config->ClusterClientUrls(), o);
  Progress progress = Progress::ToStderr("backup", 0);
  auto meta = BackupAndPrune(*w.config, *w.store, client, "stewardctl", progress.Callback());
  progress.Done(meta.ok());
  if (!meta.ok()) {
    std::cerr << "stewardctl: backup failed: " << meta.status().message() << "\n";
    return 1;
  }
  std::cerr << "backup of member " << meta->member << " at revision " << meta->revision << ": "
            << HumanBytes(static_cast<int64_t>(meta->db_size)) << " -> "
            << HumanBytes(static_cast<int64_t>(meta->compressed_size)) << " in "
            << w.store->Describe()
            << (o.low_memory_snapshots ? " (read with a low-memory stream)" : "") << "\n";
  // `status` shows it as the last backup at once (the leader's scheduler publishes only its own).
  nlohmann::json published = {{"store", w.store->Describe()},
                              {"last_success", meta->name},
                              {"last_success_at", meta->unix_time},
                              {"encryption_key_id", w.store->EncryptionKeyId()},
                              {"taken_by", "stewardctl"}};
  if (absl::Status s = client.Put(BackupStatusKey(*w.config), published.dump()); !s.ok()) {
    std::cerr << "warning: the backup is stored, but status does not show it yet: " << s.message()
              << "\n";
  }
  std::cout << meta->name << "\n";
  return 0;
}

// list-backups -o json: every backup with its meta, drill, damage mark and delta chain.
void PrintBackupsJson(const std::vector<ListedBackup>& listed,
                      const std::map<std::string, DeltaChain>& chains, int64_t now) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& b : listed) {
    if (b.meta) {
      nlohmann::json m = MetaToJson(*b.meta);
      m["complete"] = true;
      m["time_in_future"] = BackupTimeInFuture(*b.meta, now);
      if (!b.damaged.empty()) m["damaged"] = b.damaged;
      if (std::string r = DrillRefutes(b.verified_json); !r.empty()) {
        m["not_restored_automatically"] = r;
      }
      if (auto v = nlohmann::json::parse(b.verified_json, nullptr, false); v.is_object()) {
        m["verified"] = v;
      }
      if (auto it = chains.find(b.name); it != chains.end()) {
        const DeltaChain& ch = it->second;
        m["deltas"] = {{"count", ch.deltas.size()},
                       {"to_revision", ch.end_revision},
                       {"last_unix_ms", ch.deltas.empty() ? 0 : ch.deltas.back().last_unix_ms},
                       {"stopped", ch.stopped}};
      }
      j.push_back(m);
    } else {
      j.push_back({{"name", b.name}, {"complete", false}, {"error", b.error}});
    }
  }
  std::cout << j.dump(2) << "\n";
}

// list-backups as a table, then the newest point a restore reaches and what is odd.
int PrintBackupsTable(const std::vector<ListedBackup>& listed,
                      const std::map<std::string, DeltaChain>& chains, int64_t now,
                      const std::string& store) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "TIME (UTC)", "GEN", "REVISION", "SIZE",
                                                 "COMPRESSED", "ETCD", "FROM", "DELTAS", "VERIFIED",
                                                 "NOTE"}};
  std::string newest_point;
  int future = 0;
  for (const auto& b : listed) {
    if (b.meta) {
      const BackupMeta& m = *b.meta;
      std::string note;
      if (BackupTimeInFuture(m, now)) {
        note = absl::StrCat("TIME IN FUTURE (+", m.unix_time - now, "s)");
        ++future;
      }
      if (!m.imported_from.empty()) {
        note += absl::StrCat(note.empty() ? "" : "; ", "imported from ", m.imported_from);
      }
      if (!m.encryption_key_id.empty()) {
        note += absl::StrCat(note.empty() ? "" : "; ", "encrypted (key ", m.encryption_key_id, ")");
      }
      if (!b.damaged.empty()) {
        note += absl::StrCat(note.empty() ? "" : "; ", "DAMAGED, never restored: ", b.damaged);
      }
      const std::string refuted = DrillRefutes(b.verified_json);
      if (!refuted.empty()) {
        note += absl::StrCat(note.empty() ? "" : "; ", "not restored automatically: ", refuted);
      }
      const bool restorable = b.damaged.empty() && refuted.empty();
      std::string deltas = "-";
      if (auto it = chains.find(m.name); it != chains.end() && !it->second.deltas.empty()) {
        const DeltaChain& ch = it->second;
        deltas = absl::StrCat(ch.deltas.size(), " to rev ", ch.end_revision, " (",
                              UtcTime(ch.deltas.back().last_unix_ms / 1000), ")");
        if (!ch.stopped.empty()) {
          note += absl::StrCat(note.empty() ? "" : "; ", "deltas stop: ", ch.stopped);
        }
        if (newest_point.empty() && restorable) {
          newest_point = absl::StrCat("revision ", ch.end_revision, ", received ",
                                      UtcTime(ch.deltas.back().last_unix_ms / 1000), " (backup ",
                                      m.name, " + ", ch.deltas.size(), " delta(s))");
        }
      }
      if (newest_point.empty() && restorable) {
        newest_point = absl::StrCat("revision ", m.revision, ", taken ", UtcTime(m.unix_time),
                                    " (backup ", m.name, ")");
      }
      rows.push_back({m.name, UtcTime(m.unix_time), std::to_string(m.generation),
                      std::to_string(m.revision), HumanBytes(static_cast<int64_t>(m.db_size)),
                      HumanBytes(static_cast<int64_t>(m.compressed_size)), m.etcd_version, m.member,
                      deltas, b.verified_json.empty() ? "-" : DescribeDrill(b.verified_json),
                      note});
    } else {
      rows.push_back({b.name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "(" + b.error + ")"});
    }
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
  std::cout << "\n"
            << listed.size() << " backup(s) in " << store
            << ", newest first by generation and revision (not by time)\n";
  if (!newest_point.empty()) std::cout << "newest restorable point: " << newest_point << "\n";
  if (future > 0) {
    std::cout << "warning: " << future << " backup(s) are dated in the future: the clock of "
              << "whoever took them was ahead. Their order comes from their revision.\n";
  }
  return 0;
}

int RunListBackups(const Common& c) {
  WithStore w = OpenFromConfig(c, "list-backups", /*store_only=*/true);
  if (w.rc != 0) return w.rc;
  auto listed = ListBackups(*w.store, w.config->cluster.name);
  if (!listed.ok()) {
    std::cerr << "stewardctl: " << listed.status().message() << "\n";
    return 1;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // Each backup's delta chain, as the deltas' metas say (the objects are checked on restore).
  std::map<std::string, DeltaChain> chains;
  for (const auto& b : *listed) {
    if (!b.meta) continue;
    auto chain = ListDeltaChain(*w.store, *b.meta);
    if (chain.ok()) chains[b.name] = *std::move(chain);
  }
  if (c.output == "json") {
    PrintBackupsJson(*listed, chains, now);
    return 0;
  }
  return PrintBackupsTable(*listed, chains, now, w.store->Describe());
}

}  // namespace

namespace {

// `stewardctl history`: the event history (control/history.h), oldest first.
int RunHistory(const Common& c, const std::string& since, int limit) {
  int rc = 0;
  auto config = ConfigFor(c, "history", &rc);
  if (!config) return rc;
  int64_t since_ms = 0;
  if (!since.empty()) {
    auto d = ParseDuration(since);
    if (!d.ok()) {
      std::cerr << "stewardctl: --since: " << d.status().message() << " (e.g. 10m, 2h)\n";
      return 2;
    }
    since_ms = UnixNow() * 1000 - d->count();
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  auto events = ReadHistory(client, EventsPrefix(*config), since_ms, static_cast<size_t>(limit));
  if (!events.ok()) {
    std::cerr << "stewardctl: reading the history: " << events.status().message() << "\n";
    return 1;
  }
  if (c.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Event& e : *events) j.push_back(EventToJson(e));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-20s %-5s %-6s %-14s %-10s %s\n", "TIME (UTC)", "NODE", "TERM",
                               "ACTION", "RESULT", "REASON");
  for (const Event& e : *events) {
    const absl::Time t = absl::FromUnixMillis(e.at_ms);
    std::cout << absl::StrFormat("%-20s %-5s %-6d %-14s %-10s %s\n",
                                 absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::UTCTimeZone()),
                                 e.node, e.term, e.action, e.result.empty() ? "-" : e.result,
                                 e.reason);
  }
  if (events->empty())
    std::cout << "(no events" << (since.empty() ? "" : " in that window") << ")\n";
  return 0;
}

int RunGet(const Common& c) {
  int rc = 0;
  auto config = ConfigFor(c, "get", &rc);
  if (!config) return rc;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  if (auto probe = client.Get(SpecKey(*config)); !probe.ok()) {
    std::cerr << "stewardctl: cannot read the cluster spec: " << probe.status().message() << "\n";
    return 1;
  }
  nlohmann::json j = ReadStewardState(client, *config);
  int size = config->cluster.size;
  std::string source = "config default (cluster.size)";
  if (j.contains("spec")) {
    size = StoredDesiredSize(j, size);
    source = "stored by configure-cluster";
  }
  if (c.output == "json") {
    j["desired_size"] = size;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string version = "none (each node runs etcd.binary, or what a roll switched it to)";
  if (j.contains("spec") && j["spec"].is_object() && j["spec"].contains("version") &&
      j["spec"]["version"].is_string() && !j["spec"]["version"].get<std::string>().empty()) {
    version = j["spec"]["version"].get<std::string>() + " (stored by configure-cluster)";
  }
  std::cout << "cluster:        " << config->cluster.name << "\n"
            << "desired size:   " << size << " (" << source << ")\n"
            << "desired etcd:   " << version << "\n"
            << DescribeStewardState(j, UnixNow());
  return 0;
}

}  // namespace

constexpr char kDefaultConfig[] = "/etc/steward/node.yaml";

namespace {

// The values -o/-w takes.
CLI::Validator Outputs() { return CLI::IsMember({"table", "json", "simple"}); }

// The -o/-w flag of a command that prints the cluster's state.
void AddOutputFlag(CLI::App* sub, Common* common) {
  sub->add_option("-o,-w,--output,--write-out", common->output, "table, json or simple")
      ->check(Outputs());
}

// status, configure-cluster, get, history.
void AddClusterCommands(CLI::App& app, Common* common, Commands* commands) {
  CLI::App* status = app.add_subcommand("status", "show the cluster at a glance");
  AddCommonFlags(status, common, false);
  AddOutputFlag(status, common);
  commands->push_back({status, [common] { return RunStatus(*common); }});

  struct Configure {
    int size = 0;
    std::string etcd_version;
    bool untested = false;
    bool force = false;
  };
  auto o = std::make_shared<Configure>();
  CLI::App* configure = app.add_subcommand(
      "configure-cluster", "set the desired cluster size or etcd version (a rolling upgrade)");
  AddCommonFlags(configure, common, false);
  configure->add_option("--size", o->size, "desired number of voting members");
  configure->add_option("--etcd-version", o->etcd_version,
                        "desired etcd version (one of etcd.versions): members switch one at a "
                        "time, followers first, one minor version per round");
  configure->add_flag("--untested", o->untested,
                      "roll to a release this project has never run (etcd 3.6 and later)");
  configure->add_flag("--force", o->force,
                      "roll to a version whose advisory breaks data or membership "
                      "(docs/etcd-versions.md)");
  commands->push_back({configure, [common, o] {
                         return RunConfigureCluster(*common, o->size, o->etcd_version, o->untested,
                                                    o->force);
                       }});

  CLI::App* get = app.add_subcommand("get", "show the desired spec, the leader and what it does");
  AddCommonFlags(get, common, false);
  AddOutputFlag(get, common);
  commands->push_back({get, [common] { return RunGet(*common); }});

  struct History {
    std::string since;
    int limit = 1000;
  };
  auto h = std::make_shared<History>();
  CLI::App* history = app.add_subcommand(
      "history", "the leader's decisions and the orders nodes carried out, oldest first");
  AddCommonFlags(history, common, false);
  AddOutputFlag(history, common);
  history->add_option("--since", h->since, "only events of the last DURATION (e.g. 10m, 2h)");
  history->add_option("--limit", h->limit, "at most this many (the newest)")
      ->check(CLI::Range(1, 100000));
  commands->push_back({history, [common, h] { return RunHistory(*common, h->since, h->limit); }});
}

// backup, list-backups, restore-backup, retire-unmanaged.
void AddBackupRestoreCommands(CLI::App& app, Common* common, Commands* commands) {
  CLI::App* backup = app.add_subcommand("backup", "take a backup now; prints its name");
  AddCommonFlags(backup, common, false);
  commands->push_back({backup, [common] { return RunBackup(*common); }});
  CLI::App* list = app.add_subcommand("list-backups", "list the backups in the backup store");
  AddCommonFlags(list, common, false);
  AddOutputFlag(list, common);
  commands->push_back({list, [common] { return RunListBackups(*common); }});

  struct Restore {
    std::string name;
    bool yes = false, force = false, latest = false;
    int wait_seconds = 300;
    int64_t to_revision = 0;
    std::string to_time;
  };
  auto r = std::make_shared<Restore>();
  CLI::App* restore = app.add_subcommand(
      "restore-backup", "stop every member and restore the whole cluster from a backup");
  AddCommonFlags(restore, common, false);
  restore->add_option("name", r->name, "the backup's name (see list-backups)");
  // --latest, --to-revision and --to-time are read back through get_option
  // (ctl/snapshot_cmd.cc), which extends this command.
  restore->add_flag("--latest", r->latest,
                    "instead of a name: the newest backup and every delta backup stored after "
                    "it (the newest restorable point)");
  restore->add_option("--to-revision", r->to_revision,
                      "replay the backup's deltas up to this revision (refused if they do not "
                      "reach it)");
  restore->add_option("--to-time", r->to_time,
                      "replay the deltas received up to this UTC time (2026-11-27T08:40:00Z or "
                      "Unix seconds)");
  restore->add_flag("--yes", r->yes, "do not ask for confirmation");
  restore->add_flag("--force", r->force,
                    "restore even when the safety backup of the current cluster fails");
  restore->add_option("--wait", r->wait_seconds, "seconds to wait for the cluster to be back");
  commands->push_back({restore, [common, r] {
                         return RunRestoreBackup(*common, r->name, r->yes, r->force,
                                                 r->wait_seconds);
                       }});

  struct Retire {
    bool yes = false, force = false;
  };
  auto t = std::make_shared<Retire>();
  CLI::App* retire = app.add_subcommand(
      "retire-unmanaged",
      "after adopting a cluster (cluster.adopt): remove the members no agent manages, one at a "
      "time, keeping quorum (a backup first)");
  AddCommonFlags(retire, common, false);
  retire->add_flag("--yes", t->yes, "do not ask for confirmation");
  retire->add_flag("--force", t->force, "go on when the backup before the first removal fails");
  commands->push_back(
      {retire, [common, t] { return RunRetireUnmanaged(*common, t->yes, t->force); }});
}

// pki init, pki issue (here), and pki check-expiration, pki rotate-ca (`files`: files of their
// own).
void AddPkiCommands(CLI::App& app, Common* common, Commands* files, Commands* commands) {
  struct Pki {
    std::string dir;
    std::string client_name;
    PkiIssueOptions issue;
  };
  auto p = std::make_shared<Pki>();
  CLI::App* pki = app.add_subcommand("pki", "certificates for TLS");
  CLI::App* pki_init = pki->add_subcommand("init", "create a CA and an admin client certificate");
  pki->require_subcommand(1);
  pki_init->add_option("--dir", p->dir, "directory for ca.crt, ca.key, admin.crt, admin.key")
      ->required();
  commands->push_back({pki_init, [p] { return RunPkiInit(p->dir); }});
  CLI::App* pki_issue = pki->add_subcommand(
      "issue", "issue a client certificate from the CA (e.g. a Kubernetes API server's)");
  pki_issue->add_option("--dir", p->dir, "the directory of `pki init` (ca.crt, ca.key)")
      ->required();
  pki_issue
      ->add_option("--client", p->client_name, "the certificate's name (CN; NAME.crt, NAME.key)")
      ->required();
  pki_issue->add_flag("--gateway", p->issue.gateway,
                      "for etcd's HTTP gateway (Patroni): the name in O, no CN; it logs in with a "
                      "password");
  pki_issue->add_flag("--renew", p->issue.renew, "replace the existing NAME.crt and NAME.key");
  commands->push_back(
      {pki_issue,
       [p] { return RunPkiIssueClient(p->dir, p->client_name, p->issue, std::cout, std::cerr); }});
  AddPkiCheckCommands(pki, common, files);
  AddRotateCaCommand(pki, common, files);
}

}  // namespace

int CtlMain(int argc, char** argv) {
  CLI::App app{
      "stewardctl: inspect and operate an etcd-steward cluster\n"
      "exit status: 0 ok, 1 unhealthy or failed, 2 bad usage or config"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stewardctl ") + STEWARD_VERSION);
  Common common;
  // The common flags are taken before the subcommand (as etcdctl takes its global flags) or
  // after it, and from etcdctl's environment variables (a flag wins over a variable).
  app.add_option("--config", common.config_path,
                 "any node's steward config file (default /etc/steward/node.yaml if present)")
      ->envname("STEWARD_CONFIG");
  app.add_option("--endpoints", common.endpoints, "comma-separated etcd client URLs")
      ->envname("ETCDCTL_ENDPOINTS");
  app.add_option("--timeout-ms", common.timeout_ms, "deadline for each call")
      ->check(CLI::Range(100, 600000));
  app.add_option("--cacert", common.cacert, "CA certificate that signed the servers' (TLS)")
      ->envname("ETCDCTL_CACERT");
  app.add_option("--cert", common.cert, "client certificate (TLS)")->envname("ETCDCTL_CERT");
  app.add_option("--key", common.key, "client key (TLS)")->envname("ETCDCTL_KEY");
  app.add_option("--backup-store", common.backup_store,
                 "a backup store's URL for list-backups and backup export without --config "
                 "(file:///dir or s3://bucket/prefix; credentials from AWS_*)");
  app.add_option("--cluster", common.cluster, "the cluster's name, with --backup-store");
  app.add_option("--encryption-key-file", common.encryption_key_files,
                 "with --backup-store: a backup.encryption key file (repeat for old keys)");
  app.add_option("-o,-w,--output,--write-out", common.output, "table, json or simple (table)")
      ->check(Outputs());
  // In the order `stewardctl --help` lists them. The commands in files of their own come first
  // when one runs: one may sit under a command of this file (backup export).
  Commands commands, here;
  AddMaintenanceCommands(app, &common, &commands);
  AddRestartCommand(app, &common, &commands);
  AddCheckDiskCommand(app, &common, &commands);
  AddClusterCommands(app, &common, &here);
  AddBackupRestoreCommands(app, &common, &here);
  AddSnapshotCommands(app, &common, &commands);  // after backup and restore-backup: it extends them
  AddBackupCommands(app, &common, &commands);    // backup delete, backup prune
  AddRecoverCommands(app, &common, &commands);
  AddDestroyCommands(app, &common, &commands);
  AddSpaceCommands(app, &common, &commands);
  AddAccessCommands(app, &common, &commands);
  AddVerifyCommands(app, &common, &commands);
  DashboardOptions dashboard_options;
  CLI::App* dashboard = AddDashboardCommand(app, &dashboard_options);
  AddPkiCommands(app, &common, &commands, &here);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (common.output == "simple") common.output = "table";
  // etcdctl's habit: no flag, no variable, then the usual place.
  if (common.config_path.empty() && common.endpoints.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(kDefaultConfig, ec)) common.config_path = kDefaultConfig;
  }
  if (dashboard_options.config_path.empty() && dashboard_options.agents.empty()) {
    dashboard_options.config_path = common.config_path;
  }
  for (auto [from, to] : {std::pair{&common.cacert, &dashboard_options.cacert},
                          std::pair{&common.cert, &dashboard_options.cert},
                          std::pair{&common.key, &dashboard_options.key}}) {
    if (to->empty()) *to = *from;
  }
  for (const Commands* list : {&commands, &here}) {
    for (const Command& c : *list) {
      if (c.app->parsed()) return c.run();
    }
  }
  if (dashboard->parsed()) return RunDashboard(dashboard_options);
  return 2;
}

}  // namespace steward
