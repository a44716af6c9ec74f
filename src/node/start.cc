// How a node starts its etcd on its own: the start decision (DecideStart on GatherStartView,
// node/start_decision.h), the markers it keeps, and the node's control pass.
#include "absl/strings/str_cat.h"
#include "control/records.h"
#include "node/local_node.h"
#include "node/start_view.h"
#include "spdlog/spdlog.h"

namespace steward {
using std::chrono::milliseconds;

LocalNode::LocalNode(const Config& config, LocalNodeEnv env)
    : config_(config), env_(std::move(env)), disk_(*env_.disk), runner_(*env_.runner) {}

void LocalNode::Note(const std::string& msg) {
  MutexLock lock(&note_mu_);
  repeats_.Say(msg, env_.clock->Now(), [](const std::string& m) { spdlog::info("{}", m); });
}

// The version the runner's next binary reported: RenderEtcdFlags picks 3.4's logger by it.
static void SetVersion(const LocalNodeEnv& env, const std::string& binary, EtcdLaunch* l) {
  if (!env.binaries) return;
  for (const EtcdBinary& b : env.binaries()) {
    if (b.path == binary) l->version = b.reported;
  }
}

std::vector<std::string> LocalNode::PendingRestart() {
  const std::optional<std::vector<std::string>> running = runner_.running_flags();
  if (!running || !HasMemberData()) return {};
  EtcdLaunch l = LaunchForData();
  SetVersion(env_, runner_.binary(), &l);
  return PendingFlags(*running, RenderEtcdFlags(l));
}

bool LocalNode::RunEtcd(const EtcdLaunch& launch, bool on_data) {
  // Re-checked right before it acts: etcd given the launch for member data on an empty dir
  // would bootstrap the initial cluster anew (its flags say "new"), under this node's old
  // identity. The data may have gone since the decision (a wipe while fenced, an operator).
  if (on_data && !HasMemberData()) {
    spdlog::error(
        "not starting etcd on {}: it no longer holds the member's data; the leader "
        "replaces the member",
        disk_.DataDir());
    if (absl::Status s = runner_.Stop(); !s.ok()) spdlog::error("stopping etcd: {}", s.message());
    return false;
  }
  started_on_data_ = on_data;
  member_data_seen_ = false;
  log_offset_ = env_.etcd_log_size ? env_.etcd_log_size() : 0;
  restarts_at_run_ = runner_.restarts();
  EtcdLaunch l = launch;
  SetVersion(env_, runner_.binary(), &l);
  runner_.Run(RenderEtcdFlags(l));
  return true;
}

bool LocalNode::HasMemberData() { return disk_.State() == DataDirState::kMember; }

bool LocalNode::SetPartialDataAside() {
  if (disk_.State() != DataDirState::kPartial) return true;
  std::string dest;
  if (absl::Status s = disk_.SetPartialAside(&dest); !s.ok()) {
    spdlog::error("{}", s.message());
    return false;
  }
  spdlog::warn(
      "data dir {} held no WAL (a start or join that failed before etcd wrote one): "
      "moved to {}; this node now counts as empty",
      disk_.DataDir(), dest);
  return true;
}

bool LocalNode::EverJoined() {
  if (disk_.Has(Marker::kJoined)) return true;
  // The marker is written once the agent sees a leader, but a leader may have come and gone
  // unseen (the agent died first): the WAL's commit index tells. Past the initial members'
  // configuration entries, a majority accepted a leader's entries; returning empty under this
  // identity could then lose them. (Read only until the marker exists.)
  if (disk_.State() != DataDirState::kMember) return false;
  auto commit = disk_.WalCommit();
  if (!commit.ok() || !steward::EverJoined(false, *commit, config_.cluster.size)) return false;
  spdlog::info(
      "the WAL shows a leader committed entries (commit index {}): this member has "
      "been part of a running cluster",
      *commit);
  if (absl::Status s = disk_.Write(Marker::kJoined, "1"); !s.ok()) {
    spdlog::warn("{}", s.message());
  }
  return true;
}

bool LocalNode::Bootstrapping() { return !EverJoined() && disk_.Has(Marker::kInitialBootstrap); }

void LocalNode::MarkJoined() {
  if (join_started_.exchange(false)) {
    spdlog::info("etcd joined the cluster (it sees a leader)");
    Record("join", "etcd sees a leader", "joined");
  }
  if (EverJoined()) return;
  if (absl::Status s = disk_.Write(Marker::kJoined, "1"); !s.ok()) {
    spdlog::warn("{}", s.message());
  }
}

std::string LocalNode::EtcdExitReason() {
  const int restarts = runner_.restarts();
  if (restarts <= restarts_at_run_ || !env_.etcd_log_since) return "";
  MutexLock lock(&exit_mu_);
  if (exit_read_at_ != restarts) {
    exit_read_at_ = restarts;
    exit_reason_ = ExitReasonFromLog(env_.etcd_log_since(log_offset_));
  }
  return exit_reason_;
}

std::string LocalNode::FencedRestoreId() { return disk_.Read(Marker::kFenced); }

EtcdLaunch LocalNode::LaunchForData() {
  EtcdLaunch l = BootstrapLaunch(config_);
  l.data_dir = disk_.DataDir();
  if (!FencedRestoreId().empty()) l.client_url = config_.FenceUrl(config_.self());
  return l;
}

void LocalNode::AdoptRunning() {
  MutexLock lock(&mu_);
  // Keep the member serving; only record how to start it should it exit.
  RunEtcd(LaunchForData(), /*on_data=*/true);
  // Unless the cluster was destroyed: this node recorded it (and was stopped mid-way), or it
  // missed the order while its agent was down and its etcd ran on.
  std::optional<DestroyMark> mark;
  bool store_read = false;
  if (env_.store != nullptr) {
    if (auto m = ReadDestroyMark(*env_.store, config_.cluster.name); m.ok()) {
      mark = *m;
      store_read = true;
    }
  }
  const std::string recorded = disk_.Read(Marker::kDestroyed);
  if (!mark && !recorded.empty() && !store_read) {
    DestroyMark unknown;  // the store cannot say: stay stopped (SD1)
    unknown.id = recorded;
    mark = unknown;
  }
  if (mark) {
    if (absl::Status s = CarryOutDestroyLocked(*mark); !s.ok()) {
      spdlog::error("cluster {} is destroyed, but stopping etcd failed: {}", config_.cluster.name,
                    s.message());
    }
  }
}

bool LocalNode::MayRestart(std::string* why) {
  if (std::string id = disk_.Read(Marker::kDestroyed); !id.empty()) {
    *why = absl::StrCat("this node stopped its etcd for destroy ", id);
    return false;
  }
  if (DataLostUnderEtcd(true, started_on_data_, member_data_seen_, disk_.State())) {
    *why = absl::StrCat("the data dir ", disk_.DataDir(),
                        " of the member no longer holds its data; the leader replaces the member");
    member_data_seen_ = false;
    return false;
  }
  // RM3: a member removed from its cluster exits at once when started; restarting it forever
  // helps nobody. The control loop then waits (its start decision asks the same).
  if (disk_.State() == DataDirState::kMember) {
    if (auto id = disk_.Identity(); id.ok()) {
      if (std::string removed = MemberRemovedWhy(*env_.peers, *id); !removed.empty()) {
        *why = removed;
        return false;
      }
    }
  }
  return true;
}

StartView LocalNode::ObserveStart() {
  StartFacts facts{disk_.State(), EverJoined(), disk_.Read(Marker::kDestroyed), std::nullopt};
  if (facts.data == DataDirState::kMember) {
    if (auto id = disk_.Identity(); id.ok()) facts.identity = *id;
  }
  return GatherStartView(config_, facts, *env_.peers, env_.initial_agents, env_.store,
                         env_.parallel);
}

void LocalNode::MaybeStartEtcd() {
  const StartView view = ObserveStart();
  StartDecision d = DecideStart(view);
  switch (d.action) {
    case StartAction::kWait:
      Note(d.reason);
      return;
    case StartAction::kSetPartialAside:
      SetPartialDataAside();  // logs; the next pass decides on the empty dir
      return;
    case StartAction::kRecordDestroyed:
      if (absl::Status s = disk_.Write(Marker::kDestroyed, view.destroyed_id); !s.ok()) {
        Note(absl::StrCat("cannot record the destroy: ", s.message()));
      } else {
        spdlog::warn("{}: this node keeps its etcd stopped", d.reason);
      }
      return;
    case StartAction::kForgetDestroyed:
      if (absl::Status s = disk_.Remove(Marker::kDestroyed); !s.ok()) {
        Note(absl::StrCat("cannot drop the destroyed marker: ", s.message()));
      } else {
        spdlog::warn("{}: this node decides its start again", d.reason);
      }
      return;
    case StartAction::kStartOnData:
      spdlog::info("data dir {} holds a member; starting etcd{}", disk_.DataDir(),
                   FencedRestoreId().empty() ? "" : " (fenced: a restore is not settled yet)");
      RunEtcd(LaunchForData(), /*on_data=*/true);
      return;
    case StartAction::kBootstrap:
      break;
  }
  if (absl::Status s = disk_.Write(Marker::kInitialBootstrap, "1"); !s.ok()) {
    Note(absl::StrCat("not bootstrapping: recording it failed: ", s.message()));
    return;
  }
  spdlog::info("{}: starting etcd as a member of the initial cluster ({} members)", d.reason,
               config_.cluster.size);
  EtcdLaunch l = BootstrapLaunch(config_);
  l.data_dir = disk_.DataDir();
  RunEtcd(l, /*on_data=*/false);
}

void LocalNode::ControlPass() {
  if (!runner_.wanted() && !held_) {
    MutexLock lock(&mu_);
    member_data_seen_ = false;
    if (!runner_.wanted() && !held_) MaybeStartEtcd();
  }
  if (runner_.wanted() && disk_.State() == DataDirState::kMember) member_data_seen_ = true;
  if (DataLostUnderEtcd(runner_.wanted(), started_on_data_, member_data_seen_, disk_.State())) {
    MutexLock lock(&mu_);
    if (DataLostUnderEtcd(runner_.wanted(), started_on_data_, member_data_seen_, disk_.State())) {
      spdlog::error(
          "the data dir {} of the running member is gone; stopping etcd rather than "
          "restarting it on an empty dir under the old identity; the leader "
          "replaces the member",
          disk_.DataDir());
      if (absl::Status s = runner_.Stop(); !s.ok()) {
        spdlog::error("stopping etcd: {}", s.message());
      }
      member_data_seen_ = false;
    }
  }
  // "Joined" means the member has been part of a cluster with a leader, not merely started:
  // the bootstrap rule tells a bootstrap in progress from a cluster that existed by it.
  // (And after a join order, to record that it joined: the marker may be left from before.)
  if ((!EverJoined() || join_started_) && runner_.pid() && HasMemberData()) {
    auto st = env_.local->Status(config_.ClientUrl(config_.self()), milliseconds(300));
    if (st.ok() && st->leader != 0) MarkJoined();
  }
  // A fresh bootstrap that etcd refused (a peer says this member was bootstrapped before)
  // leaves a partial data dir, and restarting it with the same flags would fail forever:
  // stop, set the partial dir aside, and decide again (the cluster may now be answering).
  if (Bootstrapping() && runner_.wanted() && runner_.restarts() > 0 &&
      disk_.State() == DataDirState::kPartial) {
    MutexLock lock(&mu_);
    spdlog::warn("etcd refused the initial bootstrap (see {}); deciding again",
                 config_.EtcdLogPath());
    if (absl::Status s = runner_.Stop(); !s.ok()) {
      spdlog::error("stopping etcd: {}", s.message());
    } else if (SetPartialDataAside()) {
      if (absl::Status r = disk_.Remove(Marker::kInitialBootstrap); !r.ok()) {
        spdlog::warn("{}", r.message());
      }
    }
  }
  // Likewise a join etcd refused (the member entry it was to take is gone, or started and then
  // wiped before this agent saw its data): etcd is down between restarts on a dir without a
  // WAL, which it cannot start on with the join's flags. The dir holds nothing acknowledged
  // (no WAL): set it aside, so the node reports empty and the leader adds it afresh, rather
  // than wait for a node that never comes back empty. (Found by the simulation, 3 nodes.)
  const auto failed_join = [this] {
    return !Bootstrapping() && !started_on_data_ && runner_.wanted() && !runner_.pid() &&
           runner_.restarts() > 0 && disk_.State() == DataDirState::kPartial;
  };
  // (Again under the lock: an order that ran meanwhile may have started etcd afresh.)
  if (failed_join()) {
    MutexLock lock(&mu_);
    if (failed_join()) {
      std::string reason = EtcdExitReason();
      if (reason.empty()) reason = "etcd exited and left no WAL";
      (void)JoinRefused(reason, "the leader");  // logs and records it; the node waits empty
    }
  }
  // Joined: the refusals before are over.
  if (mu_.TryLock()) {
    MutexLock lock(&mu_, std::adopt_lock);
    if (join_failures_ > 0 && runner_.pid() && HasMemberData() && EverJoined()) {
      spdlog::info("etcd joined after {} refused join(s)", join_failures_);
      join_failures_ = 0;
      join_error_.clear();
    }
  }
  if (!FencedRestoreId().empty()) MaybeUnfenceSelf();
}

std::string LocalNode::Fingerprint() {
  const auto pid = runner_.pid();
  return absl::StrCat(runner_.wanted(), "/", pid.value_or(0), "/", runner_.restarts(), "/",
                      HasMemberData(), "/", EverJoined(), "/", Bootstrapping(), "/",
                      FencedRestoreId(), "/", held_.load());
}

bool LocalNode::Settled() {
  if (!mu_.TryLock()) return false;  // an order or a start decision is under way
  MutexLock lock(&mu_, std::adopt_lock);
  return runner_.wanted() && runner_.pid().has_value() && !held_ && EverJoined() &&
         !Bootstrapping() && FencedRestoreId().empty() && HasMemberData();
}

std::string LocalNode::HangBusy() {
  {
    MutexLock lock(&restore_mu_);
    if (!restoring_.empty()) return absl::StrCat("it is being restored (", restoring_, ")");
  }
  if (held_) return "the leader holds it stopped";
  if (join_started_) return "it is joining the cluster";
  if (Bootstrapping()) return "it is bootstrapping the cluster";
  if (const std::string fenced = FencedRestoreId(); !fenced.empty()) {
    return absl::StrCat("it serves only behind the fence of restore ", fenced);
  }
  // An order or a start decision holds mu_ (a join, a restore's apply, a version switch).
  if (!mu_.TryLock()) return "an order is under way";
  mu_.Unlock();
  return "";
}

void LocalNode::SetDiskLatency(const DiskLatency& d) {
  MutexLock lock(&hang_mu_);
  disk_latency_ = d;
}

void LocalNode::SetHang(std::string verdict, int restarts) {
  MutexLock lock(&hang_mu_);
  hang_ = std::move(verdict);
  hang_restarts_ = restarts;
}

void LocalNode::MaybeUnfenceSelf() {
  if (env_.store == nullptr) return;
  auto intent = ReadRestoreIntent(*env_.store, config_.cluster.name);
  if (!intent.ok() || !intent->has_value()) return;
  const RestoreIntent& r = **intent;
  if (!r.settled && !r.done) return;
  MutexLock lock(&mu_);
  if (FencedRestoreId() != r.id) return;
  if (absl::Status s = UnfenceLocked(r.id); !s.ok()) {
    Note(absl::StrCat("cannot drop the fence of restore ", r.id, ": ", s.message()));
  }
}

}  // namespace steward
