// stewardctl restore-backup: the operator's restore, to a backup (and its deltas up to a
// point in time), recorded as a restore intent the agents carry out, followed until the cluster
// is healthy again. Declared in ctl/snapshot_cmd.h, since restore-backup --from-file ends here.
#include <ctime>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/delta.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "control/env.h"
#include "control/records.h"
#include "ctl/common.h"
#include "ctl/progress.h"
#include "ctl/snapshot_cmd.h"
#include "ctl/status.h"
#include "etcd/version.h"
#include "restore/settle.h"

namespace steward {

// Follows restore `id` until the cluster is healthy again, printing each step as it is seen:
// the orders, each node's restore (and its error, if one fails), the settling, the end.
namespace {

int WaitForRestore(const Config& config, BackupStore& store, const EtcdClient::Options& o,
                   const std::string& id, const std::string& backup, int wait_seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(wait_seconds);
  auto step = [&](const std::string& what) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
    for (const auto& [node, st] :
         AgentStates(config, o.credentials, std::chrono::milliseconds(1000))) {
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

}  // namespace

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
      return absl::InvalidArgumentError(
          absl::StrCat("--to-time: '", text,
                       "' is neither UTC time like 2026-11-27T08:40:00Z nor Unix seconds"));
    }
    secs = static_cast<int64_t>(timegm(&tm));
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (secs > now + 300) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--to-time: ", text, " is in the future; omit it to restore everything stored"));
  }
  return secs * 1000;
}

namespace {

// The newest complete backup at or before the point (never an imported file, nor one a
// restore found damaged: the agents never choose those either); "" with the error printed.
std::string ChooseBackup(BackupStore& store, const Config& config, const PointInTime& pit) {
  auto listed = ListBackups(store, config.cluster.name);
  if (!listed.ok()) {
    std::cerr << "stewardctl: " << listed.status().message() << "\n";
    return "";
  }
  std::vector<BackupMeta> complete;
  for (const auto& b : *listed) {
    if (b.meta && b.meta->imported_from.empty() && b.damaged.empty()) complete.push_back(*b.meta);
  }
  auto choice = ChooseRestoreBase(store, complete, pit.to_revision, pit.to_unix_ms);
  if (!choice.ok()) {
    std::cerr << "stewardctl: " << choice.status().message() << "\n";
    return "";
  }
  return complete[choice->first].name;
}

// Backup `name`'s meta.json, once nothing refuses a restore of it (an adoption, a damaged
// mark, a restore under way, a destroyed cluster); nullopt with the reason printed.
std::optional<BackupMeta> RestorableBackup(BackupStore& store, const Config& config,
                                           const std::string& name) {
  if (config.cluster.adopt.enabled()) {
    // The agents restore only their own nodes: the members no agent manages would go on
    // running the old cluster beside the restored one.
    std::cerr << "stewardctl: refusing to restore while cluster.adopt is set: the members no "
                 "agent manages would keep running the old cluster next to the restored one. "
                 "Retire them (retire-unmanaged) or stop them, remove cluster.adopt from every "
                 "config, then restore.\n";
    return std::nullopt;
  }
  auto text = store.Get(MetaKey(config.cluster.name, name));
  if (!text.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << text.status().message() << "\n";
    return std::nullopt;
  }
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << meta.status().message() << "\n";
    return std::nullopt;
  }
  if (auto mark = store.Get(DamagedMarkKey(config.cluster.name, name)); mark.ok()) {
    // Every node walks the DB before it stops etcd and would refuse it: say so now.
    auto j = nlohmann::json::parse(*mark, nullptr, false);
    std::cerr << "stewardctl: refusing to restore backup " << name << ": a restore found its DB "
              << "damaged (" << (j.is_object() ? j.value("reason", "") : std::string("?"))
              << "). Nothing was changed. Name an older backup (list-backups), or none to let "
              << "stewardctl choose.\n";
    return std::nullopt;
  }
  if (RestoreMayBeUnderWay(store, config.cluster.name)) return std::nullopt;
  if (DestroyedRefuses(store, config.cluster.name)) return std::nullopt;
  return *meta;
}

// Where the restore of `meta` stops: the deltas after it, each read and checked, up to the
// point asked for; nullopt (printed) when this backup cannot give that point.
std::optional<RestorePoint> PointFor(BackupStore& store, const std::string& name,
                                     const BackupMeta& meta, const PointInTime& pit) {
  RestorePoint point;
  point.revision = meta.revision;
  if (pit.to_revision != 0 && (meta.revision_max == 0 || meta.revision_max > pit.to_revision)) {
    std::cerr << "stewardctl: refusing to restore: backup " << name << " may hold changes after "
              << "revision " << pit.to_revision << " (its snapshot reaches revision "
              << (meta.revision_max == 0 ? std::string("unknown")
                                         : std::to_string(meta.revision_max))
              << "); name an older backup, or none to let stewardctl choose. Nothing was "
              << "changed.\n";
    return std::nullopt;
  }
  if (pit.to_unix_ms != 0 && meta.unix_time * 1000 > pit.to_unix_ms) {
    std::cerr << "stewardctl: refusing to restore: backup " << name << " was taken at "
              << UtcTime(meta.unix_time) << ", after the time asked for; name an older backup, "
              << "or none. Nothing was changed.\n";
    return std::nullopt;
  }
  if (pit.deltas) {
    auto found = FindRestorePoint(store, meta, pit.to_revision, pit.to_unix_ms);
    if (!found.ok()) {
      std::cerr << "stewardctl: reading the deltas of backup " << name << ": "
                << found.status().message() << "\n";
      return std::nullopt;
    }
    point = *found;
    if (pit.to_revision != 0 && point.revision < pit.to_revision) {
      // Asked for a later point than the chain proves: never restore less than asked for.
      auto chain = ListDeltaChain(store, meta);
      const bool chain_ends_early =
          !point.stopped.empty() || !chain.ok() || chain->end_revision < pit.to_revision;
      if (chain_ends_early) {
        std::cerr << "stewardctl: refusing to restore: the deltas of backup " << name
                  << " reach revision " << point.revision << ", not " << pit.to_revision
                  << (point.stopped.empty() ? "" : " (" + point.stopped + ")")
                  << ". Nothing was changed.\n";
        return std::nullopt;
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
  return point;
}

// The operator's yes, unless --yes was given.
bool ConfirmRestore(bool yes, const Config& config, const std::string& name, const BackupMeta& meta,
                    const RestorePoint& point) {
  if (yes) return true;
  std::cout << "This stops every etcd member of cluster " << config.cluster.name
            << " and replaces all of its data with backup " << name << " (revision "
            << meta.revision << ", taken " << UtcTime(meta.unix_time) << ")" << DescribePoint(point)
            << ". Writes since then are lost (a fresh backup is taken first).\n";
  if (Confirmed()) return true;
  std::cout << "not restoring\n";
  return false;
}

// etcd does not support downgrades: a backup from a newer minor version than a member runs
// is refused before anything is stopped. (Each node checks again before it restores.)
bool NoDowngrade(EtcdClient& client, const Config& config, const std::string& name,
                 const BackupMeta& meta) {
  if (auto from = ParseVersion(meta.etcd_version)) {
    for (const std::string& url : config.ClusterClientUrls()) {
      auto st = client.Status(url, std::chrono::milliseconds(2000));
      auto to = st.ok() ? ParseVersion(st->version) : std::nullopt;
      if (to && ((*from)[0] > (*to)[0] || ((*from)[0] == (*to)[0] && (*from)[1] > (*to)[1]))) {
        std::cerr << "stewardctl: refusing to restore: backup " << name << " was taken from etcd "
                  << meta.etcd_version << ", and the member at " << url << " runs " << st->version
                  << ", an older version (etcd does not support downgrades); "
                  << "upgrade the cluster first (configure-cluster --etcd-version)\n";
        return false;
      }
    }
  }
  return true;
}

// A fresh backup of the current cluster before it is replaced (no retention: it must not
// prune the very backup being restored): the backup, or why it failed when --force allows
// that; nullopt (printed) when it failed and the writes since `name` would be lost.
std::optional<absl::StatusOr<BackupMeta>> SafetyBackup(EtcdClient& client, BackupStore& store,
                                                       const Config& config, bool force) {
  absl::StatusOr<BackupMeta> fresh = absl::UnavailableError("no healthy member");
  if (auto source = PickBackupSource(client); source.ok()) {
    Progress progress = Progress::ToStderr("safety backup of " + source->member, 0);
    fresh = TakeBackup(client, *source, store, config.cluster.name, "stewardctl",
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
    return std::nullopt;
  } else {
    std::cerr << "warning: --force: no fresh backup before the restore ("
              << fresh.status().message() << ")\n";
  }
  return fresh;
}

// What the intent asks for: the backup, how far its deltas go, past which revision, and
// whether the revision can be raised (this config, and every agent that answers, must say so).
IntentRequest RequestFor(const Config& config, const EtcdClient::Options& o,
                         const std::string& name, const RestorePoint& point,
                         const absl::StatusOr<BackupMeta>& fresh) {
  IntentRequest request;
  request.backup = name;
  request.requested_by = "stewardctl";
  request.delta_to = point.deltas > 0 ? point.revision : 0;
  // Past every revision the current cluster served (the fresh backup's, if it was taken).
  if (fresh.ok()) request.served = fresh->revision;
  if (config.etcd.etcdutl.empty() && !config.etcd.restore_in_place) {
    request.no_bump = "neither etcd.etcdutl is set nor etcd.restore_in_place on here";
  }
  for (const auto& [node, st] :
       AgentStates(config, o.credentials, std::chrono::milliseconds(2000))) {
    if (!st.can_bump_revision() && request.no_bump.empty()) {
      request.no_bump = absl::StrCat("node ", node,
                                     " can raise no revision (neither "
                                     "etcd.etcdutl nor etcd.restore_in_place)");
    }
  }
  if (!request.no_bump.empty()) {
    std::cerr << "warning: the restored revision is not raised: " << request.no_bump << "\n";
  }
  request.now_unix = Clock::Real()->UnixSeconds();
  request.nonce = [&config] { return RealControlEnv(config, nullptr).nonce(); };
  return request;
}

}  // namespace

int RunRestoreBackup(const Common& c, const std::string& name_arg, bool yes, bool force,
                     int wait_seconds, PointInTime pit) {
  WithStore w = OpenFromConfig(c, "restore-backup");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  std::string name = name_arg;
  if (name.empty()) {
    pit.deltas = true;  // the newest backup at or before the point, and its deltas after it
    name = ChooseBackup(*w.store, config, pit);
    if (name.empty()) return 1;
  }
  const std::optional<BackupMeta> meta = RestorableBackup(*w.store, config, name);
  if (!meta) return 1;
  const std::optional<RestorePoint> point = PointFor(*w.store, name, *meta, pit);
  if (!point || !ConfirmRestore(yes, config, name, *meta, *point)) return 1;
  Progress verifying = Progress::ToStderr("verifying backup " + name, meta->compressed_size);
  VerifyOptions verify;
  verify.progress = verifying.Callback();
  absl::Status verified = VerifyBackup(*w.store, config.cluster.name, *meta, verify);
  verifying.Done(verified.ok());
  if (!verified.ok()) {
    std::cerr << "stewardctl: refusing to restore: " << verified.message() << "\n";
    return 1;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.ClusterClientUrls(), o);
  if (!NoDowngrade(client, config, name, *meta)) return 1;
  const auto fresh = SafetyBackup(client, *w.store, config, force);
  if (!fresh) return 1;
  const IntentRequest request = RequestFor(config, o, name, *point, *fresh);
  auto prepared = PrepareRestoreIntent(*w.store, config, request);
  if (!prepared.ok()) {
    std::cerr << "stewardctl: " << prepared.status().message() << "\n";
    return 1;
  }
  const RestoreIntent& intent = *prepared;
  if (intent.delta_to > 0) {
    std::cerr << "restoring backup " << name << DescribePoint(*point) << "\n";
  }
  if (absl::Status s = WriteRestoreIntent(*w.store, config.cluster.name, intent); !s.ok()) {
    std::cerr << "stewardctl: recording the restore: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "restore " << intent.id << " requested; the agents carry it out\n";
  return WaitForRestore(config, *w.store, o, intent.id, name, wait_seconds);
}

}  // namespace steward
