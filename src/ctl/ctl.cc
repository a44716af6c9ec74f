#include "ctl/ctl.h"
#include "ctl/common.h"

#include <ctime>
#include <map>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/duration.h"
#include "reconcile/history.h"
#include "absl/strings/str_split.h"
#include "config/config.h"
#include "ctl/status.h"
#include "etcd/client.h"
#include "nlohmann/json.hpp"
#include "backup/delta.h"
#include "backup/layout.h"
#include "backup/open.h"
#include "backup/drill.h"
#include "backup/pipeline.h"
#include "backup/scheduler.h"
#include "ctl/dashboard.h"
#include "ctl/pki_cmd.h"
#include "ctl/pki_check_cmd.h"
#include "ctl/retire.h"
#include "ctl/maintenance_cmd.h"
#include "ctl/progress.h"
#include "ctl/destroy_cmd.h"
#include "reconcile/destroy.h"
#include "ctl/recover_cmd.h"
#include "ctl/snapshot_cmd.h"
#include "ctl/access_cmd.h"
#include "ctl/space_cmd.h"
#include "ctl/backup_cmd.h"
#include "ctl/verify_cmd.h"
#include "etcd/version.h"
#include "reconcile/plan.h"
#include "ctl/status.h"
#include "peer/client.h"
#include "pki/node_certs.h"
#include "reconcile/reconciler.h"
#include "reconcile/restore.h"
#include <thread>

namespace steward {
namespace {




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
  if (c.output == "json") {
    nlohmann::json j = StatusToJson(view);
    j["steward"] = steward;
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
  }
  return view.healthy ? 0 : 1;
}

int RunConfigureCluster(const Common& c, int size, const std::string& version, bool untested) {
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
            << w.store->Describe() << "\n";
  // `status` shows it as the last backup at once (the leader's scheduler publishes only its own).
  nlohmann::json published = {{"store", w.store->Describe()},
                              {"last_success", meta->name},
                              {"last_success_at", meta->unix_time},
                              {"encryption_key_id", w.store->EncryptionKeyId()},
                              {"taken_by", "stewardctl"}};
  if (absl::Status s = client.Put(BackupStatusKey(*w.config), published.dump()); !s.ok()) {
    std::cerr << "warning: the backup is stored, but status does not show it yet: "
              << s.message() << "\n";
  }
  std::cout << meta->name << "\n";
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
    nlohmann::json j = nlohmann::json::array();
    for (const auto& b : *listed) {
      if (b.meta) {
        nlohmann::json m = MetaToJson(*b.meta);
        m["complete"] = true;
        m["time_in_future"] = BackupTimeInFuture(*b.meta, now);
        if (!b.damaged.empty()) m["damaged"] = b.damaged;
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
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TIME (UTC)", "GEN", "REVISION", "SIZE", "COMPRESSED", "ETCD", "FROM", "DELTAS",
       "VERIFIED", "NOTE"}};
  std::string newest_point;
  int future = 0;
  for (const auto& b : *listed) {
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
      std::string deltas = "-";
      if (auto it = chains.find(m.name); it != chains.end() && !it->second.deltas.empty()) {
        const DeltaChain& ch = it->second;
        deltas = absl::StrCat(ch.deltas.size(), " to rev ", ch.end_revision, " (",
                              UtcTime(ch.deltas.back().last_unix_ms / 1000), ")");
        if (!ch.stopped.empty()) {
          note += absl::StrCat(note.empty() ? "" : "; ", "deltas stop: ", ch.stopped);
        }
        if (newest_point.empty() && b.damaged.empty()) {
          newest_point = absl::StrCat("revision ", ch.end_revision, ", received ",
                                      UtcTime(ch.deltas.back().last_unix_ms / 1000), " (backup ",
                                      m.name, " + ", ch.deltas.size(), " delta(s))");
        }
      }
      if (newest_point.empty() && b.damaged.empty()) {
        newest_point = absl::StrCat("revision ", m.revision, ", taken ", UtcTime(m.unix_time),
                                    " (backup ", m.name, ")");
      }
      rows.push_back({m.name, UtcTime(m.unix_time), std::to_string(m.generation),
                      std::to_string(m.revision), HumanBytes(static_cast<int64_t>(m.db_size)),
                      HumanBytes(static_cast<int64_t>(m.compressed_size)), m.etcd_version,
                      m.member, deltas,
                      b.verified_json.empty() ? "-" : DescribeDrill(b.verified_json), note});
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
  std::cout << "\n" << listed->size() << " backup(s) in " << w.store->Describe()
            << ", newest first by generation and revision (not by time)\n";
  if (!newest_point.empty()) std::cout << "newest restorable point: " << newest_point << "\n";
  if (future > 0) {
    std::cout << "warning: " << future << " backup(s) are dated in the future: the clock of "
              << "whoever took them was ahead. Their order comes from their revision.\n";
  }
  return 0;
}

}  // namespace

// Declared in ctl/snapshot_cmd.h: restore-backup --from-file ends here, with the imported name.
// Follows restore `id` until the cluster is healthy again, printing each step as it is seen:
// the orders, each node's restore (and its error, if one fails), the settling, the end.
int WaitForRestore(const Config& config, BackupStore& store, const EtcdClient::Options& o,
                   const std::string& id, const std::string& backup, int wait_seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(wait_seconds);
  auto step = [&](const std::string& what) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << absl::StrFormat("[%6.1fs] ", t) << what << "\n";
  };
  bool ordered = false, settled = false, done = false;
  std::map<std::string, std::string> node_step;  // what was said last about each node
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto now = ReadRestoreIntent(store, config.cluster.name);
    if (!now.ok() || !now->has_value() || (*now)->id != id) continue;
    const RestoreIntent& r = **now;
    if (r.cancelled) {
      step(absl::StrCat("restore ", id, " was cancelled: ", r.cancel_reason));
      return 1;
    }
    if (r.ordered && !ordered) step("restore orders go out to every node");
    ordered = ordered || r.ordered;
    for (const auto& [node, st] : AgentStates(config, o.credentials, std::chrono::milliseconds(1000))) {
      std::string said;
      if (st.restore_id() == id) {
        said = st.fenced() ? "restored, fenced (serves only the agents until the backup's leases "
                             "are revoked)"
                           : "restored, serves clients";
      } else if (!st.restore_error().empty()) {
        said = "restore failed: " + st.restore_error();
      }
      if (!said.empty() && node_step[node] != said) {
        node_step[node] = said;
        step(absl::StrCat(node, ": ", said));
      }
    }
    if (r.settled && !settled) step("settled: the backup's leases are revoked; unfencing");
    settled = settled || r.settled;
    if (r.done && !done) step("every member restored");
    done = done || r.done;
    if (!done) continue;
    // A new client each round: a channel that failed while every etcd was down backs off its
    // reconnects for longer than the restore takes.
    EtcdClient client(config.ClusterClientUrls(), o);
    ClusterView v = CollectStatus(client, o.timeout);
    if (v.healthy) {
      step(absl::StrCat("healthy with ", v.members.size(), " member(s)"));
      std::cout << "restored backup " << backup << "; the cluster is healthy with "
                << v.members.size() << " member(s)\n";
      return 0;
    }
  }
  std::cerr << "stewardctl: the restore has not finished within " << wait_seconds
            << "s; see `stewardctl status` and the agents' logs\n";
  return 1;
}

absl::StatusOr<int64_t> ParsePointTime(const std::string& text) {
  int64_t secs = 0;
  if (absl::SimpleAtoi(text, &secs)) {
    // Milliseconds (list-backups -o json's) would read as a date tens of millennia away.
    if (secs <= 0 || secs > 100'000'000'000) {
      return absl::InvalidArgumentError(
          absl::StrCat("--to-time: ", text, " is not Unix seconds (milliseconds? divide by 1000)"));
    }
  } else {
    std::tm tm{};
    const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == nullptr || (std::string(end) != "Z" && std::string(end) != "+00:00")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--to-time: '", text, "' is neither UTC time like 2026-11-27T08:40:00Z nor Unix seconds"));
    }
    secs = static_cast<int64_t>(timegm(&tm));
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (secs > now + 300) {
    return absl::InvalidArgumentError(
        absl::StrCat("--to-time: ", text, " is in the future; omit it to restore everything stored"));
  }
  return secs * 1000;
}

int RunRestoreBackup(const Common& c, const std::string& name_arg, bool yes, bool force,
                     int wait_seconds, PointInTime pit) {
  WithStore w = OpenFromConfig(c, "restore-backup");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  std::string name = name_arg;
  if (name.empty()) {
    // The newest complete backup at or before the point, and its deltas after it.
    pit.deltas = true;
    auto listed = ListBackups(*w.store, config.cluster.name);
    if (!listed.ok()) {
      std::cerr << "stewardctl: " << listed.status().message() << "\n";
      return 1;
    }
    std::vector<BackupMeta> complete;
    for (const auto& b : *listed) {
      // An imported file is restored by naming it, never chosen (as the agents never do).
      // Nor one a restore found damaged.
      if (b.meta && b.meta->imported_from.empty() && b.damaged.empty()) {
        complete.push_back(*b.meta);
      }
    }
    auto choice = ChooseRestoreBase(*w.store, complete, pit.to_revision, pit.to_unix_ms);
    if (!choice.ok()) {
      std::cerr << "stewardctl: " << choice.status().message() << "\n";
      return 1;
    }
    name = complete[choice->first].name;
  }
  if (config.cluster.adopt.enabled()) {
    // The agents restore only their own nodes: the members no agent manages would go on
    // running the old cluster beside the restored one.
    std::cerr << "stewardctl: refusing to restore while cluster.adopt is set: the members no "
                 "agent manages would keep running the old cluster next to the restored one. "
                 "Retire them (retire-unmanaged) or stop them, remove cluster.adopt from every "
                 "config, then restore.\n";
    return 1;
  }
  auto text = w.store->Get(MetaKey(config.cluster.name, name));
  if (!text.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << text.status().message() << "\n";
    return 1;
  }
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << meta.status().message() << "\n";
    return 1;
  }
  if (auto mark = w.store->Get(DamagedMarkKey(config.cluster.name, name)); mark.ok()) {
    // Every node walks the DB before it stops etcd and would refuse it: say so now.
    auto j = nlohmann::json::parse(*mark, nullptr, false);
    std::cerr << "stewardctl: refusing to restore backup " << name << ": a restore found its DB "
              << "damaged (" << (j.is_object() ? j.value("reason", "") : std::string("?"))
              << "). Nothing was changed. Name an older backup (list-backups), or none to let "
              << "stewardctl choose.\n";
    return 1;
  }
  if (RestoreMayBeUnderWay(*w.store, config.cluster.name)) return 1;
  if (DestroyedRefuses(*w.store, config.cluster.name)) return 1;
  // The deltas after the backup, each read and checked, up to the point asked for.
  RestorePoint point;
  point.revision = meta->revision;
  if (pit.to_revision != 0 && (meta->revision_max == 0 || meta->revision_max > pit.to_revision)) {
    std::cerr << "stewardctl: refusing to restore: backup " << name << " may hold changes after "
              << "revision " << pit.to_revision << " (its snapshot reaches revision "
              << (meta->revision_max == 0 ? std::string("unknown") : std::to_string(meta->revision_max))
              << "); name an older backup, or none to let stewardctl choose. Nothing was "
              << "changed.\n";
    return 1;
  }
  if (pit.to_unix_ms != 0 && meta->unix_time * 1000 > pit.to_unix_ms) {
    std::cerr << "stewardctl: refusing to restore: backup " << name << " was taken at "
              << UtcTime(meta->unix_time) << ", after the time asked for; name an older backup, "
              << "or none. Nothing was changed.\n";
    return 1;
  }
  if (pit.deltas) {
    auto found = FindRestorePoint(*w.store, *meta, pit.to_revision, pit.to_unix_ms);
    if (!found.ok()) {
      std::cerr << "stewardctl: reading the deltas of backup " << name << ": "
                << found.status().message() << "\n";
      return 1;
    }
    point = *found;
    if (pit.to_revision != 0 && point.revision < pit.to_revision) {
      // Asked for a later point than the chain proves: never restore less than asked for.
      auto chain = ListDeltaChain(*w.store, *meta);
      const bool chain_ends_early =
          !point.stopped.empty() || !chain.ok() || chain->end_revision < pit.to_revision;
      if (chain_ends_early) {
        std::cerr << "stewardctl: refusing to restore: the deltas of backup " << name
                  << " reach revision " << point.revision << ", not " << pit.to_revision
                  << (point.stopped.empty() ? "" : " (" + point.stopped + ")")
                  << ". Nothing was changed.\n";
        return 1;
      }
    }
    if (!point.stopped.empty()) {
      std::cerr << "warning: the deltas of backup " << name << " stop at revision "
                << point.revision << ": " << point.stopped << "\n";
    }
    if (pit.to_unix_ms != 0 && point.unix_ms < pit.to_unix_ms - 60000) {
      // Quiet time and a writer that was down look alike in the chain: say how far it goes.
      std::cerr << "warning: the newest change stored up to that time was received at "
                << (point.unix_ms == 0 ? std::string("(none after the backup)")
                                       : UtcTime(point.unix_ms / 1000))
                << "; the restore stops there\n";
    }
  }
  if (!yes) {
    std::cout << "This stops every etcd member of cluster " << config.cluster.name
              << " and replaces all of its data with backup " << name << " (revision "
              << meta->revision << ", taken " << UtcTime(meta->unix_time) << ")"
              << DescribePoint(point)
              << ". Writes since then are lost (a fresh backup is taken first).\n";
    if (!Confirmed()) {
      std::cout << "not restoring\n";
      return 1;
    }
  }
  Progress verifying = Progress::ToStderr("verifying backup " + name, meta->compressed_size);
  VerifyOptions verify;
  verify.progress = verifying.Callback();
  absl::Status verified = VerifyBackup(*w.store, config.cluster.name, *meta, verify);
  verifying.Done(verified.ok());
  if (absl::Status s = verified; !s.ok()) {
    std::cerr << "stewardctl: refusing to restore: " << s.message() << "\n";
    return 1;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.ClusterClientUrls(), o);
  // etcd does not support downgrades: a backup from a newer minor version than a member runs
  // is refused before anything is stopped. (Each node checks again before it restores.)
  if (auto from = ParseVersion(meta->etcd_version)) {
    for (const std::string& url : config.ClusterClientUrls()) {
      auto st = client.Status(url, std::chrono::milliseconds(2000));
      auto to = st.ok() ? ParseVersion(st->version) : std::nullopt;
      if (to && ((*from)[0] > (*to)[0] || ((*from)[0] == (*to)[0] && (*from)[1] > (*to)[1]))) {
        std::cerr << "stewardctl: refusing to restore: backup " << name << " was taken from etcd "
                  << meta->etcd_version << ", and the member at " << url << " runs "
                  << st->version << ", an older version (etcd does not support downgrades); "
                  << "upgrade the cluster first (configure-cluster --etcd-version)\n";
        return 1;
      }
    }
  }
  // No retention here: it must not prune the very backup being restored.
  absl::StatusOr<BackupMeta> fresh = absl::UnavailableError("no healthy member");
  if (auto source = PickBackupSource(client); source.ok()) {
    Progress progress = Progress::ToStderr("safety backup of " + source->member, 0);
    fresh = TakeBackup(client, *source, *w.store, config.cluster.name, "stewardctl",
                       std::chrono::minutes(30), progress.Callback());
    progress.Done(fresh.ok());
  } else {
    fresh = source.status();
  }
  if (fresh.ok()) {
    std::cerr << "took a fresh backup first: " << fresh->name << "\n";
  } else if (!force) {
    // Without it, the writes since `name` would be gone for good.
    std::cerr << "stewardctl: refusing to restore: the safety backup of the current cluster "
              << "failed (" << fresh.status().message() << "). Nothing was changed. Pass "
              << "--force to restore anyway (for example when every member is lost).\n";
    return 1;
  } else {
    std::cerr << "warning: --force: no fresh backup before the restore ("
              << fresh.status().message() << ")\n";
  }
  // Raise the revision only where the agents can (etcd.etcdutl or the in-place restore): this
  // config, and every agent that answers, must say so.
  IntentRequest request;
  request.backup = name;
  request.requested_by = "stewardctl";
  request.delta_to = point.deltas > 0 ? point.revision : 0;
  // Past every revision the current cluster served (the fresh backup's, if it was taken).
  if (fresh.ok()) request.served = fresh->revision;
  if (config.etcd.etcdutl.empty() && !config.etcd.restore_in_place) {
    request.no_bump = "neither etcd.etcdutl is set nor etcd.restore_in_place on here";
  }
  for (const auto& [node, st] : AgentStates(config, o.credentials, std::chrono::milliseconds(2000))) {
    if (!st.can_bump_revision() && request.no_bump.empty()) {
      request.no_bump = absl::StrCat("node ", node, " can raise no revision (neither "
                                     "etcd.etcdutl nor etcd.restore_in_place)");
    }
  }
  if (!request.no_bump.empty()) {
    std::cerr << "warning: the restored revision is not raised: " << request.no_bump << "\n";
  }
  request.now_unix = Clock::Real()->UnixSeconds();
  request.nonce = [&config] { return RealControlEnv(config, nullptr).nonce(); };
  auto prepared = PrepareRestoreIntent(*w.store, config, request);
  if (!prepared.ok()) {
    std::cerr << "stewardctl: " << prepared.status().message() << "\n";
    return 1;
  }
  const RestoreIntent& intent = *prepared;
  if (intent.delta_to > 0) {
    std::cerr << "restoring backup " << name << DescribePoint(point) << "\n";
  }
  if (absl::Status s = WriteRestoreIntent(*w.store, config.cluster.name, intent); !s.ok()) {
    std::cerr << "stewardctl: recording the restore: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "restore " << intent.id << " requested; the agents carry it out\n";
  return WaitForRestore(config, *w.store, o, intent.id, name, wait_seconds);
}

namespace {

// The stored spec's size (configure-cluster), else `fallback`; a malformed spec counts as none.
int DesiredSize(const nlohmann::json& steward, int fallback) {
  if (!steward.contains("spec") || !steward["spec"].is_object()) return fallback;
  const auto& spec = steward["spec"];
  if (!spec.contains("size") || !spec["size"].is_number_integer()) return fallback;
  return spec["size"].get<int>();
}

// The members no agent manages, as the operator must shut them down.
std::string DescribeMember(const MemberInfo& m) {
  std::string out = absl::StrFormat("  %s (%x): peer %s", m.name.empty() ? "(unnamed)" : m.name,
                                    m.id, m.peer_urls.empty() ? "?" : m.peer_urls.front());
  if (!m.client_urls.empty()) out += ", client " + m.client_urls.front();
  return out + "\n";
}

int RunRetireUnmanaged(const Common& c, bool yes, bool force) {
  WithStore w = OpenFromConfig(c, "retire-unmanaged");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  if (!config.cluster.adopt.enabled()) {
    // Without it, a member on no configured node is one the leader handles itself.
    std::cerr << "stewardctl: retire-unmanaged is for a cluster being adopted: cluster.adopt "
                 "is not set in " << c.config_path << "\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.ClusterClientUrls(), o);
  std::map<std::string, std::string> managed;  // peer URL -> node name
  for (const auto& n : config.cluster.nodes) managed[config.PeerUrl(n)] = n.name;
  const int size = DesiredSize(ReadStewardState(client, config), config.cluster.size);
  // Decisions rest on a linearizable member list: a removed or cut-off old member still
  // answers a plain one from its own state.
  ClusterView view = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
  RetireStep first = NextRetirement(view, managed, size);
  if (first.kind == RetireStep::kDone) {
    std::cout << "nothing to retire: every member is on a configured node\n";
    return 0;
  }
  if (first.kind == RetireStep::kRefuse) {
    std::cerr << "stewardctl: not retiring anything: " << first.reason << "\n";
    return 1;
  }
  std::vector<MemberInfo> unmanaged;
  for (const auto& r : view.members) {
    bool mine = false;
    for (const auto& u : r.member.peer_urls) {
      auto it = managed.find(u);
      mine = mine || (it != managed.end() && (r.member.name.empty() || r.member.name == it->second));
    }
    if (!mine) unmanaged.push_back(r.member);
  }
  std::cout << "These members are on no configured node; they are removed from the cluster one "
               "at a time, each removal checked against quorum (a backup is taken first):\n";
  for (const auto& m : unmanaged) std::cout << DescribeMember(m);
  if (!yes) {
    std::cout << "Their etcd processes are not stopped by us. ";
    if (!Confirmed()) {
      std::cout << "not retiring\n";
      return 1;
    }
  }
  if (auto meta = BackupAndPrune(config, *w.store, client, "stewardctl"); meta.ok()) {
    std::cerr << "took a backup first: " << meta->name << "\n";
  } else if (!force) {
    std::cerr << "stewardctl: not retiring anything: the backup failed ("
              << meta.status().message() << "); pass --force to go on without one\n";
    return 1;
  } else {
    std::cerr << "warning: --force: no backup before retiring (" << meta.status().message()
              << ")\n";
  }
  std::vector<MemberInfo> retired;
  bool done = false;
  for (size_t round = 0; round <= unmanaged.size() && !done; ++round) {
    // Every step is decided again on a fresh view: the quorum check is never older than it.
    ClusterView now = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
    RetireStep step = NextRetirement(now, managed, size);
    if (step.kind == RetireStep::kDone) {
      done = true;
      break;
    }
    if (step.kind == RetireStep::kRefuse) {
      std::cerr << "stewardctl: stopped after " << retired.size() << " removal(s): "
                << step.reason << "\n";
      return 1;
    }
    // Only what the operator confirmed: a member that appeared since is not removed.
    bool confirmed = false;
    for (const auto& m : unmanaged) confirmed = confirmed || m.id == step.member_id;
    if (!confirmed) {
      std::cerr << "stewardctl: stopped after " << retired.size() << " removal(s): member "
                << step.name << " joined after the list above was confirmed; run the command "
                << "again\n";
      return 1;
    }
    std::cerr << "removing " << step.name << ": " << step.reason << "\n";
    if (absl::Status s = client.MemberRemove(step.member_id); !s.ok()) {
      // A timed-out removal may still have been applied: the next view shows which.
      std::cerr << "warning: removing " << step.name << ": " << s.message() << "\n";
    }
    // Bounded: the member list no longer has it and a quorum serves a linearizable read.
    bool settled = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!settled && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto members = client.LinearizableMemberList();
      if (!members.ok()) continue;
      bool gone = true;
      for (const auto& m : *members) gone = gone && m.id != step.member_id;
      settled = gone && client.Get(SpecKey(config)).ok();
    }
    if (!settled) {
      std::cerr << "stewardctl: after removing " << step.name << " the cluster has not served a "
                << "linearizable read within 30s; stopping (see stewardctl status)\n";
      return 1;
    }
    ClusterView after = CollectStatus(client, o.timeout);
    std::cout << "removed " << step.name << "; quorum kept: " << after.healthy_voters
              << " of " << after.voters << " voting members healthy\n";
    for (const auto& m : unmanaged) {
      if (m.id == step.member_id) retired.push_back(m);
    }
  }
  if (!done) {
    std::cerr << "stewardctl: unmanaged members remain after " << retired.size()
              << " removal(s); see stewardctl status\n";
    return 1;
  }
  std::cout << "retired " << retired.size() << " unmanaged member(s). Shut their etcd "
            << "processes down yourself (etcd-steward never stops them), then remove "
               "cluster.adopt from every node's config:\n";
  for (const auto& m : retired) std::cout << DescribeMember(m);
  return 0;
}

// `stewardctl history`: the event history (reconcile/history.h), oldest first.
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
  if (events->empty()) std::cout << "(no events" << (since.empty() ? "" : " in that window") << ")\n";
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
    size = DesiredSize(j, size);
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

int CtlMain(int argc, char** argv) {
  CLI::App app{"stewardctl: inspect and operate an etcd-steward cluster\n"
               "exit status: 0 ok, 1 unhealthy or failed, 2 bad usage or config"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stewardctl ") + STEWARD_VERSION);
  Common common;
  // The common flags are taken before the subcommand (as etcdctl takes its global flags) or
  // after it, and from etcdctl's environment variables (a flag wins over a variable).
  const auto outputs = CLI::IsMember({"table", "json", "simple"});
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
      ->check(outputs);
  auto add_common = [&common](CLI::App* sub) { AddCommonFlags(sub, &common, false); };
  Commands commands;  // the commands in files of their own
  AddMaintenanceCommands(app, &common, &commands);
  CLI::App* status = app.add_subcommand("status", "show the cluster at a glance");
  add_common(status);
  status->add_option("-o,-w,--output,--write-out", common.output, "table, json or simple")
      ->check(outputs);
  int size = 0;
  std::string etcd_version;
  CLI::App* configure = app.add_subcommand(
      "configure-cluster", "set the desired cluster size or etcd version (a rolling upgrade)");
  add_common(configure);
  configure->add_option("--size", size, "desired number of voting members");
  configure->add_option("--etcd-version", etcd_version,
                        "desired etcd version (one of etcd.versions): members switch one at a "
                        "time, followers first, one minor version per round");
  bool untested = false;
  configure->add_flag("--untested", untested,
                      "roll to a release this project has never run (etcd 3.6 and later)");
  CLI::App* get = app.add_subcommand("get", "show the desired spec, the leader and what it does");
  add_common(get);
  get->add_option("-o,-w,--output,--write-out", common.output, "table, json or simple")
      ->check(outputs);
  std::string since;
  int history_limit = 1000;
  CLI::App* history = app.add_subcommand(
      "history", "the leader's decisions and the orders nodes carried out, oldest first");
  add_common(history);
  history->add_option("-o,-w,--output,--write-out", common.output, "table, json or simple")
      ->check(outputs);
  history->add_option("--since", since, "only events of the last DURATION (e.g. 10m, 2h)");
  history->add_option("--limit", history_limit, "at most this many (the newest)")
      ->check(CLI::Range(1, 100000));
  CLI::App* backup = app.add_subcommand("backup", "take a backup now; prints its name");
  add_common(backup);
  CLI::App* list = app.add_subcommand("list-backups", "list the backups in the backup store");
  add_common(list);
  list->add_option("-o,-w,--output,--write-out", common.output, "table, json or simple")
      ->check(outputs);
  std::string restore_name;
  bool yes = false;
  bool force = false;
  int wait_seconds = 300;
  CLI::App* restore = app.add_subcommand(
      "restore-backup", "stop every member and restore the whole cluster from a backup");
  add_common(restore);
  restore->add_option("name", restore_name, "the backup's name (see list-backups)");
  bool restore_latest = false;  // read back through get_option (ctl/snapshot_cmd.cc)
  restore->add_flag("--latest", restore_latest,
                    "instead of a name: the newest backup and every delta backup stored after "
                    "it (the newest restorable point)");
  int64_t to_revision = 0;
  std::string to_time;
  restore->add_option("--to-revision", to_revision,
                      "replay the backup's deltas up to this revision (refused if they do not "
                      "reach it)");
  restore->add_option("--to-time", to_time,
                      "replay the deltas received up to this UTC time (2026-11-27T08:40:00Z or "
                      "Unix seconds)");
  restore->add_flag("--yes", yes, "do not ask for confirmation");
  restore->add_flag("--force", force,
                    "restore even when the safety backup of the current cluster fails");
  restore->add_option("--wait", wait_seconds, "seconds to wait for the cluster to be back");
  CLI::App* retire = app.add_subcommand(
      "retire-unmanaged",
      "after adopting a cluster (cluster.adopt): remove the members no agent manages, one at a "
      "time, keeping quorum (a backup first)");
  add_common(retire);
  retire->add_flag("--yes", yes, "do not ask for confirmation");
  retire->add_flag("--force", force, "go on when the backup before the first removal fails");
  AddSnapshotCommands(app, &common, &commands);  // after backup and restore-backup: it extends them
  AddBackupCommands(app, &common, &commands);    // backup delete, backup prune
  AddRecoverCommands(app, &common, &commands);
  AddDestroyCommands(app, &common, &commands);
  AddSpaceCommands(app, &common, &commands);
  AddAccessCommands(app, &common, &commands);
  AddVerifyCommands(app, &common, &commands);
  DashboardOptions dashboard_options;
  CLI::App* dashboard = AddDashboardCommand(app, &dashboard_options);
  std::string pki_dir;
  CLI::App* pki = app.add_subcommand("pki", "certificates for TLS");
  CLI::App* pki_init = pki->add_subcommand("init", "create a CA and an admin client certificate");
  pki->require_subcommand(1);
  pki_init->add_option("--dir", pki_dir, "directory for ca.crt, ca.key, admin.crt, admin.key")
      ->required();
  std::string client_name;
  CLI::App* pki_issue = pki->add_subcommand(
      "issue", "issue a client certificate from the CA (e.g. a Kubernetes API server's)");
  pki_issue->add_option("--dir", pki_dir, "the directory of `pki init` (ca.crt, ca.key)")
      ->required();
  pki_issue->add_option("--client", client_name, "the certificate's name (CN; NAME.crt, NAME.key)")
      ->required();
  PkiIssueOptions issue_options;
  pki_issue->add_flag("--gateway", issue_options.gateway,
                      "for etcd's HTTP gateway (Patroni): the name in O, no CN; it logs in with a "
                      "password");
  pki_issue->add_flag("--renew", issue_options.renew, "replace the existing NAME.crt and NAME.key");
  AddPkiCheckCommands(pki, &common, &commands);
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
  // First: a command in a file of its own may sit under a built-in one (backup export).
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  if (pki_init->parsed()) return RunPkiInit(pki_dir);
  if (pki_issue->parsed()) return RunPkiIssueClient(pki_dir, client_name, issue_options, std::cout, std::cerr);
  if (status->parsed()) return RunStatus(common);
  if (configure->parsed()) return RunConfigureCluster(common, size, etcd_version, untested);
  if (get->parsed()) return RunGet(common);
  if (history->parsed()) return RunHistory(common, since, history_limit);
  if (backup->parsed()) return RunBackup(common);
  if (list->parsed()) return RunListBackups(common);
  if (restore->parsed()) return RunRestoreBackup(common, restore_name, yes, force, wait_seconds);
  if (retire->parsed()) return RunRetireUnmanaged(common, yes, force);
  if (dashboard->parsed()) return RunDashboard(dashboard_options);
  return 2;
}

}  // namespace steward
