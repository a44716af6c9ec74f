#include "reconcile/restore.h"

#include <algorithm>
#include <future>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

std::string RestoreIntentKey(const std::string& cluster) {
  return cluster + "/control/restore.json";
}

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
                      {"done", r.done},     {"created_at", r.created_at},
                      {"initial_cluster", members}};
  return store.Put(RestoreIntentKey(cluster), j.dump(2));
}

RestoreIntent NewRestoreIntent(const Config& config, const std::string& backup,
                               const std::string& requested_by) {
  RestoreIntent r;
  auto now = std::chrono::system_clock::now();
  r.created_at = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  r.id = absl::StrFormat("%d-%04x", r.created_at, std::random_device{}() & 0xffff);
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

absl::StatusOr<bool> ClusterEverExisted(BackupStore& store, const std::string& cluster) {
  auto marker = store.Get(CreatedMarkerKey(cluster));
  if (marker.ok()) return true;
  if (!absl::IsNotFound(marker.status())) return marker.status();
  auto objects = store.List(BackupsPrefix(cluster));
  if (!objects.ok()) return objects.status();
  return !objects->empty();
}

RestoreCoordinator::RestoreCoordinator(const Config& config, BackupStore* store,
                                       EtcdClient* etcd,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : config_(config), store_(store), etcd_(etcd) {
  for (const auto& n : config_.cluster.nodes) {
    agents_[n.name] = std::make_unique<PeerClient>(config_.AgentAddress(n), credentials);
  }
}

void RestoreCoordinator::Note(const std::string& msg) {
  repeats_.Say(msg, [](const std::string& m) { spdlog::info("restore: {}", m); });
}

bool RestoreCoordinator::RestorePending() {
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  // When the store cannot be read, go by what it said last: a store outage must not stop
  // healing, and a restore seen pending stays pending until the store says otherwise.
  if (!intent.ok()) return last_pending_;
  last_pending_ = intent->has_value() && !(*intent)->done;
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
    // The stored bytes against meta.json; every node checks them again as it fetches them,
    // before it touches its data.
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(*store_, config_.cluster.name, *b.meta, opts);
    if (s.ok()) return b.name;
    spdlog::error("restore: skipping backup {}: it fails verification: {}", b.name, s.message());
  }
  return std::nullopt;
}

std::map<std::string, peer::NodeState> RestoreCoordinator::States() {
  // Everyone's state, in parallel.
  std::map<std::string, std::future<absl::StatusOr<peer::NodeState>>> futures;
  for (auto& [name, client] : agents_) {
    PeerClient* c = client.get();
    futures[name] = std::async(std::launch::async, [c] { return c->GetState(milliseconds(1000)); });
  }
  std::map<std::string, peer::NodeState> states;
  for (auto& [name, f] : futures) {
    auto st = f.get();
    if (st.ok()) states[name] = *st;
  }
  return states;
}

void RestoreCoordinator::Pass() {
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!intent.ok()) {
    Note(absl::StrCat("cannot read the restore intent: ", intent.status().message()));
    return;
  }
  const bool pending = intent->has_value() && !(*intent)->done;
  std::map<std::string, peer::NodeState> states = States();
  // Only the lowest-named reachable agent coordinates.
  if (states.empty() || states.begin()->first != config_.node.name) return;
  const size_t majority = config_.cluster.nodes.size() / 2 + 1;
  if (pending) {
    absl::Status s = Execute(**intent, states);
    if (!s.ok()) Note(absl::StrCat("restore ", (*intent)->id, " not finished yet: ", s.message()));
    return;
  }
  // Total loss: a majority answers, none of them has data or runs etcd, and no etcd answers on
  // any configured client URL (a member whose agent is down may still serve).
  if (states.size() < majority) return;
  for (const auto& [name, st] : states) {
    if (st.has_data() || st.etcd_running()) return;
  }
  if (etcd_->MemberList().ok()) return;
  auto existed = ClusterEverExisted(*store_, config_.cluster.name);
  if (!existed.ok()) {
    Note(absl::StrCat("no node has data and the backup store cannot be read (",
                      existed.status().message(), "); waiting"));
    return;
  }
  if (!*existed) return;  // a brand-new cluster: the agents bootstrap it themselves
  if (!config_.backup.auto_restore) {
    Note("every member is lost; backup.auto_restore is off, so waiting for "
         "`stewardctl restore-backup NAME`");
    return;
  }
  auto backup = NewestValidBackup();
  if (!backup) {
    Note("every member is lost and no valid backup is found; waiting for an operator");
    return;
  }
  RestoreIntent fresh = NewRestoreIntent(config_, *backup, "auto");
  spdlog::warn("restore: every member is lost; restoring the newest valid backup {} (restore {})",
               *backup, fresh.id);
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, fresh); !s.ok()) {
    Note(absl::StrCat("cannot record the restore intent: ", s.message()));
    return;
  }
  if (absl::Status s = Execute(fresh, states); !s.ok()) {
    Note(absl::StrCat("restore ", fresh.id, " not finished yet: ", s.message()));
  }
}

absl::Status RestoreCoordinator::Execute(RestoreIntent intent,
                                         const std::map<std::string, peer::NodeState>& seen) {
  // Ask again: choosing and verifying the backup took a while, and agents that came up since
  // should be in this round rather than the next.
  std::map<std::string, peer::NodeState> states = States();
  if (states.size() < seen.size()) states = seen;
  const size_t majority = config_.cluster.nodes.size() / 2 + 1;
  uint64_t term = 0;
  for (const auto& [name, st] : states) term = std::max(term, st.highest_term());
  ++term;
  peer::OrderHeader header;
  header.set_term(term);
  header.set_leader(config_.node.name);
  size_t acks = 0;
  for (const auto& [name, st] : states) {
    if (agents_.at(name)->Promise(header, milliseconds(2000)).ok()) ++acks;
  }
  if (acks < majority) {
    return absl::UnavailableError(absl::StrCat("only ", acks, " of ", config_.cluster.nodes.size(),
                                               " agents acknowledged term ", term,
                                               "; a majority is needed"));
  }
  std::map<std::string, bool> member;
  for (const auto& [name, url] : intent.initial_cluster) member[name] = true;
  std::vector<std::pair<std::string, std::future<absl::Status>>> orders;
  for (const auto& [name, st] : states) {
    if (st.restore_id() == intent.id) continue;
    peer::RestoreRequest req;
    *req.mutable_header() = header;
    req.set_restore_id(intent.id);
    req.set_backup(intent.backup);
    req.set_token(intent.token);
    req.set_member(member.count(name) > 0);
    for (const auto& [n, url] : intent.initial_cluster) {
      auto* m = req.add_initial_cluster();
      m->set_name(n);
      m->set_peer_url(url);
    }
    PeerClient* c = agents_.at(name).get();
    spdlog::info("restore {}: ordering node {} to restore backup {}", intent.id, name, intent.backup);
    orders.emplace_back(name, std::async(std::launch::async, [c, req] {
                          return c->Restore(req, milliseconds(600000));
                        }));
  }
  bool all_ok = true;
  for (auto& [name, f] : orders) {
    absl::Status s = f.get();
    if (!s.ok()) {
      all_ok = false;
      spdlog::error("restore {}: node {} failed: {}", intent.id, name, s.message());
    }
  }
  // Done once a majority of the restored cluster's members applied it and it has a leader; a
  // member that is down for good is then the reconciler's to replace, like any dead member.
  size_t applied = 0;
  std::vector<std::string> missing;
  for (const auto& [name, url] : intent.initial_cluster) {
    auto st = agents_.at(name)->GetState(milliseconds(1000));
    if (st.ok() && st->restore_id() == intent.id) {
      ++applied;
    } else {
      missing.push_back(name);
    }
  }
  if (applied < intent.initial_cluster.size() / 2 + 1) {
    return absl::UnavailableError(absl::StrCat(applied, " of ", intent.initial_cluster.size(),
                                               " members restored so far"));
  }
  bool healthy = false;
  for (int i = 0; i < 30 && !healthy; ++i) {  // bounded: ~30 s for the restored cluster's election
    auto members = etcd_->MemberList();
    if (members.ok()) {
      for (const auto& m : *members) {
        if (m.client_urls.empty()) continue;
        auto st = etcd_->Status(m.client_urls.front(), milliseconds(1000));
        if (st.ok() && st->leader != 0) healthy = true;
      }
    }
    if (!healthy) std::this_thread::sleep_for(milliseconds(1000));
  }
  if (!healthy) return absl::UnavailableError("the restored cluster has no leader yet");
  if (!all_ok || !missing.empty()) {
    spdlog::warn("restore {}: finished without {}; the leader will heal them", intent.id,
                 missing.size());
  }
  intent.done = true;
  spdlog::info("restore {}: every member restored backup {}", intent.id, intent.backup);
  return WriteRestoreIntent(*store_, config_.cluster.name, intent);
}

}  // namespace steward
