#include "reconcile/reconciler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backup/layout.h"
#include "common/duration.h"
#include "common/fan_out.h"
#include "common/metrics.h"
#include "common/rules.h"
#include "common/status.h"
#include "control/records.h"
#include "control/report.h"
#include "etcd/advisories.h"
#include "etcd/member_id.h"
#include "nlohmann/json.hpp"
#include "reconcile/maintenance.h"
#include "reconcile/restart_roll.h"
#include "spdlog/spdlog.h"

namespace steward {

using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds kObserveTimeout{1000};
constexpr milliseconds kOrderTimeout{5000};
constexpr milliseconds kWipeTimeout{30000};
// A defrag by rule blocks its member until done; a multi-GiB backend on a slow disk takes
// minutes (bench/scale: 8 GiB, about 4 min a member).
constexpr milliseconds kDefragTimeout{10 * 60 * 1000};
}  // namespace

Reconciler::Reconciler(const Config& config, EtcdApi* etcd, BackupStore* store,
                       BackupScheduler* backups, std::function<bool()> restore_pending,
                       std::function<bool()> confirm_leader, ControlEnv env,
                       std::function<bool(uint64_t)> raise_epoch)
    : config_(config),
      etcd_(etcd),
      env_(std::move(env)),
      store_(store),
      backups_(backups),
      restore_pending_(std::move(restore_pending)),
      confirm_leader_(std::move(confirm_leader)),
      raise_epoch_(std::move(raise_epoch)),
      divergence_(env_.clock, config.cluster.hash_check_interval) {
  // Every step series from the start at 0, so increase() sees the first of each.
  for (StepKind k :
       {StepKind::kRemoveMember, StepKind::kAddLearner, StepKind::kJoin, StepKind::kPromote,
        StepKind::kWipe, StepKind::kSwitchVersion, StepKind::kRestart, StepKind::kMoveLeader}) {
    for (const char* result : {"ok", "failed"}) {
      Metrics::Global().Add("steward_reconcile_steps_total", 0,
                            {{"kind", StepKindName(k)}, {"result", result}});
    }
  }
  for (const auto& n : config_.cluster.nodes) {
    agents_[n.name] = env_.dial_agent(n);
  }
}

PeerApi& Reconciler::Agent(const std::string& node) { return *agents_.at(node); }

uint64_t Reconciler::InitialIdOf(const std::string& peer_url) {
  // Computed once per URL: OpenSSL's SHA1() fetches its implementation anew on every call, and
  // those code paths (~450 KiB, faulted in by 64 KiB) were most of what an idle leader kept
  // resident beyond a follower.
  const std::string token = config_.ClusterToken();
  auto [it, fresh] = initial_ids_.try_emplace(peer_url + '\n' + token, 0);
  if (fresh) it->second = InitialMemberId({peer_url}, token);
  return it->second;
}

std::string Reconciler::status() const {
  MutexLock lock(&mu_);
  return status_;
}

// The desired spec and the maintenance state (pauses, removed nodes), in one linearizable read.
absl::Status Reconciler::ObserveSpec(ClusterObservation* out, Maintenance* maintenance_out) {
  ClusterObservation& obs = *out;
  Maintenance& maintenance = *maintenance_out;
  auto both = GetKeys(*etcd_, {SpecKey(config_), MaintenanceKey(config_.cluster.name),
                               RestartKey(config_.cluster.name)});
  if (!both.ok()) return Annotate(both.status(), "reading the cluster spec");
  const std::optional<std::string>* spec = &(*both)[0];
  if (spec->has_value()) {
    auto j = nlohmann::json::parse(**spec, nullptr, false);
    if (!j.is_discarded() && j.contains("size") && j["size"].is_number_integer()) {
      obs.desired_size = j["size"].get<int>();
      if (j.contains("version") && j["version"].is_string()) {
        obs.desired_version = j["version"].get<std::string>();
      }
    } else {
      spdlog::warn("ignoring malformed spec at {}: {}", SpecKey(config_), **spec);
    }
  }
  // Pauses and removed nodes (stewardctl pause, drain, remove-node). Not knowing them, the
  // planner could replace a node under maintenance: an unreadable or malformed document
  // makes the pass wait.
  const std::optional<std::string>* maintenance_text = &(*both)[1];
  if (maintenance_text->has_value()) {
    auto parsed = MaintenanceFromJson(**maintenance_text);
    if (!parsed.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(MaintenanceKey(config_.cluster.name), ": ", parsed.status().message(),
                       "; nothing is changed until it is fixed (stewardctl resume rewrites it)"));
    }
    maintenance = *std::move(parsed);
  }
  // A malformed roll restarts nothing (stewardctl restart writes a new one); all else goes on.
  if (const std::optional<std::string>& roll = (*both)[2]; roll.has_value()) {
    auto parsed = RestartRollFromJson(*roll);
    if (parsed.ok()) {
      obs.restart = *std::move(parsed);
    } else {
      spdlog::warn("ignoring {}: {}", RestartKey(config_.cluster.name), parsed.status().message());
    }
  }
  return absl::OkStatus();
}

// Node `n` as its agent reports it (`st`); what the operator should know goes to `notes`.
NodeView Reconciler::ObserveNode(const NodeSpec& n, const absl::StatusOr<peer::NodeState>& st,
                                 std::vector<std::string>& notes) {
  NodeView v;
  v.name = n.name;
  v.peer_url = config_.PeerUrl(n);
  v.initial_member_id = InitialIdOf(v.peer_url);
  if (st.ok()) {
    v.agent_up = true;
    node_users_[n.name] = st->client_user();
    v.etcd_running = st->etcd_running();
    v.has_data = st->has_data();
    v.local_member_id = st->member_id();
    v.switched_version = st->switched_version();
    for (const auto& b : st->binaries()) {
      v.binaries.push_back(EtcdBinary{b.key(), b.path(), b.reported(), b.error()});
    }
    v.etcd_exit = st->etcd_exit();
    v.hang = st->hang();
    v.wal_fsync_p99_ms = st->wal_fsync_p99_ms();
    v.backend_commit_p99_ms = st->backend_commit_p99_ms();
    v.disk_slow = st->disk_slow();
    v.data_free_bytes = st->has_data_free_bytes() ? st->data_free_bytes() : -1;
    v.pending_restart.assign(st->pending_restart().begin(), st->pending_restart().end());
    v.restarted_for = st->restarted_for();
    if (!v.disk_slow.empty()) notes.push_back(absl::StrCat(n.name, ": slow disk: ", v.disk_slow));
    v.join_error = st->join_error();
    v.join_retry_in = milliseconds(st->join_retry_ms());
    for (const auto& b : st->binaries()) {
      const std::string what =
          b.key().empty() ? "etcd.binary" : absl::StrCat("etcd.versions[", b.key(), "]");
      if (b.reported().empty()) {
        notes.push_back(absl::StrCat(n.name, ": ", what, " (", b.path(),
                                     ") reports no "
                                     "version: ",
                                     b.error()));
      } else if (!b.key().empty() && b.reported() != b.key()) {
        notes.push_back(
            absl::StrCat(n.name, ": ", what, " (", b.path(), ") is etcd ", b.reported()));
      }
    }
    if (!st->join_error().empty()) {
      notes.push_back(absl::StrCat(n.name, ": etcd refused its join ", st->join_failures(),
                                   " time(s) in a row: ", st->join_error()));
    }
    // Stopped for a destroy: nothing is replaced, wiped or added there (P1-P3).
    if (!st->destroyed().empty()) v.paused = absl::StrCat("(destroy ", st->destroyed(), ")");
    if (st->highest_term() > agents_max_term_) {
      agents_max_term_ = st->highest_term();
      agents_max_term_leader_ = st->highest_term_leader();
    } else if (st->highest_term() == agents_max_term_ &&
               st->highest_term_leader() != config_.node.name) {
      agents_max_term_leader_ = st->highest_term_leader();
    }
  }
  return v;
}

// Each of `members` with its etcd's status; the unhealthy and learner clocks move on.
void Reconciler::ObserveMembers(const std::vector<MemberInfo>& members, ClusterObservation& obs) {
  std::vector<std::function<absl::StatusOr<MemberStatus>()>> status_calls;
  for (const auto& m : members) {
    std::string url = m.client_urls.empty() ? "" : m.client_urls.front();
    EtcdApi* c = etcd_;
    status_calls.push_back([c, url]() -> absl::StatusOr<MemberStatus> {
      if (url.empty()) return absl::UnavailableError("not started");
      return c->Status(url, kObserveTimeout);
    });
  }
  auto statuses = FanOut(env_.parallel, status_calls);
  uint64_t etcd_leader = 0;
  std::map<uint64_t, uint64_t> index_by_id;
  const auto now = env_.clock->Now();
  std::map<uint64_t, SteadyTime> still_unhealthy;
  for (size_t i = 0; i < members.size(); ++i) {
    const MemberInfo& m = members[i];
    MemberView v;
    v.id = m.id;
    v.name = m.name;
    v.peer_url = m.peer_urls.empty() ? "" : m.peer_urls.front();
    v.started = !m.client_urls.empty();
    v.is_learner = m.is_learner;
    auto& st = statuses[i];
    if (st.ok()) {
      max_revision_ = std::max(max_revision_, st->revision);
      v.raft_index = st->raft_index;
      v.version = st->version;
      v.db_size = st->db_size;
      v.db_size_in_use = st->db_size_in_use;
      // An alarm is reported by every member alike: it is not a reason to replace one.
      v.healthy = FailureErrors(*st).empty() && st->leader != 0;
      if (st->leader != 0) etcd_leader = st->leader;
      index_by_id[m.id] = st->raft_index;
    }
    // A member back from being down (or new) is checked at once: a restart is when etcd's own
    // data is read again, and a new member's snapshot is when a wrong copy would spread.
    if (v.healthy && unhealthy_since_.count(m.id) != 0) divergence_.Soon();
    if (!v.healthy) {
      auto it = unhealthy_since_.find(m.id);
      SteadyTime since = it == unhealthy_since_.end() ? now : it->second;
      still_unhealthy[m.id] = since;
      v.unhealthy_for = std::chrono::duration_cast<milliseconds>(now - since);
    }
    if (m.is_learner) {
      if (!learner_since_ || learner_since_->first != m.id) learner_since_.emplace(m.id, now);
      obs.learner_age = std::chrono::duration_cast<milliseconds>(now - learner_since_->second);
    }
    obs.members.push_back(v);
  }
  unhealthy_since_ = std::move(still_unhealthy);
  for (auto& v : obs.members) v.is_etcd_leader = v.id == etcd_leader;
  if (auto it = index_by_id.find(etcd_leader); it != index_by_id.end()) {
    obs.leader_raft_index = it->second;
  }
}

absl::StatusOr<ClusterObservation> Reconciler::Observe() {
  ClusterObservation obs;
  obs.replace_after = config_.cluster.replace_after;
  obs.learner_timeout = config_.cluster.learner_timeout;
  obs.desired_size = config_.cluster.size;
  obs.adopting = config_.cluster.adopt.enabled();
  for (const auto& [version, binary] : config_.etcd.versions)
    obs.available_versions.push_back(version);
  Maintenance maintenance;
  if (absl::Status s = ObserveSpec(&obs, &maintenance); !s.ok()) return s;

  // Every agent, in parallel.
  std::vector<std::function<absl::StatusOr<peer::NodeState>()>> state_calls;
  for (const auto& n : config_.cluster.nodes) {
    PeerApi* pc = agents_.at(n.name).get();
    state_calls.push_back([pc] { return pc->GetState(kObserveTimeout); });
  }
  auto states = FanOut(env_.parallel, state_calls);
  uint64_t cluster_id = 0;
  std::vector<std::string> notes;
  // Linearizable: a stale list (from a member cut off or removed) would show a live member as
  // gone, and the planner would wipe it.
  auto members = etcd_->LinearizableMemberList(&cluster_id);
  cluster_id_ = members.ok() ? cluster_id : 0;
  agents_max_term_ = 0;
  agents_max_term_leader_.clear();
  for (size_t i = 0; i < config_.cluster.nodes.size(); ++i) {
    obs.nodes.push_back(ObserveNode(config_.cluster.nodes[i], states[i], notes));
  }
  ApplyMaintenance(maintenance, env_.clock->UnixSeconds(), &obs);
  {
    MutexLock lock(&mu_);
    node_notes_ = std::move(notes);
  }
  if (!members.ok()) return obs;  // member_list_ok stays false: the planner waits
  obs.member_list_ok = true;
  ObserveMembers(*members, obs);
  return obs;
}

void Reconciler::RecordEpoch(uint64_t leader_term) {
  // The epoch goes to the store before this leader's first step, so that a restore after a
  // total loss can start the restored cluster's epochs past it (RestoreCoordinator).
  if (store_ == nullptr || leader_term <= epoch_recorded_) return;
  if (absl::Status s =
          RaiseHighestEpoch(*store_, config_.cluster.name, leader_term, env_.clock->UnixSeconds());
      !s.ok()) {
    spdlog::warn("recording the leader epoch {} in the backup store: {}", leader_term, s.message());
    return;  // again at the next pass
  }
  epoch_recorded_ = leader_term;
}

bool Reconciler::Pass(uint64_t leader_term) {
  settled_ = false;
  if (leader_term != last_leader_term_) {
    last_leader_term_ = leader_term;
    recorded_voters_.clear();  // another leader may have written the record meanwhile
    if (backups_ != nullptr) backups_->OnNewLeadership();
  }
  if (restore_pending_ && restore_pending_()) {
    restore_was_pending_ = true;
    Step wait;
    wait.kind = StepKind::kWait;
    wait.reason = "a restore from backup is under way; membership changes wait for it";
    Publish(wait, leader_term, "");
    return false;
  }
  if (store_ != nullptr && !created_marked_) CheckStoreIdentity();
  if (created_marked_) RecordEpoch(leader_term);  // only into a store known to be this cluster's
  auto obs = Observe();
  // Orders carry this leader's epoch and nothing else (a leader that borrowed the agents'
  // newest term could not be fenced). If an agent has admitted a term at or above it (a
  // restore coordinator's promises), the epoch is raised first, in etcd.
  const uint64_t term = leader_term;
  // Our own orders leave agents at our epoch, from us: no raise for that.
  const bool taken = agents_max_term_ > leader_term ||
                     (agents_max_term_ == leader_term && !agents_max_term_leader_.empty() &&
                      agents_max_term_leader_ != config_.node.name);
  if (taken && raise_epoch_) {
    raise_epoch_(agents_max_term_);
    return true;  // the next pass runs with the new epoch (or not at all, if leadership went)
  }
  if (!obs.ok()) {
    for (const char* name : {"steward_members_desired", "steward_members_voting",
                             "steward_members_learner", "steward_members_healthy"}) {
      Metrics::Global().Clear(name);  // nothing stale while the cluster cannot be observed
    }
    Step wait;
    wait.kind = StepKind::kWait;
    wait.reason = std::string(obs.status().message());
    Publish(wait, term, "");
    return false;
  }
  if (created_marked_) {  // only into a store known to be this cluster's
    RecordVoters(*obs);
    RecordRevision();
  }
  if (restore_was_pending_) divergence_.Soon();  // every restore ends with a check
  restore_was_pending_ = false;
  ObserveDivergence(*obs, term);
  Step step = PlanNextStep(*obs);
  if (step.kind == StepKind::kNone) MaybeMoveLeader(*obs, step, term);
  MaybeDefrag(*obs, step, term);
  ExportMembers(*obs);
  SayAdvisories(*obs, term);
  // While a learner is on its way, look again soon: it catches up in a fraction of a second.
  in_progress_ = false;
  for (const auto& m : obs->members) {
    if (m.is_learner) in_progress_ = true;
  }
  if (step.kind == StepKind::kNone || step.kind == StepKind::kWait) {
    Publish(step, term, "");
    settled_ = step.kind == StepKind::kNone && !in_progress_;
    if (step.kind == StepKind::kNone && backups_ != nullptr && store_mismatch_.empty()) {
      backups_->MaybePeriodic();
    }
    return false;
  }
  // A restart roll changes neither membership nor data: no backup before its steps.
  const bool keeps_data = step.kind == StepKind::kJoin || step.kind == StepKind::kRestart ||
                          step.kind == StepKind::kMoveLeader;
  if (backups_ != nullptr && !keeps_data && store_mismatch_.empty()) {
    backups_->BeforeChange(StepKindName(step.kind));
  }
  if (confirm_leader_ && !confirm_leader_()) {
    spdlog::warn("not acting ({}): no longer the leader", StepKindName(step.kind));
    return false;
  }
  if (std::string why; !StillDiverged(step, *obs, &why) || !AgreeBeforeAdd(step, &why) ||
                       !OthersHealthyBeforeRestart(step, &why)) {
    Step wait;
    wait.kind = StepKind::kWait;
    wait.reason = why;
    Publish(wait, term, "");
    return false;
  }
  if (std::string why; !RecordVotersBefore(step, *obs, &why)) {
    Step wait;
    wait.kind = StepKind::kWait;
    wait.reason = absl::StrCat(step.reason, "; but ", why);
    Publish(wait, term, "");
    return false;
  }
  return Carry(step, term);
}

// Carries out `step` (decided and checked by Pass) and records how it went.
bool Reconciler::Carry(const Step& step, uint64_t term) {
  if (step.reason != last_decision_) {
    spdlog::info("reconcile (term {}): {}", term, step.reason);
    last_decision_ = step.reason;
  }
  absl::Status s = Act(step, term);
  Metrics::Global().Add("steward_reconcile_steps_total", 1,
                        {{"kind", StepKindName(step.kind)}, {"result", s.ok() ? "ok" : "failed"}});
  if (!s.ok()) {
    // etcd refuses some steps for a while (strict reconfig check, promote before in sync);
    // say so once, not on every retry.
    std::string failure = absl::StrCat(StepKindName(step.kind), ": ", s.message());
    if (failure != last_failure_) {
      spdlog::warn("reconcile step failed (will retry): {}", failure);
      last_failure_ = failure;
      Record(term, StepKindName(step.kind), step.reason, absl::StrCat("failed: ", s.message()));
    }
    Publish(step, term, std::string(s.message()));
    return false;
  }
  last_failure_.clear();
  last_decision_.clear();
  // A join is done when its etcd has joined, which the node records itself ("joined").
  Record(term, StepKindName(step.kind), step.reason,
         step.kind == StepKind::kJoin ? "started" : "ok");
  Publish(step, term, "");
  return true;
}

void Reconciler::Record(uint64_t term, const std::string& action, const std::string& reason,
                        const std::string& result) {
  if (history_ != nullptr) history_->Append(term, action, reason, result);
}

void Reconciler::ExportMembers(const ClusterObservation& obs) {
  int voting = 0, learners = 0, healthy = 0;
  for (const auto& m : obs.members) {
    if (m.is_learner) {
      ++learners;
    } else {
      ++voting;
      if (m.healthy) ++healthy;
    }
  }
  Metrics& metrics = Metrics::Global();
  metrics.Set("steward_members_desired", obs.desired_size);
  metrics.Set("steward_members_voting", voting);
  metrics.Set("steward_members_learner", learners);
  metrics.Set("steward_members_healthy", healthy);
  metrics.Clear("steward_member_db_free_percent");
  for (const auto& m : obs.members) {
    if (m.db_size > 0 && !m.name.empty()) {
      metrics.Set("steward_member_db_free_percent", FragmentedPercent(m), {{"member", m.name}});
    }
  }
  // Known problems of the versions the members run (etcd/advisories.h): the alert rule
  // StewardEtcdVersionAdvisory fires on end of life and on a version that refuses a roll.
  metrics.Clear("steward_etcd_advisory");
  for (const auto& m : obs.members) {
    if (m.name.empty()) continue;
    for (const EtcdAdvisory* a : AdvisoriesFor(m.version)) {
      metrics.Set("steward_etcd_advisory", 1,
                  {{"member", m.name},
                   {"version", m.version},
                   {"advisory", std::string(a->id)},
                   {"effect", a->effect == AdvisoryEffect::kEndOfLife    ? "end_of_life"
                              : a->effect == AdvisoryEffect::kRefuseRoll ? "refuse_roll"
                                                                         : "warning"}});
    }
  }
  metrics.Clear("steward_node_data_free_bytes");
  metrics.Clear("steward_etcd_pending_restart");
  for (const auto& n : obs.nodes) {
    if (n.agent_up && n.etcd_running) {
      metrics.Set("steward_etcd_pending_restart", n.pending_restart.empty() ? 0 : 1,
                  {{"node", n.name}});
    }
    if (n.data_free_bytes >= 0) {
      metrics.Set("steward_node_data_free_bytes", static_cast<double>(n.data_free_bytes),
                  {{"node", n.name}});
    }
  }
}

void Reconciler::SayAdvisories(const ClusterObservation& obs, uint64_t term) {
  for (const auto& m : obs.members) {
    if (m.name.empty() || m.version.empty()) continue;
    if (!advisories_said_.insert(absl::StrCat(m.name, "@", m.version)).second) continue;
    for (const EtcdAdvisory* a : AdvisoriesFor(m.version)) {
      const std::string line = AdvisoryLine(*a);
      spdlog::warn("member {} runs etcd {}: {}", m.name, m.version, line);
      if (obs.adopting) {
        Record(term, "adopt-advisory", absl::StrCat("member ", m.name, " runs etcd ", m.version),
               line);
      }
    }
  }
}

void Reconciler::CheckStoreIdentity() {
  // The store's marker says "this cluster has existed": from then on an empty cluster is never
  // bootstrapped over it. etcd remembers that the store was marked, so a store that lost its
  // marker while the cluster lives (an NFS share no longer mounted, leaving the empty mount
  // point; another bucket) is recognised as the wrong store, not marked afresh.
  const std::string key = CreatedMarkerKey(config_.cluster.name);
  const std::string marked_key = StoreMarkedKey(config_.cluster.name);
  auto marker = store_->Get(key);
  auto marked = etcd_->Get(marked_key);
  if (!marked.ok()) return;  // ask again next pass
  if (marker.ok()) {
    store_mismatch_.clear();
    if (marked->has_value() || etcd_->Put(marked_key, "1").ok()) created_marked_ = true;
    return;
  }
  if (!absl::IsNotFound(marker.status())) return;  // the store is down: ask again
  if (marked->has_value()) {
    store_mismatch_ = absl::StrCat("the backup store ", store_->Describe(),
                                   " holds no marker of this cluster, though this cluster marked "
                                   "it: it is not the store this cluster used (a share no longer "
                                   "mounted?); backups are held until it is back");
    repeats_.Say(store_mismatch_, [](const std::string& m) { spdlog::error("{}", m); });
    return;
  }
  nlohmann::json j = {{"cluster", config_.cluster.name}, {"at", env_.clock->UnixSeconds()}};
  if (store_->Put(key, j.dump()).ok() && etcd_->Put(marked_key, "1").ok()) created_marked_ = true;
}

namespace {

// Voting members by node name (a member that never started has no name yet: match its URL),
// counting `also` (a learner about to be promoted) as one. Empty if one cannot be named.
std::vector<std::string> VoterNames(const ClusterObservation& obs, uint64_t also = 0) {
  std::vector<std::string> voters;
  for (const auto& m : obs.members) {
    if (m.is_learner && m.id != also) continue;
    std::string name = m.name;
    for (const auto& n : obs.nodes) {
      if (n.peer_url == m.peer_url) name = n.name;
    }
    if (name.empty()) return {};  // a member we cannot name: no record rather than a guess
    voters.push_back(name);
  }
  std::sort(voters.begin(), voters.end());
  return voters;
}

}  // namespace

bool Reconciler::RecordVotersBefore(const Step& step, const ClusterObservation& obs,
                                    std::string* why) {
  if (store_ == nullptr) return true;  // no backups, no restore: nothing relies on the record
  if (step.kind != StepKind::kPromote && step.kind != StepKind::kRemoveMember) return true;
  if (RuleOff("V1")) return true;  // mutation tests only
  // The restore coordinator proves total loss against this record, so it must never miss a
  // voter: before the set grows, the record grows first; before it shrinks, it must be current
  // (the removed member stays listed until the next pass). A record with one extra voter still
  // proves loss only when the real voters lost their majority.
  if (!created_marked_ || !store_mismatch_.empty()) {
    *why =
        "the backup store is not confirmed as this cluster's yet, so the voting members "
        "cannot be recorded there; membership changes wait";
    return false;
  }
  std::vector<std::string> target =
      VoterNames(obs, step.kind == StepKind::kPromote ? step.member_id : 0);
  if (target.empty()) {
    *why = "a voting member cannot be named yet; membership changes wait";
    return false;
  }
  // Compared with the record itself, not with what this agent last wrote: another leader may
  // have written since.
  auto stored = ReadLastVoters(*store_, config_.cluster.name);
  if (!stored.ok()) {
    *why = absl::StrCat("cannot read the voting members' record in the backup store (",
                        stored.status().message(), "); membership changes wait");
    return false;
  }
  if (stored->has_value() && **stored == target) {
    recorded_voters_ = target;
    return true;
  }
  if (absl::Status s =
          WriteLastVoters(*store_, config_.cluster.name, target, env_.clock->UnixSeconds());
      !s.ok()) {
    *why = absl::StrCat(
        "cannot record the voting members in the backup store before changing "
        "them (",
        s.message(), "); membership changes wait");
    return false;
  }
  recorded_voters_ = target;
  return true;
}

void Reconciler::RecordVoters(const ClusterObservation& obs) {
  if (store_ == nullptr || !obs.member_list_ok) return;
  std::vector<std::string> voters = VoterNames(obs);
  if (voters.empty() || voters == recorded_voters_) return;
  // The restore coordinator proves total loss against this record, so it is kept current; a
  // failed write is retried on the next pass.
  if (absl::Status s =
          WriteLastVoters(*store_, config_.cluster.name, voters, env_.clock->UnixSeconds());
      !s.ok()) {
    spdlog::warn("recording the voting members in the backup store: {}", s.message());
    return;
  }
  recorded_voters_ = voters;
}

void Reconciler::RecordRevision() {
  if (store_ == nullptr || max_revision_ <= 0) return;
  const auto now = env_.clock->Now();
  if (revision_recorded_at_ && now - *revision_recorded_at_ < kRevisionRecordInterval) return;
  if (max_revision_ <= recorded_revision_) {
    revision_recorded_at_ = now;
    return;
  }
  // Never lower the record: read it before writing (a cluster restored without a revision
  // bump serves lower revisions, and a restore raises the record itself, so the copy here
  // may be stale).
  auto stored = ReadHighestRevision(*store_, config_.cluster.name);
  if (!stored.ok()) return;
  recorded_revision_ = *stored;
  if (max_revision_ <= recorded_revision_) {
    revision_recorded_at_ = now;
    return;
  }
  // A restore raises the restored revision past this record (RevisionBump).
  if (absl::Status s = WriteHighestRevision(*store_, config_.cluster.name, max_revision_,
                                            env_.clock->UnixSeconds());
      !s.ok()) {
    spdlog::warn("recording the highest revision in the backup store: {}", s.message());
    return;
  }
  recorded_revision_ = max_revision_;
  revision_recorded_at_ = now;
}

absl::Status Reconciler::Act(const Step& step, uint64_t term) {
  peer::OrderHeader header;
  header.set_term(term);
  header.set_leader(config_.node.name);
  header.set_cluster_id(cluster_id_);
  switch (step.kind) {
    case StepKind::kRemoveMember: {
      absl::Status s = etcd_->MemberRemove(step.member_id);
      removed_ids_.insert(step.member_id);
      // A remove that timed out may have been applied; the next pass re-reads the list.
      return s;
    }
    case StepKind::kAddLearner: {
      std::string peer_url;
      for (const auto& n : config_.cluster.nodes) {
        if (n.name == step.node) peer_url = config_.PeerUrl(n);
      }
      // etcd derives a runtime-added member's ID from its peer URLs and the Unix second; an ID
      // that was just removed cannot come back ("member not found"). Wait past the second only
      // when this second would recreate a removed ID.
      auto now = env_.clock->WallNow();
      auto sec = std::chrono::floor<std::chrono::seconds>(now);
      uint64_t candidate =
          InitialMemberId({peer_url}, std::to_string(sec.time_since_epoch().count()));
      if (removed_ids_.count(candidate)) {
        env_.clock->SleepFor(
            std::chrono::duration_cast<milliseconds>(sec + milliseconds(1020) - now));
      }
      auto added = etcd_->MemberAdd({peer_url}, /*learner=*/true);
      if (!added.ok()) return added.status();
      spdlog::info("added learner {} for node {}", HexId(added->id), step.node);
      return absl::OkStatus();
    }
    case StepKind::kJoin: {
      peer::StartRequest req;
      *req.mutable_header() = header;
      for (const auto& [name, url] : step.initial_cluster) {
        auto* m = req.add_initial_cluster();
        m->set_name(name);
        m->set_peer_url(url);
      }
      req.set_token(config_.ClusterToken());
      req.set_version(step.version);
      absl::Status s = Agent(step.node).Join(req, kOrderTimeout);
      return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
    }
    case StepKind::kPromote:
      return etcd_->MemberPromote(step.member_id);
    case StepKind::kWipe:
      return Agent(step.node).Wipe(header, kWipeTimeout);
    case StepKind::kSwitchVersion: {
      peer::SwitchVersionRequest req;
      *req.mutable_header() = header;
      req.set_version(step.version);
      // A graceful stop (etcd.stop_timeout) and a start.
      return Agent(step.node).SwitchVersion(req, kWipeTimeout + config_.etcd.stop_timeout);
    }
    case StepKind::kRestart: {
      peer::RestartRequest req;
      *req.mutable_header() = header;
      req.set_id(step.restart_id);
      req.set_reason(step.reason);
      return Agent(step.node).Restart(req, kWipeTimeout + config_.etcd.stop_timeout);
    }
    case StepKind::kMoveLeader: {
      // Asked of the leader's own member (step.node), which hands over to step.member_id.
      std::string url;
      for (const auto& n : config_.cluster.nodes) {
        if (n.name == step.node) url = config_.ClientUrl(n);
      }
      absl::Status s = etcd_->MoveLeader(url, step.member_id, milliseconds(10000));
      Metrics::Global().Add("steward_leader_moves_total", 1,
                            {{"result", s.ok() ? "ok" : "failed"}});
      return s;
    }
    case StepKind::kNone:
    case StepKind::kWait:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void Reconciler::MaybeMoveLeader(const ClusterObservation& obs, Step& step, uint64_t term) {
  const auto now = env_.clock->Now();
  LeaderMoveView v;
  v.enabled = config_.cluster.move_leader_off_slow_disk;
  v.nodes = obs.nodes;
  v.members = obs.members;
  const MemberView* leader = nullptr;
  for (const auto& m : obs.members) {
    if (m.is_etcd_leader) leader = &m;
  }
  const NodeView* leader_node = nullptr;
  for (const auto& n : obs.nodes) {
    if (leader != nullptr && n.peer_url == leader->peer_url) leader_node = &n;
  }
  if (leader_node == nullptr || leader_node->disk_slow.empty()) {
    leader_slow_since_.reset();
  } else if (!leader_slow_since_ || leader_slow_since_->first != leader->id) {
    leader_slow_since_.emplace(leader->id, now);
  }
  if (leader_slow_since_) {
    v.leader_slow_for = std::chrono::duration_cast<milliseconds>(now - leader_slow_since_->second);
  }
  if (leader_moved_at_) {
    v.since_last_move = std::chrono::duration_cast<milliseconds>(now - *leader_moved_at_);
  }
  const LeaderMove move = DecideLeaderMove(v);
  if (move.reason.empty()) return;
  step.reason = absl::StrCat(step.reason, "; ", move.reason);
  if (move.to == 0) return;
  std::string leader_url;
  for (const auto& n : config_.cluster.nodes) {
    if (config_.PeerUrl(n) == leader->peer_url) leader_url = config_.ClientUrl(n);
  }
  if (confirm_leader_ && !confirm_leader_()) return;
  absl::Status s = etcd_->MoveLeader(leader_url, move.to, milliseconds(10000));
  Metrics::Global().Add("steward_leader_moves_total", 1, {{"result", s.ok() ? "ok" : "failed"}});
  leader_moved_at_ = now;  // a failed move waits out the quiet time too: no retry storm
  leader_slow_since_.reset();
  spdlog::warn("reconcile (term {}): {}{}", term, move.reason,
               s.ok() ? "" : absl::StrCat(" (failed: ", s.message(), ")"));
  Record(term, "move-leader", move.reason, s.ok() ? "ok" : absl::StrCat("failed: ", s.message()));
}

void Reconciler::MaybeDefrag(const ClusterObservation& obs, Step& step, uint64_t term) {
  const auto now = env_.clock->Now();
  DefragRuleView v;
  v.above_percent = config_.cluster.defrag_above_percent;
  v.min_size = config_.cluster.defrag_min_size;
  v.pause = config_.cluster.defrag_pause;
  v.nodes = obs.nodes;
  v.members = obs.members;
  v.leader_raft_index = obs.leader_raft_index;
  if (step.kind != StepKind::kNone) {
    v.busy = absl::StrCat("another step first (", step.reason, ")");
  } else if (!obs.cluster_paused.empty()) {
    v.busy = absl::StrCat("the cluster is paused ", obs.cluster_paused);
  }
  v.outside_window = OutsideWindow(config_.cluster.defrag_window, env_.clock->UnixSeconds());
  if (defrag_ended_at_)
    v.since_last = std::chrono::duration_cast<milliseconds>(now - *defrag_ended_at_);
  const DefragRuleDecision d = DecideDefrag(v);
  Metrics& metrics = Metrics::Global();
  metrics.Clear("steward_defrag_shortfall_bytes");
  if (d.shortfall > 0) {
    metrics.Set("steward_defrag_shortfall_bytes", static_cast<double>(d.shortfall),
                {{"member", d.name}});
  }
  if (d.kind == DefragRuleDecision::kNothing) {
    defrag_said_.clear();
    return;
  }
  if (step.kind == StepKind::kNone || step.kind == StepKind::kWait) {
    step.reason = step.reason.empty() ? d.reason : absl::StrCat(step.reason, "; ", d.reason);
  }
  if (d.kind == DefragRuleDecision::kWait) {
    // Said once per reason (the seconds of a pause change every pass).
    if (d.rule != "DR5" && d.reason != defrag_said_) {
      spdlog::info("reconcile (term {}): {}", term, d.reason);
      if (d.rule == "DR7") Record(term, "defrag-wait", d.reason, "not started");
      defrag_said_ = d.reason;
    }
    return;
  }
  std::string url;
  for (const auto& m : obs.members) {
    if (m.id != d.member) continue;
    for (const auto& n : config_.cluster.nodes) {
      if (config_.PeerUrl(n) == m.peer_url) url = config_.ClientUrl(n);
    }
  }
  if (url.empty() || (confirm_leader_ && !confirm_leader_())) return;
  if (d.kind == DefragRuleDecision::kMoveLeader) {
    absl::Status s = etcd_->MoveLeader(url, d.move_to, milliseconds(10000));
    metrics.Add("steward_leader_moves_total", 1, {{"result", s.ok() ? "ok" : "failed"}});
    spdlog::info("reconcile (term {}): {}{}", term, d.reason,
                 s.ok() ? "" : absl::StrCat(" (failed: ", s.message(), ")"));
    Record(term, "move-leader", d.reason, s.ok() ? "ok" : absl::StrCat("failed: ", s.message()));
    // A failed move waits out the pause before it is tried again.
    if (!s.ok()) defrag_ended_at_ = now;
    return;
  }
  int64_t before = 0;
  for (const auto& m : obs.members) {
    if (m.id == d.member) before = m.db_size;
  }
  spdlog::info("reconcile (term {}): {}", term, d.reason);
  const auto started = env_.clock->Now();
  absl::Status s = etcd_->Defragment(url, kDefragTimeout);
  const auto ended = env_.clock->Now();
  defrag_ended_at_ = ended;
  defrag_said_.clear();
  const double secs = std::chrono::duration<double>(ended - started).count();
  std::string result;
  if (s.ok()) {
    auto after = etcd_->Status(url, kObserveTimeout);
    result = absl::StrFormat("ok: %d MiB -> %s in %.1f s", before >> 20,
                             after.ok() ? absl::StrCat(after->db_size >> 20, " MiB") : "?", secs);
  } else {
    result = absl::StrFormat("failed after %.1f s: %s", secs, s.message());
  }
  metrics.Add("steward_defrags_total", 1, {{"result", s.ok() ? "ok" : "failed"}});
  metrics.Set("steward_defrag_last_seconds", secs, {{"member", d.name}});
  spdlog::log(s.ok() ? spdlog::level::info : spdlog::level::err,
              "reconcile (term {}): defragmented {}: {}", term, d.name, result);
  Record(term, "defrag", d.reason, result);
}

void Reconciler::ObserveDivergence(ClusterObservation& obs, uint64_t term) {
  obs.repair_diverged = config_.cluster.repair_diverged;
  // Only while every started member answers: one that does not cannot be compared, and
  // waiting on it would hold this pass (the last verdict stands meanwhile).
  bool all_answer = true;
  for (const auto& m : obs.members) all_answer = all_answer && (!m.started || m.healthy);
  if (all_answer) divergence_.Maybe(*etcd_);
  const auto& last = divergence_.last();
  if (!last) return;
  if (last->split) obs.hash_split = last->text;
  const std::map<std::string, std::string> diverged = divergence_.Diverged();
  for (auto& m : obs.members) {
    auto it = diverged.find(m.name);
    if (it == diverged.end()) continue;
    m.diverged = it->second;
    if (recorded_diverged_.insert(m.name).second) {
      spdlog::error("member {} holds data that differs from a majority's: hash check {}", m.name,
                    it->second);
      Record(term, "diverged", absl::StrCat("member ", m.name, ": hash check ", it->second),
             config_.cluster.repair_diverged ? "to be repaired" : "not repaired (repair off)");
    }
  }
  for (auto it = recorded_diverged_.begin(); it != recorded_diverged_.end();) {
    it = diverged.count(*it) != 0 ? std::next(it) : recorded_diverged_.erase(it);
  }
}

bool Reconciler::StillDiverged(const Step& step, const ClusterObservation& obs, std::string* why) {
  if (step.kind != StepKind::kRemoveMember) return true;
  const MemberView* target = nullptr;
  for (const auto& m : obs.members) {
    if (m.id == step.member_id) target = &m;
  }
  if (target == nullptr || target->diverged.empty()) return true;
  absl::StatusOr<HashVerdict> v = divergence_.CheckNow(*etcd_);
  if (!v.ok()) {
    *why = absl::StrCat("member ", target->name,
                        " was to be repaired, but the hash check right "
                        "before it failed: ",
                        v.status().message());
    return false;
  }
  if (v->majority && std::count(v->differing.begin(), v->differing.end(), target->name) != 0) {
    divergence_.Forget(target->name);  // its next incarnation starts clean
    return true;
  }
  *why = absl::StrCat("member ", target->name,
                      " was to be repaired, but the hash check right before it says: ", v->text);
  return false;
}

bool Reconciler::AgreeBeforeAdd(const Step& step, std::string* why) {
  // DV6: a learner copies the etcd leader's data, right or wrong: none is added, started or
  // promoted while the members' data does not agree (a wrong copy could make a wrong majority).
  const bool grows = step.kind == StepKind::kAddLearner || step.kind == StepKind::kJoin ||
                     step.kind == StepKind::kPromote;
  if (!grows || config_.cluster.hash_check_interval.count() == 0) return true;
  if (RuleOff("DV6")) return true;
  absl::StatusOr<HashVerdict> v = divergence_.CheckNow(*etcd_);
  if (!v.ok() || (v->differing.empty() && !v->split)) return true;
  *why = absl::StrCat(step.reason, "; but not while the members' data does not agree (hash check ",
                      v->text, "): a learner copies the etcd leader's, right or wrong");
  return false;
}

bool Reconciler::OthersHealthyBeforeRestart(const Step& step, std::string* why) {
  if (step.kind != StepKind::kRestart || RuleOff("RS6")) return true;
  // The plan's observation may be old by now (a slow pass, a paused process): look again.
  auto members = etcd_->LinearizableMemberList(nullptr);
  std::string problem;
  if (!members.ok())
    problem = absl::StrCat("the member list cannot be read: ", members.status().message());
  for (const auto& m : members.ok() ? *members : std::vector<MemberInfo>{}) {
    if (!problem.empty()) break;
    if (m.id == step.member_id) continue;
    if (m.is_learner) {
      problem = absl::StrCat("learner ", HexId(m.id), " is on its way");
      continue;
    }
    auto st = m.client_urls.empty()
                  ? absl::StatusOr<MemberStatus>(absl::UnavailableError("not started"))
                  : etcd_->Status(m.client_urls.front(), kObserveTimeout);
    if (!st.ok() || st->leader == 0) {
      problem = absl::StrCat("member ", m.name.empty() ? HexId(m.id) : m.name, " (", HexId(m.id),
                             ") does not answer with a leader now");
    }
  }
  if (problem.empty()) return true;
  *why = absl::StrCat(step.reason, "; but not now: ", problem);
  return false;
}

void Reconciler::Publish(const Step& step, uint64_t term, const std::string& error) {
  std::string line = step.reason;
  if (!error.empty()) line = absl::StrCat(line, " (failed: ", error, ")");
  if (!store_mismatch_.empty()) line = absl::StrCat(line, "; ", store_mismatch_);
  std::vector<std::string> notes;
  {
    MutexLock lock(&mu_);
    status_ = line;
    notes = node_notes_;
  }
  const std::string notes_key = absl::StrJoin(notes, "\n");
  // An unchanged report is rewritten every kReportRefresh, so a silent leader (its report
  // ages past that) can be told from an idle one.
  const int64_t now = env_.clock->UnixSeconds();
  if (line == published_ && notes_key == published_notes_ &&
      now - published_at_ < ReportRefreshSeconds(config_)) {
    return;
  }
  if (line != published_ && (step.kind == StepKind::kWait || step.kind == StepKind::kNone)) {
    if (step.kind == StepKind::kWait) spdlog::info("reconcile: {}", line);
    // Some reasons count seconds ("unhealthy for 12s"): the history gets a wait once per
    // reason, not once per second.
    std::string key = line;
    key.erase(
        std::remove_if(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; }),
        key.end());
    if (key != recorded_wait_) {
      recorded_wait_ = key;
      Record(term, StepKindName(step.kind), line, "");
    }
  }
  nlohmann::json j = {{"leader", config_.node.name},
                      {"term", term},
                      {"step", StepKindName(step.kind)},
                      {"detail", line},
                      {"at", now},
                      {"refresh", ReportRefreshSeconds(config_)}};
  if (!notes.empty()) j["nodes"] = notes;
  if (etcd_->Put(StatusKey(config_), j.dump()).ok()) {
    published_ = line;
    published_notes_ = notes_key;
    published_at_ = now;
  }
}

}  // namespace steward
