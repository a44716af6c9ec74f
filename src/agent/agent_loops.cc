// The agent's loops (control, leadership, reconcile) and the admin port's answers; its wiring,
// start and shutdown are in agent.cc.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin/readiness.h"
#include "agent/agent.h"
#include "common/memory_trim.h"
#include "common/metrics.h"
#include "common/status.h"
#include "etcd/members_bucket.h"
#include "pki/node_certs.h"
#include "pki/pki.h"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

namespace {

// A loop says it is alive (NotAlive reads the beats).
void Beat(std::atomic<int64_t>& beat) {
  beat = std::chrono::steady_clock::now().time_since_epoch().count();
}

}  // namespace

bool Agent::SleepFor(milliseconds d) {
  MutexLock lock(&mu_);
  cv_.WaitFor(&mu_, d, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
  return !stopping_;
}

void Agent::WakeReconciler() {
  {
    MutexLock lock(&mu_);
    nudged_ = true;
  }
  cv_.NotifyAll();
}

bool Agent::NudgeLeader() {
  const std::string leader = SeenLeader();
  if (leader.empty()) return false;
  if (leader == config_.node.name) {
    WakeReconciler();
    return true;
  }
  auto it = agents_.find(leader);
  if (it == agents_.end()) return true;
  // Best effort: a leader that does not hear it is likely gone, and its successor passes as
  // soon as it is elected; otherwise its next idle pass finds the change.
  if (absl::Status s = it->second->Nudge(config_.node.name, milliseconds(500)); !s.ok()) {
    spdlog::debug("nudging the leader {}: {}", leader, s.message());
  }
  return true;
}

// The control loop's clocks and what it carries from one round to the next.
struct Agent::ControlTimes {
  explicit ControlTimes(const Config& config)
      : started(std::chrono::steady_clock::now()),
        next_restore_pass(started),
        // Check often enough that even short test lifetimes are renewed in time.
        tls_check_every(
            std::min<milliseconds>(std::chrono::minutes(1), config.tls.cert_lifetime / 20)),
        next_tls_check(started + tls_check_every),
        next_off_warning(started + std::chrono::hours(1)),
        // Settled and idle, the agent gives back the pages it touched only while starting or
        // while working (common/memory_trim.h): first a minute after start, then hourly.
        next_memory_release(started + std::chrono::minutes(1)),
        next_members_check(started + std::chrono::minutes(1)),
        tls_renewer(config) {}
  const std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point next_restore_pass;
  const milliseconds tls_check_every;
  std::chrono::steady_clock::time_point next_tls_check, next_off_warning, next_memory_release,
      next_members_check;
  std::string members_seen;  // the last check's disagreements, joined ("" none)
  NodeTlsRenewer tls_renewer;
  std::string fingerprint;
  bool was_quorum_up = false;
  bool released_once = false;
};

void Agent::MaybeRenewTls(ControlTimes& t) {
  // stewardctl pki renew: as if two-thirds of every lifetime had passed.
  const bool forced = renew_requested_.exchange(false);
  if (config_.tls.mode != "issued" ||
      (!forced && std::chrono::steady_clock::now() < t.next_tls_check)) {
    return;
  }
  // etcd reads its certificate files on every handshake: renewed files apply at once.
  const auto now = std::chrono::system_clock::now();
  auto renewed =
      forced ? RenewNodeTls(config_, now + config_.tls.cert_lifetime) : t.tls_renewer.Check(now);
  if (!renewed.ok()) {
    spdlog::error("renewing certificates: {}", renewed.status().message());
  } else if (*renewed) {
    // etcd picks the new files up on its next handshakes; the agent's own channels hold
    // the old ones, so the agent restarts itself (etcd keeps running and is adopted).
    spdlog::info("renewed this node's certificates ({}); restarting the agent to load them",
                 forced ? "stewardctl pki renew asked" : "two-thirds of their lifetime had passed");
    ::kill(::getpid(), SIGHUP);
  }
  t.next_tls_check = std::chrono::steady_clock::now() + t.tls_check_every;
}

void Agent::MaybeRestorePass(ControlTimes& t, bool quorum_up) {
  // The quorum just stopped answering: a restore may be due now, not at the next idle pass.
  if (t.was_quorum_up && !quorum_up) t.next_restore_pass = std::chrono::steady_clock::now();
  t.was_quorum_up = quorum_up;
  // Restores (after total loss, or on command) are coordinated without etcd.
  if (!restorer_ || std::chrono::steady_clock::now() < t.next_restore_pass) return;
  // With a quorum up and no restore intent in the store, the pass could only decide
  // "nothing" (an etcd member answers): skip asking every agent for its state.
  if (!quorum_up || restorer_->RestorePending()) restorer_->Pass();
  // Agents restarted after a total loss come up within moments of each other: ask again
  // soon while this node is fresh and holds nothing, so the restore starts as soon as a
  // majority answers, without polling the store this often for good.
  const bool fresh = std::chrono::steady_clock::now() - t.started < std::chrono::seconds(30);
  t.next_restore_pass = std::chrono::steady_clock::now() +
                        (quorum_up && !restorer_->RestorePending()
                             ? config_.cluster.idle_interval
                             : milliseconds(fresh && !node_->HasMemberData() ? 250 : 1000));
}

void Agent::MaybeReleaseMemory(ControlTimes& t, bool quorum_up) {
  if (!quorum_up || !node_->Settled() || std::chrono::steady_clock::now() < t.next_memory_release) {
    return;
  }
  const std::string what = Describe(ReleaseIdleMemory());
  if (t.released_once) {
    spdlog::debug("idle: {}", what);
  } else {
    spdlog::info("idle: {}", what);
  }
  t.released_once = true;
  t.next_memory_release = std::chrono::steady_clock::now() + std::chrono::hours(1);
}

void Agent::MaybeCheckMembers(ControlTimes& t, bool quorum_up) {
  if (!quorum_up || std::chrono::steady_clock::now() < t.next_members_check) return;
  t.next_members_check = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  const std::string db = disk_->DataDir() + "/member/snap/db";
  auto live = local_client_->MemberList(nullptr);
  if (!live.ok()) return;
  // Read while etcd writes: a page it reused meanwhile reads as damage. Such a read says
  // nothing; and a difference counts only when the next check sees the same.
  auto in_db = ReadMembersBucket(db);
  if (!in_db.ok()) {
    spdlog::debug("members bucket of {}: {}", db, in_db.status().message());
    return;
  }
  const std::string now = absl::StrJoin(MembershipDisagreements(*in_db, *live), "; ");
  const bool confirmed = !now.empty() && now == t.members_seen;
  t.members_seen = now;
  if (now.empty()) Metrics::Global().Set("steward_etcd_membership_mismatch", 0);
  if (!confirmed) return;
  Metrics::Global().Set("steward_etcd_membership_mismatch", 1);
  spdlog::warn(
      "etcd's members bucket in {} disagrees with the member list: {}. etcd 3.6 refuses to start "
      "on such data; fix it before a roll to 3.6 (docs/etcd-versions.md: etcdutl check/sync "
      "members on 3.5.26+, or remove and re-add the member)",
      db, now);
}

milliseconds Agent::ControlPause(const ControlTimes& t, bool quorum_up) {
  // Settled, the loop sleeps until the data dir changes (a wipe is noticed at once) or the
  // idle interval passes; otherwise it looks four times a second.
  milliseconds pause(250);
  if (!quorum_up || !node_->Settled()) return pause;
  pause = config_.cluster.idle_interval;
  if (restorer_) {
    pause = std::min(pause, std::chrono::duration_cast<milliseconds>(
                                t.next_restore_pass - std::chrono::steady_clock::now()));
  }
  if (config_.tls.mode == "issued") {
    pause = std::min(pause, std::chrono::duration_cast<milliseconds>(
                                t.next_tls_check - std::chrono::steady_clock::now()));
  }
  return std::max(pause, milliseconds(250));
}

void Agent::ControlLoop() {
  ControlTimes t(config_);
  const std::string etcd_dir = disk_->DataDir();
  do {
    Beat(control_beat_);
    if (std::chrono::steady_clock::now() >= t.next_off_warning) {
      if (!config_.tls.enabled()) spdlog::warn("TLS is OFF (tls.mode: off)");
      t.next_off_warning += std::chrono::hours(1);
    }
    MaybeRenewTls(t);
    node_->ControlPass();
    // What the leader would read from this node changed: tell it, rather than have it poll.
    // Until this agent knows a leader the news waits (the leadership loop wakes this loop when
    // it learns one): dropped, it would wait for the leader's idle pass, up to
    // cluster.idle_interval (bench/replace saw heals of 2.8-4.2 s instead of ~0.45 s).
    if (std::string now = node_->Fingerprint(); now != t.fingerprint && NudgeLeader()) {
      t.fingerprint = std::move(now);
    }
    // etcd answered the leadership loop lately: a quorum is up, and no automatic restore can
    // be due. Only a restore ordered from stewardctl can, and that may wait a few seconds.
    const bool quorum_up = leadership_->Answering();
    MaybeRestorePass(t, quorum_up);
    MaybeReleaseMemory(t, quorum_up);
    MaybeCheckMembers(t, quorum_up);
    // The member-data check reads member/wal: a wipe of any of these wakes the loop.
    control_wake_.Watch({config_.node.data_dir, etcd_dir, etcd_dir + "/member",
                         etcd_dir + "/member/wal", etcd_dir + "/member/snap"});
    control_wake_.Wait(ControlPause(t, quorum_up));
  } while (!Stopping());
}

std::optional<std::string> Agent::NotAlive() {
  // A loop that has not come round for this long is stuck. The control and reconcile loops
  // carry restores and membership steps, which take a while: they get longer.
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::pair<const char*, std::pair<const std::atomic<int64_t>*, std::chrono::seconds>>
      loops[] = {{"leadership", {&leadership_beat_, std::chrono::seconds(30)}},
                 {"control", {&control_beat_, std::chrono::seconds(300)}},
                 {"reconcile", {&reconcile_beat_, std::chrono::seconds(300)}}};
  for (const auto& [name, loop] : loops) {
    const int64_t last = loop.first->load();
    const auto age = std::chrono::nanoseconds(now - last);
    if (last == 0 || age > loop.second) {
      return absl::StrCat("the ", name, " loop has not run for ",
                          std::chrono::duration_cast<std::chrono::seconds>(age).count(), "s");
    }
  }
  return std::nullopt;
}

std::optional<std::string> Agent::NotReady() {
  const peer::NodeState state = node_->State();
  ReadyView v;
  v.etcd_running = state.etcd_running();
  v.fenced = state.fenced();
  auto st = local_client_->Status(config_.ClientUrl(config_.self()), milliseconds(1000));
  v.status_ok = st.ok();
  if (st.ok()) {
    v.has_leader = st->leader != 0;
    v.is_learner = st->is_learner;
    v.raft_index = st->raft_index;
    v.raft_applied_index = st->raft_applied_index;
    for (const auto& e : st->errors) {
      if (e.find("alarm:") == std::string::npos) v.errors.push_back(e);
    }
  } else {
    v.status_error = std::string(st.status().message());
  }
  return steward::NotReady(v);
}

std::string Agent::ScrapeMetrics() {
  Metrics& m = Metrics::Global();
  m.Set("steward_build_info", 1, {{"version", STEWARD_VERSION}});
  const bool leading = leading_.load();
  m.Set("steward_is_leader", leading ? 1 : 0);
  if (!leading) {
    // Only the leader observes the cluster: a former leader's counts would go stale.
    for (const char* name : {"steward_members_desired", "steward_members_voting",
                             "steward_members_learner", "steward_members_healthy"}) {
      m.Clear(name);
    }
  }
  m.Set("steward_etcd_running", runner_->pid().has_value() ? 1 : 0);
  m.Set("steward_etcd_restarts_total", runner_->restarts());
  if (auto st = local_client_->Status(config_.ClientUrl(config_.self()), milliseconds(1000));
      st.ok()) {
    m.Set("steward_member_raft_index", static_cast<double>(st->raft_index));
    m.Set("steward_member_db_size_bytes", static_cast<double>(st->db_size));
    m.Set("steward_member_is_learner", st->is_learner ? 1 : 0);
    m.Set("steward_member_has_leader", st->leader != 0 ? 1 : 0);
    int alarms = 0;
    for (const auto& e : st->errors) alarms += e.find("alarm:") != std::string::npos ? 1 : 0;
    m.Set("steward_alarms_active", alarms);
  } else {
    // No stale figures from an etcd that no longer answers.
    for (const char* name : {"steward_member_raft_index", "steward_member_db_size_bytes",
                             "steward_member_is_learner", "steward_alarms_active"}) {
      m.Clear(name);
    }
    m.Set("steward_member_has_leader", 0);
  }
  for (const CertExpiry& cert : NodeCertExpiries(config_)) {
    m.Set("steward_certificate_expiry_timestamp_seconds", static_cast<double>(cert.not_after),
          {{"cert", cert.role}});
  }
  return m.Render();
}

std::string Agent::SeenLeader() {
  MutexLock lock(&seen_leader_mu_);
  return seen_leader_;
}

void Agent::LeadershipLoop() {
  // The leader renews its lease three times per TTL. A follower reads the key, then waits on a
  // watch of it: a dead leader's key expires after the TTL and is taken at once. Without a
  // watch it reads twice per TTL.
  const auto ttl = std::chrono::duration_cast<milliseconds>(config_.cluster.leader_lease_ttl);
  // (At most 10 s, as every pause here: /healthz calls a leadership loop silent for 30 s stuck.)
  constexpr milliseconds kFollowerLookEvery(10000);
  milliseconds period(0);
  while (!Stopping()) {
    Beat(leadership_beat_);
    const bool was_leading = leading_.load();
    leadership_->Tick();
    leading_ = leadership_->leading();
    if (leading_ && !was_leading) WakeReconciler();
    period = std::clamp(leading_ ? ttl / 3 : ttl / 2, milliseconds(300), milliseconds(10000));
    {
      MutexLock lock(&seen_leader_mu_);
      std::string leader = leadership_->leader();
      // A leader known at last: news the control loop kept for it goes out now.
      if (seen_leader_.empty() && !leader.empty()) control_wake_.Wake();
      seen_leader_ = std::move(leader);
    }
    // A follower waits on a watch of the leader key (a freed key wakes it at once) and looks
    // again at least every 10 s; it polls only when it has no watch.
    if (!leading_ && leadership_->WaitForChange(kFollowerLookEvery)) continue;
    SleepFor(period);
  }
}

bool Agent::ActsForSpaceWithoutLeader() {
  if (!leadership_->leader().empty() || leadership_->leading()) return false;
  for (const auto& [name, client] : agents_) {
    if (name >= config_.node.name) continue;
    if (client->GetState(milliseconds(500)).ok()) return false;  // theirs to do
  }
  return true;
}

void Agent::ReconcileLoop() {
  while (SleepFor(milliseconds(0))) {
    Beat(reconcile_beat_);
    bool progress = false;
    const bool leading = leadership_->leading();
    if (leading) progress = reconciler_->Pass(leadership_->term());
    if (leading && config_.cluster.recover_nospace && space_->Pass(leadership_->term())) {
      progress = true;
    }
    if (leading && auth_ != nullptr && auth_->Pass(leadership_->term())) progress = true;
    // S6: NOSPACE refuses the lease a new leader needs, so with no leader nobody else could
    // clear it.
    if (!leading && config_.cluster.recover_nospace && ActsForSpaceWithoutLeader() &&
        space_->Pass(0)) {
      progress = true;
    }
    // Settled (or not leading: winning the leadership wakes this loop), pass again after the
    // idle interval or when a node nudges; otherwise soon.
    auto pause = config_.cluster.reconcile_interval;
    if (!leading || reconciler_->settled()) pause = config_.cluster.idle_interval;
    if (reconciler_->in_progress()) pause = std::min(pause, milliseconds(100));
    if (progress) continue;
    MutexLock lock(&mu_);
    cv_.WaitFor(&mu_, pause,
                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || nudged_; });
    nudged_ = false;
  }
}

}  // namespace steward
