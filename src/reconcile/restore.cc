#include "reconcile/restore.h"

#include "reconcile/reconciler.h"

#include <algorithm>
#include <set>

#include "common/metrics.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backup/layout.h"
#include "etcd/bolt.h"
#include "etcd/keys.h"
#include "etcd/member_id.h"
#include "backup/pipeline.h"
#include "common/rules.h"
#include "common/status.h"
#include "reconcile/destroy.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

absl::StatusOr<std::optional<RestoreIntent>> ReadRestoreIntent(BackupStore& store,
                                                               const std::string& cluster) {
  auto text = store.Get(RestoreIntentKey(cluster));
  if (absl::IsNotFound(text.status())) return std::optional<RestoreIntent>();
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("restore.json is not JSON");
  try {
    RestoreIntent r;
    r.id = j.at("id").get<std::string>();
    r.backup = j.at("backup").get<std::string>();
    r.token = j.at("token").get<std::string>();
    r.requested_by = j.value("requested_by", "");
    r.done = j.value("done", false);
    r.settled = j.value("settled", false);
    r.ordered = j.value("ordered", false);
    r.generation = j.value("generation", int64_t{1});
    r.bump_revision = j.value("bump_revision", int64_t{0});
    r.delta_to = j.value("delta_to", int64_t{0});
    r.cancelled = j.value("cancelled", false);
    r.cancel_reason = j.value("cancel_reason", "");
    r.supersedes = j.value("supersedes", "");
    r.created_at = j.value("created_at", int64_t{0});
    for (const auto& m : j.at("initial_cluster")) {
      r.initial_cluster.emplace_back(m.at("name").get<std::string>(), m.at("peer_url").get<std::string>());
    }
    return std::optional<RestoreIntent>(r);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("restore.json: ", e.what()));
  }
}

absl::Status WriteRestoreIntent(BackupStore& store, const std::string& cluster,
                                const RestoreIntent& r) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [name, url] : r.initial_cluster) members.push_back({{"name", name}, {"peer_url", url}});
  nlohmann::json j = {{"id", r.id},         {"backup", r.backup},
                      {"token", r.token},   {"requested_by", r.requested_by},
                      {"generation", r.generation},
                      {"bump_revision", r.bump_revision},
                      {"delta_to", r.delta_to},
                      {"done", r.done},     {"settled", r.settled},
                      {"ordered", r.ordered},
                      {"created_at", r.created_at},
                      {"initial_cluster", members}};
  if (!r.supersedes.empty()) j["supersedes"] = r.supersedes;
  if (r.cancelled) {
    j["cancelled"] = true;
    j["cancel_reason"] = r.cancel_reason;
  }
  return store.Put(RestoreIntentKey(cluster), j.dump(2));
}

absl::StatusOr<int64_t> NextGeneration(BackupStore& store, const std::string& cluster) {
  auto listed = ListBackups(store, cluster);
  if (!listed.ok()) return listed.status();
  int64_t highest = 0;
  for (const auto& b : *listed) {
    if (b.meta) highest = std::max(highest, b.meta->generation);
  }
  return highest + 1;
}

absl::StatusOr<int64_t> ReadHighestRevision(BackupStore& store, const std::string& cluster) {
  auto text = store.Get(RevisionRecordKey(cluster));
  if (absl::IsNotFound(text.status())) return int64_t{0};
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.contains("revision") || !j["revision"].is_number_integer()) {
    return absl::DataLossError(absl::StrCat(RevisionRecordKey(cluster), " is malformed"));
  }
  return j["revision"].get<int64_t>();
}

absl::Status WriteHighestRevision(BackupStore& store, const std::string& cluster,
                                  int64_t revision, int64_t now_unix) {
  nlohmann::json j = {{"revision", revision}, {"updated_at", now_unix}};
  return store.Put(RevisionRecordKey(cluster), j.dump());
}

absl::Status RaiseHighestRevision(BackupStore& store, const std::string& cluster,
                                  int64_t revision, int64_t now_unix) {
  auto stored = ReadHighestRevision(store, cluster);
  if (!stored.ok()) return stored.status();
  if (*stored >= revision) return absl::OkStatus();
  return WriteHighestRevision(store, cluster, revision, now_unix);
}

int64_t RevisionBump(int64_t highest_recorded, int64_t backup_revision) {
  return std::max<int64_t>(0, highest_recorded - backup_revision) + kRevisionBumpMargin;
}

RestoreIntent NewRestoreIntent(const Config& config, const std::string& backup,
                               const std::string& requested_by, int64_t generation,
                               int64_t bump_revision, int64_t created_at, uint32_t nonce) {
  RestoreIntent r;
  r.generation = generation;
  r.bump_revision = bump_revision;
  r.created_at = created_at;
  r.id = absl::StrFormat("%d-%04x", r.created_at, nonce & 0xffff);
  r.backup = backup;
  // A new token: the restored cluster must not be mistaken for the one it replaces.
  r.token = absl::StrCat(config.ClusterToken(), "-r", r.id);
  r.requested_by = requested_by;
  for (int i = 0; i < config.cluster.size; ++i) {
    const NodeSpec& n = config.cluster.nodes[static_cast<size_t>(i)];
    r.initial_cluster.emplace_back(n.name, config.PeerUrl(n));
  }
  return r;
}

absl::StatusOr<std::optional<std::vector<std::string>>> ReadLastVoters(
    BackupStore& store, const std::string& cluster) {
  using Result = std::optional<std::vector<std::string>>;
  auto text = store.Get(MembersRecordKey(cluster));
  if (absl::IsNotFound(text.status())) return Result();
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  try {
    if (j.is_discarded()) throw nlohmann::json::other_error::create(501, "not JSON", nullptr);
    std::vector<std::string> voters = j.at("voters").get<std::vector<std::string>>();
    if (voters.empty()) throw nlohmann::json::other_error::create(501, "no voters", nullptr);
    return Result(std::move(voters));
  } catch (const nlohmann::json::exception& e) {
    // A damaged record is not "no record": the coordinator must not fall back to a guess.
    return absl::DataLossError(absl::StrCat(MembersRecordKey(cluster), ": ", e.what()));
  }
}

absl::Status WriteLastVoters(BackupStore& store, const std::string& cluster,
                             const std::vector<std::string>& voters, int64_t now_unix) {
  nlohmann::json j = {{"voters", voters}, {"updated_at", now_unix}};
  return store.Put(MembersRecordKey(cluster), j.dump(2));
}

absl::StatusOr<bool> ClusterEverExisted(BackupStore& store, const std::string& cluster) {
  auto marker = store.Get(CreatedMarkerKey(cluster));
  if (marker.ok()) return true;
  if (!absl::IsNotFound(marker.status())) return marker.status();
  auto objects = store.List(BackupsPrefix(cluster));
  if (!objects.ok()) return objects.status();
  return !objects->empty();
}

RestoreCoordinator::RestoreCoordinator(const Config& config, BackupStore* store, EtcdApi* etcd,
                                       ControlEnv env)
    : config_(config), store_(store), etcd_(etcd), env_(std::move(env)) {
  for (const auto& n : config_.cluster.nodes) agents_[n.name] = env_.dial_agent(n);
}

void RestoreCoordinator::Note(const std::string& msg) {
  repeats_.Say(msg, [](const std::string& m) { spdlog::info("restore: {}", m); });
}

bool RestoreCoordinator::RestorePending() {
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  // When the store cannot be read, go by what it said last: a store outage must not stop
  // healing, and a restore seen pending stays pending until the store says otherwise.
  if (!intent.ok()) return last_pending_;
  last_pending_ = intent->has_value() && !(*intent)->done && !(*intent)->cancelled;
  return last_pending_;
}

std::optional<std::string> RestoreCoordinator::NewestValidBackup() {
  auto backups = ListBackups(*store_, config_.cluster.name);
  if (!backups.ok()) {
    Note(absl::StrCat("cannot list backups: ", backups.status().message()));
    return std::nullopt;
  }
  for (const auto& b : *backups) {
    if (!b.meta) {
      spdlog::warn("restore: skipping backup {}: {}", b.name, b.error);
      continue;
    }
    if (!b.meta->imported_from.empty()) continue;  // an operator's file, for their command only
    if (!b.damaged.empty()) {
      spdlog::warn("restore: skipping backup {}: {}", b.name, b.damaged);
      continue;
    }
    // The stored bytes against meta.json; every node checks them again as it fetches them,
    // before it touches its data.
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(*store_, config_.cluster.name, *b.meta, opts);
    if (s.ok()) return b.name;
    if (!absl::IsDataLoss(s)) {
      // A store that failed to answer says nothing about the backup: an older one must not
      // win because the newest could not be read this time.
      Note(absl::StrCat("cannot read backup ", b.name, " (", s.message(), "); waiting"));
      return std::nullopt;
    }
    spdlog::error("restore: skipping backup {}: it fails verification: {}", b.name, s.message());
  }
  return std::nullopt;
}

std::map<std::string, peer::NodeState> RestoreCoordinator::States() {
  // Everyone's state, in parallel.
  std::vector<std::string> names;
  std::vector<std::function<absl::StatusOr<peer::NodeState>()>> calls;
  for (auto& [name, client] : agents_) {
    PeerApi* c = client.get();
    names.push_back(name);
    calls.push_back([c] { return c->GetState(milliseconds(1000)); });
  }
  auto results = FanOut(env_.parallel, calls);
  std::map<std::string, peer::NodeState> states;
  for (size_t i = 0; i < names.size(); ++i) {
    if (results[i].ok()) states[names[i]] = *results[i];
  }
  return states;
}

RestoreCoordinator::Observed RestoreCoordinator::Observe() {
  Observed o;
  RestoreView& v = o.view;
  v.self = config_.node.name;
  for (const auto& n : config_.cluster.nodes) v.configured.push_back(n.name);
  v.auto_restore = config_.backup.auto_restore;
  v.adopting = config_.cluster.adopt.enabled();
  o.states = States();
  for (const auto& [name, st] : o.states) {
    v.answered[name] = {st.has_data(), st.etcd_running(), st.restore_id()};
  }
  if (v.answered.empty() || v.answered.begin()->first != v.self) return o;  // not ours
  auto store_error = [&](const absl::Status& s, const char* what) {
    v.store_ok = false;
    if (v.store_error.empty()) v.store_error = absl::StrCat(what, ": ", s.message());
  };
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!intent.ok()) {
    store_error(intent.status(), "the restore intent");
  } else if (intent->has_value() && !(*intent)->done && !(*intent)->cancelled) {
    o.intent = **intent;
    v.pending = RestoreView::Pending{o.intent->id, o.intent->requested_by == "auto", o.intent->ordered};
  }
  v.etcd_answers = etcd_->MemberList().ok();
  auto existed = ClusterEverExisted(*store_, config_.cluster.name);
  if (!existed.ok()) {
    store_error(existed.status(), "the existence check");
  } else {
    v.cluster_existed = *existed;
  }
  auto mark = ReadDestroyMark(*store_, config_.cluster.name);
  if (!mark.ok()) {
    store_error(mark.status(), "the destroy mark");
  } else if (mark->has_value()) {
    v.destroyed = DescribeDestroyMark(config_.cluster.name, **mark);
  }
  auto voters = ReadLastVoters(*store_, config_.cluster.name);
  if (!voters.ok()) {
    store_error(voters.status(), "the membership record");
  } else if (voters->has_value()) {
    v.last_voters = **voters;
  } else {
    // Nothing recorded yet: the cluster still has its initial members.
    for (int i = 0; i < config_.cluster.size; ++i) {
      v.last_voters.push_back(config_.cluster.nodes[static_cast<size_t>(i)].name);
    }
  }
  return o;
}

absl::Status RestoreCoordinator::Sync(RestoreIntent& intent) {
  auto current = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!current.ok()) return Annotate(current.status(), "re-reading the restore intent");
  if (!current->has_value() || (*current)->id != intent.id) {
    return absl::AbortedError(absl::StrCat("restore ", intent.id, " is no longer the intent"));
  }
  const RestoreIntent& now = **current;
  if (now.done || now.cancelled) {
    return absl::AbortedError(absl::StrCat("restore ", intent.id, " was ",
                                           now.done ? "finished" : "cancelled",
                                           " by another coordinator"));
  }
  // What another coordinator recorded stands: these only ever go from false to true.
  intent.ordered = intent.ordered || now.ordered;
  intent.settled = intent.settled || now.settled;
  return absl::OkStatus();
}

namespace {

// A Record() change that raises one of the intent's monotone flags.
std::function<absl::Status(RestoreIntent&)> Set(bool RestoreIntent::*flag) {
  return [flag](RestoreIntent& r) {
    r.*flag = true;
    return absl::OkStatus();
  };
}

}  // namespace

absl::Status RestoreCoordinator::Record(RestoreIntent& intent, const char* what,
                                        const std::function<absl::Status(RestoreIntent&)>& change) {
  // A coordinator that was paused (or slow) must not write its stale copy over what another
  // one recorded since: re-read, merge, then write. (The store has no compare-and-swap; the
  // window left is one read and one write, and the promises fence out older terms' orders.)
  if (absl::Status s = Sync(intent); !s.ok()) return s;
  if (absl::Status s = change(intent); !s.ok()) return s;  // nothing written
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, intent); !s.ok()) {
    return Annotate(s, absl::StrCat("recording that ", what));
  }
  return absl::OkStatus();
}

void RestoreCoordinator::CountRestore(const RestoreIntent& intent, const char* result) {
  const bool automatic = intent.requested_by == "auto";
  Metrics::Global().Add("steward_restores_total", 1,
                        {{"kind", automatic ? "automatic" : "operator"}, {"result", result}});
  if (history_ == nullptr) return;
  Event e;
  e.action = "restore";
  // What it brought back, not only the base: a reader must not think the changes after the
  // full backup were lost when its deltas were replayed.
  e.reason = absl::StrCat(automatic ? "automatic" : "operator's", " restore ", intent.id,
                          " of backup ", intent.backup,
                          intent.delta_to > 0
                              ? absl::StrCat(" + its deltas, to revision ", intent.delta_to)
                              : std::string(),
                          intent.bump_revision > 0
                              ? absl::StrCat(" (revisions raised by ", intent.bump_revision, ")")
                              : std::string());
  e.result = result;
  history_->Append(std::move(e));
}

absl::Status RestoreCoordinator::Cancel(RestoreIntent intent, const std::string& why) {
  // The R6 check runs on the intent as re-read right before the write.
  absl::Status s = Record(intent, "the restore is cancelled", [&why](RestoreIntent& r) {
    if (r.ordered && !RuleOff("R6")) {
      return absl::AbortedError(absl::StrCat("restore ", r.id,
                                             " is not cancelled: its orders went out (R6)"));
    }
    r.cancelled = true;
    r.cancel_reason = why;
    return absl::OkStatus();
  });
  if (s.ok()) {
    spdlog::warn("restore {}: cancelled: {}", intent.id, why);
    CountRestore(intent, "cancelled");
  }
  return s;
}

std::unique_ptr<EtcdApi> RestoreCoordinator::MembersClient(
    const RestoreIntent& intent, std::string (Config::*url)(const NodeSpec&) const) const {
  std::vector<std::string> urls;
  for (const auto& [name, peer_url] : intent.initial_cluster) {
    for (const auto& n : config_.cluster.nodes) {
      if (n.name == name) urls.push_back((config_.*url)(n));
    }
  }
  return env_.dial_etcd(urls, milliseconds(2000));
}

bool RestoreCoordinator::WaitForLeader(EtcdApi& etcd, std::chrono::seconds bound) {
  // Polled often: clients wait for this (fenced), and the restore is timed by its users.
  const auto deadline = env_.clock->Now() + bound;
  while (env_.clock->Now() < deadline) {
    if (env_.stopping && env_.stopping()) return false;
    for (const auto& url : etcd.endpoints()) {
      auto st = etcd.Status(url, milliseconds(500));
      if (st.ok() && st->leader != 0) return true;
    }
    env_.clock->SleepFor(milliseconds(100));
  }
  return false;
}

absl::StatusOr<RestorePoint> RestoreCoordinator::DeltaPointFor(std::string* backup) {
  auto listed = ListBackups(*store_, config_.cluster.name);
  if (!listed.ok()) return listed.status();
  // The chosen backup and the complete ones older than it, as the restore may take them.
  std::vector<BackupMeta> candidates;
  for (const auto& b : *listed) {
    if (!b.meta || !b.meta->imported_from.empty() || !b.damaged.empty()) continue;
    if (candidates.empty() && b.name != *backup) continue;
    candidates.push_back(*b.meta);
  }
  if (candidates.empty()) return absl::NotFoundError(absl::StrCat("backup ", *backup, " is gone"));
  auto choice = ChooseRestoreBase(*store_, candidates);
  if (!choice.ok()) return choice.status();
  auto& [index, point] = *choice;
  if (index != 0) {
    const BackupMeta& older = candidates[index];
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(*store_, config_.cluster.name, older, opts);
    // A store that did not answer says nothing about the backup: wait rather than lose the
    // writes only its chain holds.
    if (!s.ok() && !absl::IsDataLoss(s)) return s;
    if (s.ok()) {
      spdlog::warn("restore: the deltas of backup {} reach revision {}, past those of the newer "
                   "{}: restoring {} with them",
                   older.name, point.revision, *backup, older.name);
      *backup = older.name;
    } else {
      // The older one does not check out: the newest with its own deltas.
      auto own = FindRestorePoint(*store_, candidates[0]);
      if (!own.ok()) return own.status();
      point = *own;
    }
  }
  if (!point.stopped.empty()) {
    spdlog::error("restore: the deltas of backup {} stop at revision {}: {}", *backup,
                  point.revision, point.stopped);
  }
  return point;
}

std::string DescribePoint(const RestorePoint& p) {
  if (p.deltas == 0) return "";
  return absl::StrCat(" + ", p.deltas, " delta(s), to revision ", p.revision,
                      p.stopped.empty() ? "" : absl::StrCat(" (the deltas stop there: ", p.stopped, ")"));
}

namespace {

// Transaction conditions on the fenced cluster's marks.
void RequireAbsent(etcdserverpb::TxnRequest& txn, const std::string& key) {
  auto* c = txn.add_compare();
  c->set_key(key);
  c->set_target(etcdserverpb::Compare::CREATE);
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_create_revision(0);
}
void RequireValue(etcdserverpb::TxnRequest& txn, const std::string& key, const std::string& value) {
  auto* c = txn.add_compare();
  c->set_key(key);
  c->set_target(etcdserverpb::Compare::VALUE);
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_value(value);
}

}  // namespace

absl::Status ReplayDeltas(BackupStore& store, const std::string& cluster, const std::string& backup,
                          int64_t to_revision, EtcdApi& etcd, const std::string& guard,
                          int64_t* replayed, bool* chain_broken) {
  auto text = store.Get(MetaKey(cluster, backup));
  if (!text.ok()) return Annotate(text.status(), "reading the backup's meta.json");
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) return meta.status();
  // etcd takes at most 128 operations (--max-txn-ops) and 1.5 MiB per request: a revision
  // with more goes in several transactions; nobody sees the cluster before it is settled.
  constexpr int kMaxOps = 100;
  constexpr size_t kMaxBytes = 1u << 20;
  return ForEachDeltaRevision(store, *meta, to_revision, [&](const backup::DeltaRevision& r) {
    etcdserverpb::TxnRequest txn;
    size_t bytes = 0;
    // Only while the guard still names this replay: a coordinator that took over wrote its own,
    // and a late transaction of this one must not put an older value over its replay.
    auto guarded = [&] { RequireValue(txn, ReplayGuardKey(cluster), guard); };
    guarded();
    auto send = [&]() -> absl::Status {
      if (txn.success_size() == 0) return absl::OkStatus();
      auto done = etcd.Txn(txn);
      if (!done.ok()) return Annotate(done.status(), absl::StrCat("replaying revision ", r.revision()));
      if (!done->succeeded()) {
        return absl::AbortedError("another coordinator took over replaying the deltas");
      }
      txn.Clear();
      guarded();
      bytes = 0;
      return absl::OkStatus();
    };
    for (const auto& e : r.events()) {
      if (txn.success_size() >= kMaxOps || bytes + e.kv().key().size() + e.kv().value().size() > kMaxBytes) {
        if (absl::Status s = send(); !s.ok()) return s;
      }
      // A key under a lease goes with it: the restore revokes every lease, as for the backup.
      if (e.type() == etcdserverpb::Event::PUT && e.kv().lease() == 0) {
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(e.kv().key());
        put->set_value(e.kv().value());
      } else {
        txn.add_success()->mutable_request_delete_range()->set_key(e.kv().key());
      }
      bytes += e.kv().key().size() + e.kv().value().size();
    }
    if (absl::Status s = send(); !s.ok()) return s;
    ++*replayed;
    return absl::OkStatus();
  }, chain_broken);
}

absl::Status RestoreCoordinator::Settle(const RestoreIntent& intent, EtcdApi& fenced,
                                        bool* deltas_lost) {
  *deltas_lost = false;
  // This very restore's cluster: a coordinator paused past a replacement must not settle (or
  // replay into) the cluster of the restore that replaced it, on the same fence ports. Its
  // members' IDs come from their peer URLs and the restore's token, as etcd derives them.
  {
    auto listed = fenced.MemberList();
    if (!listed.ok()) return Annotate(listed.status(), "listing the restored members");
    std::set<uint64_t> ours;
    for (const auto& [name, url] : intent.initial_cluster) {
      ours.insert(InitialMemberId({url}, intent.token));
    }
    for (const MemberInfo& m : *listed) {
      if (!ours.count(m.id)) {
        return absl::AbortedError(absl::StrCat(
            "the fenced members are not restore ", intent.id, "'s (member ",
            absl::StrFormat("%x", m.id), "): another restore replaced it"));
      }
    }
  }
  std::string my_guard;  // this coordinator's replay mark, if it replayed
  // Settled by another coordinator already (it may have unfenced members, whose clients'
  // leases must not be revoked): nothing to do.
  const std::string settled_key = ReplaySettledKey(config_.cluster.name, intent.id);
  const std::string replaced_key = ReplaySupersededKey(config_.cluster.name, intent.id);
  const std::string guard_key = ReplayGuardKey(config_.cluster.name);
  {
    auto seen = fenced.Get(settled_key);
    if (!seen.ok()) return Annotate(seen.status(), "reading whether the restore is settled");
    if (seen->has_value()) {
      spdlog::info("restore {}: settled by another coordinator", intent.id);
      return absl::OkStatus();
    }
  }
  // A lease in the backup still names the holder of a lock or a leader key at the moment of
  // the backup, and a client that kept its lease ID would keep that lock alive after the
  // restore (Patroni's former primary did). Revoking them deletes those keys: every holder
  // must acquire again, in the restored cluster.
  auto leases = fenced.LeaseLeases();
  if (!leases.ok()) return Annotate(leases.status(), "listing the restored leases");
  if (RuleOff("F1")) leases->clear();  // mutation tests only
  for (int64_t id : *leases) {
    absl::Status s = fenced.LeaseRevoke(id);
    if (!s.ok() && !absl::IsNotFound(s)) {
      return Annotate(s, absl::StrCat("revoking restored lease ", absl::StrFormat("%x", id)));
    }
  }
  if (!leases->empty()) {
    spdlog::info("restore {}: revoked {} lease(s) that came with the backup (their keys are "
                 "deleted)", intent.id, leases->size());
  }
  // The changes stored after the backup, in order. Replaying them again after an interrupted
  // settle leaves the same state: every key they touch ends as its last change says.
  if (intent.delta_to > 0) {
    // This replay's own mark, which every one of its transactions checks (ReplayDeltas);
    // written only while no coordinator has finished settling this restore.
    const std::string guard =
        absl::StrCat(intent.id, "/", config_.node.name, "/", absl::StrFormat("%08x", env_.nonce()));
    etcdserverpb::TxnRequest mark;
    RequireAbsent(mark, settled_key);
    RequireAbsent(mark, replaced_key);  // nobody replays a restore that is being replaced
    auto* put = mark.add_success()->mutable_request_put();
    put->set_key(guard_key);
    put->set_value(guard);
    auto marked = fenced.Txn(mark);
    if (!marked.ok()) return Annotate(marked.status(), "marking the replay of the deltas");
    if (!marked->succeeded()) {
      // A coordinator settled it meanwhile (its replay is complete, and one started now could
      // only write older values over it), or marked it replaced (then the replacement is
      // still due: it may have stopped before recording it).
      auto seen = fenced.Get(settled_key);
      if (!seen.ok()) return Annotate(seen.status(), "reading whether the restore is settled");
      if (seen->has_value()) {
        spdlog::info("restore {}: settled by another coordinator", intent.id);
        return absl::OkStatus();
      }
      if (intent.requested_by == "auto") *deltas_lost = true;
      return absl::AbortedError(absl::StrCat("restore ", intent.id, " is being replaced: its "
                                             "deltas were lost"));
    } else {
      my_guard = guard;
      int64_t replayed = 0;
      bool broken = false;
      if (absl::Status s = ReplayDeltas(*store_, config_.cluster.name, intent.backup,
                                        intent.delta_to, fenced, guard, &replayed, &broken);
          !s.ok()) {
        s = Annotate(s, "replaying the deltas");
        // Every delta was read and checked when the restore was chosen: one lost or damaged
        // since will not come back by waiting. An automatic restore is replaced (the caller's
        // Supersede), but only if this coordinator's mark still holds and nobody settled it:
        // exclusive with the settling below, so a restore that may serve clients is never
        // replaced. The operator's restore waits, and says why.
        if (!broken || intent.requested_by != "auto") return s;
        etcdserverpb::TxnRequest replace;
        RequireValue(replace, guard_key, guard);
        RequireAbsent(replace, settled_key);
        auto* mark = replace.add_success()->mutable_request_put();
        mark->set_key(replaced_key);
        mark->set_value(guard);
        auto marked = fenced.Txn(replace);
        if (!marked.ok()) return Annotate(marked.status(), "marking the restore replaced");
        if (!marked->succeeded()) {
          return absl::AbortedError("another coordinator took over the restore meanwhile");
        }
        *deltas_lost = true;
        return s;
      }
      spdlog::info("restore {}: replayed {} revision(s) of deltas after backup {}, to revision {}",
                   intent.id, replayed, intent.backup, intent.delta_to);
    }
  }
  if (absl::Status s = fenced.Put(EtcdGenerationKey(config_.cluster.name),
                                  absl::StrCat(intent.generation));
      !s.ok()) {
    return Annotate(s, "recording the generation");
  }
  // The leader's report and the backup status came back with the backup: they describe the
  // lost cluster at the time of the backup. Replace them, so status never shows them as now.
  nlohmann::json report = {{"leader", config_.node.name},
                           {"term", 0},
                           {"step", "restored"},
                           {"detail", absl::StrCat("restored from backup ", intent.backup,
                                                   " (restore ", intent.id,
                                                   "); the leader reports once it has looked")},
                           {"at", env_.clock->UnixSeconds()},
                           {"refresh", ReportRefreshSeconds(config_)}};
  if (absl::Status s = fenced.Put(StatusKey(config_), report.dump()); !s.ok()) {
    return Annotate(s, "replacing the restored leader report");
  }
  etcdserverpb::TxnRequest drop;
  // Not if a coordinator marked it replaced (its deltas were lost): then it never settles.
  RequireAbsent(drop, replaced_key);
  // Nor if another coordinator has begun a replay of its own since this one's (it starts from
  // the backup, so the state is not yet the whole chain's): its settle is the one due.
  if (!my_guard.empty()) RequireValue(drop, guard_key, my_guard);
  drop.add_success()->mutable_request_delete_range()->set_key(BackupStatusKey(config_));
  drop.add_success()->mutable_request_delete_range()->set_key(guard_key);
  // No replay of this restore may start after this, and no other coordinator settles it
  // again (revoking the leases of clients it serves by then): the cluster is about to serve.
  auto* settled = drop.add_success()->mutable_request_put();
  settled->set_key(settled_key);
  settled->set_value("settled");
  auto dropped = fenced.Txn(drop);
  if (!dropped.ok()) return Annotate(dropped.status(), "dropping the restored backup status");
  if (!dropped->succeeded()) {
    auto seen = fenced.Get(replaced_key);
    if (seen.ok() && seen->has_value()) {
      // Marked replaced by a coordinator that then could not record the new intent: the
      // replacement is still due.
      if (intent.requested_by == "auto") *deltas_lost = true;
      return absl::AbortedError(absl::StrCat("restore ", intent.id, " is being replaced: its "
                                             "deltas were lost"));
    }
    return absl::AbortedError(absl::StrCat("restore ", intent.id, ": another coordinator "
                                           "replays its deltas now"));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::Supersede(const RestoreIntent& intent, const absl::Status& why,
                                           const std::string& unbumped_backup) {
  // Chosen as Pass() chooses, from what the store holds now (the damaged chain ends earlier).
  Observed o = Observe();
  auto backup = NewestValidBackup();
  if (!backup) return Annotate(why, "and no valid backup is found to restore instead");
  auto point = DeltaPointFor(&*backup);
  if (!point.ok()) return Annotate(point.status(), "choosing the restore that replaces it");
  auto fresh = FreshIntent(o.states, *backup, *point, *backup != unbumped_backup);
  if (!fresh.ok()) return Annotate(fresh.status(), "choosing the restore that replaces it");
  // Its members restored the old one and wait, fenced, for it: the new one carries its orders
  // on (R6), and orders them to restore again.
  fresh->ordered = true;
  fresh->supersedes = intent.id;
  // Still this intent, and not settled by another coordinator meanwhile (then it stands).
  RestoreIntent current = intent;
  if (absl::Status s = Sync(current); !s.ok()) return s;
  if (current.settled) return absl::AbortedError("settled by another coordinator meanwhile");
  spdlog::error("restore {}: {}; nothing has served clients from it, so restore {} of backup "
                "{}{} replaces it",
                intent.id, why.message(), fresh->id, *backup, DescribePoint(*point));
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, *fresh); !s.ok()) {
    return Annotate(s, "recording the restore that replaces it");
  }
  if (history_ != nullptr) {
    history_->Append(Event{0, 0, "", "restore",
                           absl::StrCat("restore ", intent.id, " replaced by ", fresh->id, ": ",
                                        why.message()),
                           "started"});
  }
  // Its orders go out from the next pass (a fresh observation, and no recursion).
  return absl::AbortedError(absl::StrCat("replaced by restore ", fresh->id));
}

absl::StatusOr<RestoreIntent> RestoreCoordinator::FreshIntent(
    const std::map<std::string, peer::NodeState>& states, const std::string& backup,
    const RestorePoint& point, bool bump_wanted) {
  auto generation = NextGeneration(*store_, config_.cluster.name);
  if (!generation.ok()) return Annotate(generation.status(), "listing backups");
  int64_t backup_revision = 0;
  auto bump = BumpFor(backup, &backup_revision);
  if (!bump.ok()) return Annotate(bump.status(), "reading the revision record");
  // All members must restore the same revisions: raise them only if every member that answers
  // can (one that cannot would refuse, and be healed by a join later).
  if (!bump_wanted) {
    spdlog::warn("restore: the restored revision is not raised, so revisions served since the "
                 "backup will be served again");
    *bump = 0;
  }
  for (const auto& [name, st] : states) {
    if (*bump == 0) break;
    if (!st.can_bump_revision()) {
      spdlog::warn("restore: node {} can raise no revision (neither etcd.etcdutl nor "
                   "etcd.restore_in_place): the restored revision is not raised, so revisions "
                   "served since the backup will be served again",
                   name);
      *bump = 0;
      break;
    }
  }
  if (*bump > 0) {
    // The restored cluster starts at the backup's revision + the bump (and its replayed deltas
    // take it to their point + the bump): recorded now, so that a restore after this cluster is
    // lost again, before the leader has recorded what it served, starts past it.
    const int64_t start =
        RestoredStartRevision(backup_revision, point.deltas > 0 ? point.revision : 0, *bump);
    if (absl::Status s = RaiseHighestRevision(*store_, config_.cluster.name, start,
                                              env_.clock->UnixSeconds());
        !s.ok()) {
      return Annotate(s, "recording the restored cluster's revision");
    }
  }
  RestoreIntent fresh = NewRestoreIntent(config_, backup, "auto", *generation, *bump,
                                         env_.clock->UnixSeconds(), env_.nonce());
  fresh.delta_to = point.deltas > 0 ? point.revision : 0;
  return fresh;
}

absl::StatusOr<int64_t> RestoreCoordinator::BumpFor(const std::string& backup,
                                                    int64_t* backup_revision) {
  auto text = store_->Get(MetaKey(config_.cluster.name, backup));
  if (!text.ok()) return text.status();
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) return meta.status();
  *backup_revision = meta->revision;
  auto highest = ReadHighestRevision(*store_, config_.cluster.name);
  if (!highest.ok()) return highest.status();
  return RevisionBump(*highest, meta->revision);
}

void RestoreCoordinator::Pass() {
  Observed o = Observe();
  RestoreDecision d = DecideRestore(o.view);
  switch (d.action) {
    case RestoreAction::kNothing:
      return;
    case RestoreAction::kWait:
      Note(d.reason);
      return;
    case RestoreAction::kCancel:
      if (absl::Status s = Cancel(*o.intent, d.reason); !s.ok()) {
        Note(absl::StrCat("cannot record the cancellation of restore ", o.intent->id, ": ",
                          s.message()));
      }
      return;
    case RestoreAction::kContinue: {
      if (absl::Status s = Execute(*o.intent); !s.ok()) {
        Note(absl::StrCat("restore ", o.intent->id, " not finished yet: ", s.message()));
      }
      return;
    }
    case RestoreAction::kStart:
      break;
  }
  auto backup = NewestValidBackup();
  if (!backup) {
    Note("every member is lost and no valid backup is found; waiting for an operator");
    return;
  }
  // The deltas stored after it, each read and checked: what the restore replays (possibly
  // from the backup before it, whose chain may reach further right after a full backup).
  auto point = DeltaPointFor(&*backup);
  if (!point.ok()) {
    Note(absl::StrCat("cannot read the deltas of backup ", *backup, ": ",
                      point.status().message(), "; waiting"));
    return;
  }
  // Choosing and verifying the backup and its deltas took a while: decide again on a fresh
  // observation.
  Observed again = Observe();
  if (RestoreDecision d2 = DecideRestore(again.view); d2.action != RestoreAction::kStart) {
    Note(absl::StrCat("not restoring after all: ", d2.reason));
    return;
  }
  auto chosen = FreshIntent(again.states, *backup, *point);
  if (!chosen.ok()) {
    Note(absl::StrCat("cannot prepare the restore: ", chosen.status().message()));
    return;
  }
  RestoreIntent fresh = std::move(*chosen);
  spdlog::warn("restore: {}; restoring backup {}{} (restore {})", d.reason,
               *backup, DescribePoint(*point), fresh.id);
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, fresh); !s.ok()) {
    Note(absl::StrCat("cannot record the restore intent: ", s.message()));
    return;
  }
  if (history_ != nullptr) {
    history_->Append(Event{0, 0, "", "restore",
                           absl::StrCat(d.reason, "; restoring backup ", *backup,
                                        DescribePoint(*point), " (restore ", fresh.id, ")"),
                           "started"});
  }
  if (absl::Status s = Execute(fresh); !s.ok()) {
    Note(absl::StrCat("restore ", fresh.id, " not finished yet: ", s.message()));
  }
}

absl::Status RestoreCoordinator::PromiseTerm(const Observed& o, peer::OrderHeader* out) {
  const size_t majority = config_.cluster.nodes.size() / 2 + 1;
  uint64_t term = 0;
  for (const auto& [name, st] : o.states) term = std::max(term, st.highest_term());
  ++term;
  peer::OrderHeader& header = *out;
  header.set_term(term);
  header.set_leader(config_.node.name);
  size_t acks = 0;
  for (const auto& [name, st] : o.states) {
    if (agents_.at(name)->Promise(header, milliseconds(2000)).ok()) ++acks;
  }
  if (acks < majority) {
    return absl::UnavailableError(absl::StrCat("only ", acks, " of ", config_.cluster.nodes.size(),
                                               " agents acknowledged term ", term,
                                               "; a majority is needed"));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::StillJustified(const RestoreIntent& intent, Observed* out) {
  // (The promises took time, and agents that came up since are in this round rather than the
  // next.)
  Observed& o = *out;
  o = Observe();
  o.view.pending = RestoreView::Pending{intent.id, intent.requested_by == "auto", intent.ordered};
  RestoreDecision d = DecideRestore(o.view);
  if (d.action == RestoreAction::kCancel) {
    if (absl::Status s = Cancel(intent, d.reason); !s.ok()) return s;
    return absl::AbortedError(absl::StrCat("cancelled: ", d.reason));
  }
  if (d.action != RestoreAction::kContinue) {
    return absl::UnavailableError(absl::StrCat("not ordering the restore: ", d.reason));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::OrderRound(RestoreIntent& intent, const Observed& o,
                                            const peer::OrderHeader& header,
                                            std::vector<std::string>* missing) {
  std::vector<std::string> silent;
  for (const auto& n : config_.cluster.nodes) {
    if (!o.states.count(n.name)) silent.push_back(n.name);
  }
  if (!silent.empty()) {
    spdlog::warn("restore {}: node(s) {} do not answer and are left out of this round", intent.id,
                 absl::StrJoin(silent, ","));
  }
  // Right before the orders: is this still the intent, and not settled by another
  // coordinator? From the first order on, a node may restore while nobody hears about it:
  // record that first, so no later coordinator cancels a restore some node applied (R6).
  if (absl::Status s = Record(intent, "restore orders go out", Set(&RestoreIntent::ordered));
      !s.ok()) {
    return s;
  }
  if (intent.settled) return absl::AbortedError("settled by another coordinator meanwhile");
  return JudgeRound(intent, SendOrders(intent, o, header), missing);
}

RestoreCoordinator::OrderResults RestoreCoordinator::SendOrders(const RestoreIntent& intent,
                                                               const Observed& o,
                                                               const peer::OrderHeader& header) {
  std::map<std::string, bool> member;
  for (const auto& [name, url] : intent.initial_cluster) member[name] = true;
  std::vector<std::string> ordered;
  std::vector<std::function<absl::Status()>> orders;
  for (const auto& [name, st] : o.states) {
    // Applied — unless a member lost its data since (its marker outlives the data dir).
    if (st.restore_id() == intent.id && (st.has_data() || !member.count(name))) continue;
    peer::RestoreRequest req;
    *req.mutable_header() = header;
    req.set_restore_id(intent.id);
    req.set_backup(intent.backup);
    req.set_token(intent.token);
    req.set_member(member.count(name) > 0);
    // Until settled, restored members serve only on the fence port.
    req.set_fenced(!intent.settled);
    req.set_bump_revision(static_cast<uint64_t>(std::max<int64_t>(0, intent.bump_revision)));
    for (const auto& [n, url] : intent.initial_cluster) {
      auto* m = req.add_initial_cluster();
      m->set_name(n);
      m->set_peer_url(url);
    }
    PeerApi* c = agents_.at(name).get();
    spdlog::info("restore {}: ordering node {} to restore backup {}", intent.id, name,
                 intent.backup);
    ordered.push_back(name);
    orders.push_back([c, req] { return c->Restore(req, milliseconds(600000)); });
  }
  auto results = FanOut(env_.parallel, orders);
  OrderResults out;
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (!results[i].ok()) {
      spdlog::error("restore {}: node {} failed: {}", intent.id, ordered[i], results[i].message());
      // The node walked the backup's DB before touching anything and found it damaged.
      const std::string msg(results[i].message());
      if (const size_t at = msg.find(BoltFile::kDamaged); at != std::string::npos) {
        out.refused_damaged.push_back(ordered[i]);
        if (out.damage.empty()) out.damage = msg.substr(at);  // "the DB is damaged: …"
      }
    }
  }
  return out;
}

absl::Status RestoreCoordinator::JudgeRound(RestoreIntent& intent, const OrderResults& round,
                                            std::vector<std::string>* out_missing) {
  std::vector<std::string>& missing = *out_missing;
  // Done once a majority of the restored cluster's members applied it and it has a leader; a
  // member that is down for good is then the reconciler's to replace, like any dead member.
  size_t applied = 0;
  std::vector<std::string> cannot_bump;
  for (const auto& [name, url] : intent.initial_cluster) {
    auto st = agents_.at(name)->GetState(milliseconds(1000));
    if (st.ok() && st->restore_id() == intent.id && st->has_data()) {
      ++applied;
    } else {
      missing.push_back(name);
    }
    // (Also a member that cannot raise it at all: silent when the restore was chosen.)
    if (st.ok() && (st->bump_refused() == intent.id || !st->can_bump_revision())) {
      cannot_bump.push_back(name);
    }
  }
  if (DamagedBackupVerdict v =
          JudgeDamagedBackup(intent.initial_cluster.size(), applied, round.refused_damaged.size(),
                             intent.requested_by == "auto", intent.settled);
      v.mark) {
    const std::string why =
        absl::StrCat("backup ", intent.backup, " cannot be restored: node(s) ",
                     absl::StrJoin(round.refused_damaged, ","), " found its DB damaged (",
                     round.damage, ")");
    spdlog::error("restore {}: {}", intent.id, why);
    if (absl::Status s = MarkBackupDamaged(*store_, config_.cluster.name, intent.backup,
                                           round.damage, config_.node.name,
                                           env_.clock->UnixSeconds());
        !s.ok()) {
      return Annotate(s, why);
    }
    if (v.replace) return Supersede(intent, absl::DataLossError(why));
    return absl::DataLossError(absl::StrCat(why, "; name an older backup"));
  }
  // Members that cannot raise the revision as ordered (no etcdutl, and the in-place edit
  // refuses the backup: the same on every such node) so many that the others are no
  // majority: this restore can never settle. An automatic one is replaced by one without
  // the bump while nothing has served clients from it. (Fewer: the rest settle it and those
  // are healed by a join. An operator's restore waits, and `status` shows the errors.)
  const size_t members = intent.initial_cluster.size(), majority_of = members / 2 + 1;
  if (applied < majority_of && intent.bump_revision > 0 && intent.requested_by == "auto" &&
      cannot_bump.size() > members - majority_of && !intent.settled) {
    return Supersede(intent,
                     absl::FailedPreconditionError(absl::StrCat(
                         "node(s) ", absl::StrJoin(cannot_bump, ","),
                         " cannot raise the revision as ordered (no etcd.etcdutl, and the "
                         "in-place restore refuses the backup)")),
                     /*unbumped_backup=*/intent.backup);
  }
  if (applied < intent.initial_cluster.size() / 2 + 1) {
    return absl::UnavailableError(absl::StrCat(applied, " of ", intent.initial_cluster.size(),
                                               " members restored so far"));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::SettleRound(RestoreIntent& intent) {
  if (intent.settled) return absl::OkStatus();
  // The restored members serve only on the fence port: no client sees the cluster before the
  // leases that came with the backup are revoked.
  auto fenced = MembersClient(intent, &Config::FenceUrl);
  if (!WaitForLeader(*fenced, std::chrono::seconds(30))) {
    return absl::UnavailableError("the restored cluster has no leader yet");
  }
  // Revoking leases is only right while nobody but the fence sees the cluster: not if
  // another coordinator settled it (and unfenced it) meanwhile.
  if (absl::Status s = Sync(intent); !s.ok()) return s;
  if (intent.settled) return absl::OkStatus();
  bool deltas_lost = false;
  if (absl::Status s = Settle(intent, *fenced, &deltas_lost); !s.ok()) {
    if (deltas_lost) return Supersede(intent, s);
    return s;
  }
  // The start revision was recorded before the orders, but a leader of the replaced cluster
  // (an operator's restore) may have written its own record over it meanwhile: once more, now
  // that it is stopped, before the restored cluster serves clients.
  if (intent.bump_revision > 0) {
    int64_t backup_revision = 0;
    if (auto b = BumpFor(intent.backup, &backup_revision); !b.ok()) {
      return Annotate(b.status(), "recording the restored cluster's revision");
    }
    const int64_t start =
        RestoredStartRevision(backup_revision, intent.delta_to, intent.bump_revision);
    if (absl::Status s = RaiseHighestRevision(*store_, config_.cluster.name, start,
                                              env_.clock->UnixSeconds());
        !s.ok()) {
      return Annotate(s, "recording the restored cluster's revision");
    }
  }
  return Record(intent, "the restore is settled", Set(&RestoreIntent::settled));
}

void RestoreCoordinator::UnfenceMembers(const RestoreIntent& intent,
                                        const peer::OrderHeader& header) {
  // Every fenced member goes back to its client URL (an agent that misses this order does it by
  // itself once it reads that the restore is settled).
  peer::UnfenceRequest unfence;
  *unfence.mutable_header() = header;
  unfence.set_restore_id(intent.id);
  std::vector<std::function<absl::Status()>> unfence_calls;
  for (const auto& [name, url] : intent.initial_cluster) {
    PeerApi* c = agents_.at(name).get();
    unfence_calls.push_back([c, unfence] {
      auto st = c->GetState(milliseconds(1000));
      if (!st.ok() || !st->fenced()) return absl::OkStatus();
      return c->Unfence(unfence, milliseconds(30000));
    });
  }
  for (const absl::Status& s : FanOut(env_.parallel, unfence_calls)) {
    if (!s.ok()) spdlog::warn("restore {}: unfencing: {}", intent.id, s.message());
  }
}

absl::Status RestoreCoordinator::Finish(RestoreIntent& intent, const Observed& o,
                                        bool was_settled, const std::vector<std::string>& missing) {
  // A fresh client: the long-lived one's channels back off after the refusals of the fence.
  auto unfenced_client = MembersClient(intent, &Config::ClientUrl);
  if (!WaitForLeader(*unfenced_client, std::chrono::seconds(30))) {
    size_t empty = 0;
    for (const auto& [name, url] : intent.initial_cluster) {
      auto it = o.states.find(name);
      if (it != o.states.end() && !it->second.has_data()) ++empty;
    }
    if (was_settled && empty >= intent.initial_cluster.size() / 2 + 1) {
      // The restored cluster ran and was lost as a whole since: restoring this intent's backup
      // again would drop what was written after it. Close the intent; the next pass decides
      // afresh (from the newest backup, and only if total loss is proven again).
      if (absl::Status s = Record(intent, "the restore is closed", Set(&RestoreIntent::done));
          !s.ok()) {
        return s;
      }
      CountRestore(intent, "closed");
      spdlog::warn("restore {}: the restored cluster was lost after it was settled ({} of {} "
                   "members answer without data); closing this restore",
                   intent.id, empty, intent.initial_cluster.size());
      return absl::AbortedError("the restored cluster was lost after it was settled");
    }
    return absl::UnavailableError("the restored cluster does not answer on its client URLs yet");
  }
  std::vector<std::string> restored;
  for (const auto& [name, url] : intent.initial_cluster) {
    if (std::find(missing.begin(), missing.end(), name) == missing.end()) restored.push_back(name);
  }
  // The restored cluster's voting members are the intent's initial cluster, restored or not.
  // Recorded before the restore is done: until then the leader changes no membership, and a
  // later total loss must be proven against these members, not the lost cluster's.
  std::vector<std::string> voters;
  for (const auto& [name, url] : intent.initial_cluster) voters.push_back(name);
  std::sort(voters.begin(), voters.end());
  if (absl::Status s =
          WriteLastVoters(*store_, config_.cluster.name, voters, env_.clock->UnixSeconds());
      !s.ok()) {
    return Annotate(s, "recording the restored cluster's voting members");
  }
  if (absl::Status s = Record(intent, "the restore is done", Set(&RestoreIntent::done));
      !s.ok()) {
    return s;
  }
  CountRestore(intent, missing.empty() ? "done" : "done-partly");
  if (missing.empty()) {
    spdlog::info("restore {}: every member ({}) restored backup {}", intent.id,
                 absl::StrJoin(restored, ","), intent.backup);
  } else {
    spdlog::warn("restore {}: members {} restored backup {}; NOT restored: {} (the leader heals "
                 "them as it would any lost member)",
                 intent.id, absl::StrJoin(restored, ","), intent.backup,
                 absl::StrJoin(missing, ","));
  }
  return absl::OkStatus();
}

// The restore as steps, each of which checks again what it rests on and records its progress
// in the intent before the next: a coordinator that dies between two steps is followed by one
// that starts at the first step not recorded (ordered, settled, done).
absl::Status RestoreCoordinator::Execute(RestoreIntent intent) {
  Observed o = Observe();
  peer::OrderHeader header;
  if (absl::Status s = PromiseTerm(o, &header); !s.ok()) return s;
  if (absl::Status s = StillJustified(intent, &o); !s.ok()) return s;
  // Once settled, the restored cluster is the live cluster: nobody is ordered to restore it
  // again (a node that lost its data since is a lost member, the leader's to heal), and if it
  // was lost as a whole, the next restore starts afresh from the newest backup.
  const bool was_settled = intent.settled;
  std::vector<std::string> missing;
  if (!was_settled) {
    if (absl::Status s = OrderRound(intent, o, header, &missing); !s.ok()) return s;
    if (absl::Status s = SettleRound(intent); !s.ok()) return s;
  } else {
    for (const auto& [name, url] : intent.initial_cluster) {
      auto it = o.states.find(name);
      if (it == o.states.end() || it->second.restore_id() != intent.id) missing.push_back(name);
    }
  }
  UnfenceMembers(intent, header);
  return Finish(intent, o, was_settled, missing);
}

}  // namespace steward
