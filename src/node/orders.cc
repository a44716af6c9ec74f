// The leader's orders as this node carries them out (the peer server has admitted them:
// AdmitOrder), and the state it reports: join, stop, wipe (DecideWipe), unfence.
#include "absl/strings/str_cat.h"
#include "common/rules.h"
#include "control/destroy.h"
#include "etcd/member_id.h"
#include "node/local_node.h"
#include "peer/admission.h"
#include "pki/ca_rotation.h"
#include "pki/pki.h"
#include "spdlog/spdlog.h"

namespace steward {
using std::chrono::milliseconds;

void LocalNode::AddCertificatesLocked(peer::NodeState* s) {
  const auto now = env_.clock->Now();
  if (!certs_read_at_ || now - *certs_read_at_ >= std::chrono::minutes(1)) {
    certs_ = NodeCertExpiries(config_);
    certs_read_at_ = now;
  }
  for (const CertExpiry& c : certs_) {
    peer::CertificateExpiry* out = s->add_certificates();
    out->set_role(c.role);
    out->set_not_after(c.not_after);
  }
}

peer::NodeState LocalNode::State() {
  peer::NodeState s;
  s.set_node_name(config_.node.name);
  s.set_agent_version(STEWARD_VERSION);
  auto pid = runner_.pid();
  s.set_etcd_running(runner_.wanted() || pid.has_value());
  s.set_etcd_pid(pid.value_or(0));
  s.set_etcd_restarts(runner_.restarts());
  s.set_has_data(HasMemberData());
  s.set_fenced(!FencedRestoreId().empty());
  // etcdutl raises a restore's revision, and so does the in-place edit (which without
  // etcdutl must then succeed: node_restore.cc checks it before stopping etcd, and reports a
  // backup it refused in bump_refused).
  s.set_can_bump_revision(!config_.etcd.etcdutl.empty() || config_.etcd.restore_in_place);
  s.set_ever_joined(EverJoined());
  s.set_bootstrapping(Bootstrapping());
  s.set_restore_id(disk_.Read(Marker::kRestoreId));
  s.set_switched_version(disk_.Read(Marker::kEtcdVersion));
  if (env_.binaries) {
    for (const EtcdBinary& b : env_.binaries()) {
      peer::EtcdBinary* out = s.add_binaries();
      out->set_key(b.key);
      out->set_path(b.path);
      out->set_reported(b.reported);
      out->set_error(b.error);
    }
  }
  s.set_etcd_exit(EtcdExitReason());
  {
    MutexLock lock(&hang_mu_);
    s.set_hang(hang_);
    s.set_hang_restarts(hang_restarts_);
    s.set_wal_fsync_p99_ms(disk_latency_.wal_fsync_p99_ms.value_or(-1));
    s.set_backend_commit_p99_ms(disk_latency_.backend_commit_p99_ms.value_or(-1));
    s.set_disk_slow(SlowDiskNote(disk_latency_));
  }
  if (env_.data_free_bytes) {
    if (const int64_t free = env_.data_free_bytes(); free >= 0) s.set_data_free_bytes(free);
  }
  s.set_destroyed(disk_.Read(Marker::kDestroyed));
  s.set_restarted_for(disk_.Read(Marker::kRestartedFor));
  for (std::string& flag : PendingRestart()) s.add_pending_restart(std::move(flag));
  if (config_.tls.enabled()) {
    MutexLock lock(&client_user_mu_);
    if (client_user_.empty()) {
      if (auto info = ReadCert(config_.Tls().client_cert); info.ok()) {
        client_user_ = info->common_name;
      }
    }
    s.set_client_user(client_user_);
    AddCertificatesLocked(&s);
    if (auto r = ReadCaRotation(config_); r.ok() && r->has_value()) {
      s.set_ca_rotation(absl::StrCat((*r)->id, " phase ", (*r)->phase));
    }
  }
  {
    MutexLock lock(&restore_mu_);
    s.set_restore_error(restore_error_);
    s.set_bump_refused(bump_refused_id_);
    s.set_restoring(restoring_);
  }
  if (mu_.TryLock()) {
    MutexLock lock(&mu_, std::adopt_lock);
    s.set_join_error(join_error_);
    s.set_join_failures(join_failures_);
    if (join_failures_ > 0) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(join_retry_at_ - env_.clock->Now());
      s.set_join_retry_ms(std::max<int64_t>(0, left.count()));
    }
  }
  if (s.has_data()) {
    if (auto id = disk_.Identity(); id.ok()) {
      s.set_member_id(id->member_id);
      s.set_cluster_id(id->cluster_id);
    }
  }
  // The leader asks every pass: mark "joined" as soon as a leader is seen, not only on the
  // control loop's next round. Only then is etcd asked: a settled cluster's leader asks every
  // agent every idle pass, and the answer would change nothing.
  if (pid && s.has_data() && (!s.ever_joined() || join_started_) && !s.fenced()) {
    auto st = env_.local->Status(config_.ClientUrl(config_.self()), milliseconds(300));
    if (st.ok() && st->leader != 0) {
      MarkJoined();
      s.set_ever_joined(true);
      s.set_bootstrapping(false);
    }
  }
  return s;
}

absl::Status LocalNode::RefuseWhileDestroyed(const char* what) {
  const std::string id = disk_.Read(Marker::kDestroyed);
  if (id.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to ", what, ": node ", config_.node.name,
                   " stopped its etcd for destroy ", id, " (stewardctl undestroy ends it)"));
}

absl::Status LocalNode::Join(const peer::StartRequest& req) {
  MutexLock lock(&mu_);
  if (absl::Status s = RefuseWhileDestroyed("join"); !s.ok()) return s;
  if (!runner_.wanted() && !SetPartialDataAside()) {
    return absl::InternalError("a partial data dir could not be set aside");
  }
  if (HasMemberData()) {
    return absl::AlreadyExistsError("the data dir already holds a member; wipe it first");
  }
  if (runner_.wanted()) return absl::OkStatus();  // already starting from an earlier order
  // After a refused join, the next ones wait out a backoff: etcd is not launched several
  // times a second for a reason that has not changed.
  if (join_failures_ > 0 && env_.clock->Now() < join_retry_at_) {
    return absl::FailedPreconditionError(absl::StrCat("etcd refused the join: ", join_error_));
  }
  // EV1-EV2: the binary for the version the cluster runs, or no etcd at all.
  if (!req.version().empty() && env_.binaries && !RuleOff("EV1")) {
    const std::vector<EtcdBinary> binaries = env_.binaries();
    if (!binaries.empty()) {
      const EtcdBinary* b = PickBinary(binaries, req.version());
      if (b == nullptr) {
        const std::string why = NoBinaryFor(config_.node.name, req.version(), binaries);
        Note(absl::StrCat("not joining: ", why));
        return absl::FailedPreconditionError(why);
      }
      if (absl::Status s = UseBinary(*b); !s.ok()) return s;
    }
  }
  EtcdLaunch l = BootstrapLaunch(config_);
  l.data_dir = disk_.DataDir();
  l.initial_cluster.clear();
  for (const auto& m : req.initial_cluster())
    l.initial_cluster.emplace_back(m.name(), m.peer_url());
  l.token = req.token();
  l.new_cluster = false;
  held_ = false;
  // A fence left from a restore whose data this node lost: the member it joins as is the live
  // cluster's (a leader orders joins only from a cluster that serves), and with the marker
  // its etcd would start on the fence port for good once that restore was replaced.
  if (const std::string fence = disk_.Read(Marker::kFenced); !fence.empty()) {
    if (absl::Status s = disk_.Remove(Marker::kFenced); !s.ok()) {
      return Annotate(s, "dropping the fence of a restore this node no longer holds");
    }
    spdlog::info(
        "dropped the fence of restore {}: its data is gone, and this node joins the "
        "live cluster",
        fence);
  }
  spdlog::info("joining the cluster as an existing member{} (order of {}, term {})",
               req.version().empty() ? "" : absl::StrCat(" on etcd ", req.version()),
               req.header().leader(), req.header().term());
  const int exits_before = runner_.restarts();
  RunEtcd(l, /*on_data=*/false);
  // etcd refuses a join at once (another version, a member count it does not expect, a port
  // taken, a certificate): watch it briefly, so the refusal is the order's answer.
  const std::string on = req.version().empty() ? "" : absl::StrCat(" on etcd ", req.version());
  const auto until = env_.clock->Now() + env_.join_watch;
  while (env_.clock->Now() < until) {
    if (runner_.restarts() > exits_before) {
      std::string reason = EtcdExitReason();
      if (reason.empty()) reason = "etcd exited at once and its log says nothing more";
      return JoinRefused(reason, req.header().leader());
    }
    if (runner_.pid() && HasMemberData()) {  // a small cluster's learner joins within the watch
      auto st = env_.local->Status(config_.ClientUrl(config_.self()), milliseconds(300));
      if (st.ok() && st->leader != 0) {
        Record("join", absl::StrCat("order of ", req.header().leader()), "joined" + on);
        MarkJoined();
        return absl::OkStatus();
      }
    }
    env_.clock->SleepFor(milliseconds(50));
  }
  join_started_ = true;
  Record("join", absl::StrCat("order of ", req.header().leader()),
         absl::StrCat("started", on, "; joined once it sees a leader"));
  return absl::OkStatus();
}

absl::Status LocalNode::UseBinary(const EtcdBinary& b) {
  absl::Status s =
      b.key.empty() ? disk_.Remove(Marker::kEtcdVersion) : disk_.Write(Marker::kEtcdVersion, b.key);
  if (!s.ok()) return Annotate(s, "recording the etcd version to run");
  runner_.SetBinary(b.path);
  return absl::OkStatus();
}

absl::Status LocalNode::JoinRefused(const std::string& reason, const std::string& leader) {
  if (absl::Status s = runner_.Stop(); !s.ok()) spdlog::error("stopping etcd: {}", s.message());
  SetPartialDataAside();
  const bool again = join_failures_ > 0 && reason == join_error_;
  join_failures_ = again ? join_failures_ + 1 : 1;
  join_error_ = reason;
  join_started_ = false;
  // 2 s, 4 s, ... at most a minute between launches.
  const int shift = std::min(join_failures_ - 1, 5);
  const auto wait = std::min(milliseconds(2000LL << shift), milliseconds(60000));
  join_retry_at_ = env_.clock->Now() + wait;
  if (!again) {
    spdlog::warn("etcd refused the join (order of {}): {} (see {}); the next join waits {}s",
                 leader, reason, config_.EtcdLogPath(), wait.count() / 1000);
    Record("join", absl::StrCat("order of ", leader), absl::StrCat("failed: ", reason));
  } else if ((join_failures_ & (join_failures_ - 1)) == 0) {  // 2, 4, 8...: once in a while
    spdlog::warn("etcd refused the join {} times in a row: {}", join_failures_, reason);
  }
  return absl::FailedPreconditionError(absl::StrCat("etcd refused the join: ", reason));
}

void LocalNode::Record(const std::string& action, const std::string& reason,
                       const std::string& result) {
  if (env_.record) env_.record(action, reason, result);
}

absl::Status LocalNode::StopEtcd() {
  MutexLock lock(&mu_);
  held_ = true;
  spdlog::info("stopping etcd on the leader's order; it stays stopped until the next order");
  return runner_.Stop();
}

absl::Status LocalNode::Wipe(const peer::OrderHeader& header) {
  MutexLock lock(&mu_);
  WipeView v;
  v.has_member_data = HasMemberData();
  auto id = v.has_member_data ? disk_.Identity()
                              : absl::StatusOr<WalIdentity>(absl::NotFoundError("no data"));
  if (id.ok()) {
    v.member_id = id->member_id;
  } else {
    v.identity_error = std::string(id.status().message());
  }
  if (v.has_member_data && id.ok()) {
    // Ask the other members, not our own etcd: an expelled member may still list itself.
    auto members = env_.peers->LinearizableMemberList(&v.list_cluster_id);
    v.list_ok = members.ok();
    if (members.ok()) {
      for (const auto& m : *members) v.member_ids.push_back(m.id);
    } else {
      v.list_error = std::string(members.status().message());
    }
  }
  v.leader_cluster_id = header.cluster_id();
  WipeDecision d = DecideWipe(v);
  if (d.action != WipeAction::kSetAside) {
    if (d.action == WipeAction::kRefuse) {
      spdlog::warn("refusing the wipe order of {} ({}): {}", header.leader(), d.rule,
                   d.status.message());
    }
    return d.status;
  }
  held_ = true;
  if (absl::Status s = runner_.Stop(); !s.ok()) {
    held_ = false;
    return s;
  }
  std::string dest;
  if (absl::Status s = disk_.SetAside(absl::StrCat("etcd-member-", HexId(id->member_id)), &dest);
      !s.ok()) {
    held_ = false;
    return s;
  }
  spdlog::warn("data of removed member {} moved to {} on the order of {} ({})",
               HexId(id->member_id), dest, header.leader(), d.rule);
  held_ = false;
  return absl::OkStatus();
}

absl::Status LocalNode::UnfenceLocked(const std::string& restore_id) {
  const std::string fenced = FencedRestoreId();
  if (fenced.empty()) return absl::OkStatus();
  if (absl::Status s = RefuseWhileDestroyed("unfence"); !s.ok()) return s;
  if (fenced != restore_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("fenced by restore ", fenced, ", not ", restore_id));
  }
  // etcd re-reads its flags only when it starts: restart it on the client URL. The marker goes
  // only once etcd is stopped, so a failed stop leaves the node visibly fenced (and retried).
  // A graceful stop (etcd.stop_timeout): the coordinator unfences the fenced cluster's leader
  // after its followers, so the leader's hand-over does not wait for peers that are stopping.
  held_ = true;
  if (absl::Status s = runner_.Stop(); !s.ok()) {
    held_ = false;
    return s;
  }
  absl::Status removed = disk_.Remove(Marker::kFenced);
  held_ = false;
  if (!removed.ok()) return removed;
  if (RunEtcd(LaunchForData(), /*on_data=*/true)) {
    spdlog::info("restore {}: settled; etcd now serves clients on {}", restore_id,
                 config_.ClientUrl(config_.self()));
  }
  return absl::OkStatus();
}

absl::Status LocalNode::SwitchVersion(const peer::SwitchVersionRequest& req) {
  MutexLock lock(&mu_);
  if (absl::Status s = RefuseWhileDestroyed("switch versions"); !s.ok()) return s;
  auto it = config_.etcd.versions.find(req.version());
  if (it == config_.etcd.versions.end()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd.versions on node ", config_.node.name,
                                                      " has no binary for etcd ", req.version()));
  }
  if (!HasMemberData()) {
    return absl::FailedPreconditionError("no member data here to run on another version");
  }
  // Recorded first: an agent that restarts from here on runs the new version, never the old
  // one on data the new one may have touched. If etcd cannot be stopped, the old version keeps
  // running, and the record goes back to say so.
  const std::string before = disk_.Read(Marker::kEtcdVersion);
  if (absl::Status s = disk_.Write(Marker::kEtcdVersion, req.version()); !s.ok()) return s;
  held_ = true;
  if (absl::Status s = runner_.Stop(); !s.ok()) {
    absl::Status undo = before.empty() ? disk_.Remove(Marker::kEtcdVersion)
                                       : disk_.Write(Marker::kEtcdVersion, before);
    if (!undo.ok()) spdlog::error("{}", undo.message());
    held_ = false;
    return s;
  }
  runner_.SetBinary(it->second);
  held_ = false;
  spdlog::info("switching etcd to version {} ({}) on the order of {} (term {})", req.version(),
               it->second, req.header().leader(), req.header().term());
  if (!RunEtcd(LaunchForData(), /*on_data=*/true)) {
    return absl::FailedPreconditionError("the member's data vanished; etcd stays stopped");
  }
  return absl::OkStatus();
}

absl::Status LocalNode::Restart(const peer::RestartRequest& req) {
  MutexLock lock(&mu_);
  if (req.id().empty()) return absl::InvalidArgumentError("a restart order names no restart roll");
  if (disk_.Read(Marker::kRestartedFor) == req.id()) return absl::OkStatus();  // done already
  if (!runner_.wanted() || !HasMemberData()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd on ", config_.node.name, " is not running on member data"));
  }
  // RS7: the order may have waited (a slow or paused leader): the node looks once more itself,
  // right before it stops etcd, and refuses while another member does not answer with a leader.
  if (absl::Status s = OthersServe(); !s.ok()) return s;
  const std::string why = absl::StrCat("restart roll ", req.id(), " (", req.reason(),
                                       ") on the order of ", req.header().leader());
  if (env_.before_restart) env_.before_restart();
  if (absl::Status s = RestartEtcdLocked(why); !s.ok()) return s;
  if (absl::Status s = disk_.Write(Marker::kRestartedFor, req.id()); !s.ok()) return s;
  Record("restart", why, "etcd restarted with the flags the config gives now");
  return absl::OkStatus();
}

absl::Status LocalNode::OthersServe() {
  if (RuleOff("RS7")) return absl::OkStatus();
  auto members = env_.local->LinearizableMemberList(nullptr);
  if (!members.ok()) {
    return absl::UnavailableError(absl::StrCat("not restarting etcd on ", config_.node.name,
                                               ": its member list cannot be read (",
                                               members.status().message(), ")"));
  }
  const std::string self = config_.PeerUrl(config_.self());
  for (const auto& m : *members) {
    if (!m.peer_urls.empty() && m.peer_urls.front() == self) continue;
    auto st = m.client_urls.empty()
                  ? absl::StatusOr<MemberStatus>(absl::UnavailableError("not started"))
                  : env_.local->Status(m.client_urls.front(), milliseconds(1000));
    if (m.is_learner || !st.ok() || st->leader == 0) {
      return absl::UnavailableError(absl::StrCat(
          "not restarting etcd on ", config_.node.name, ": member ",
          m.name.empty() ? HexId(m.id) : m.name,
          m.is_learner ? " is a learner on its way" : " does not answer with a leader"));
    }
  }
  return absl::OkStatus();
}

absl::Status LocalNode::RestartEtcd(const std::string& why) {
  MutexLock lock(&mu_);
  return RestartEtcdLocked(why);
}

absl::Status LocalNode::RestartEtcdLocked(const std::string& why) {
  if (absl::Status s = RefuseWhileDestroyed("restart etcd"); !s.ok()) return s;
  // Not running, or nothing to run on: it reads its files at its next start anyway.
  if (!runner_.wanted() || !HasMemberData()) return absl::OkStatus();
  spdlog::info("restarting etcd: {}", why);
  held_ = true;
  absl::Status stopped = runner_.Stop();
  held_ = false;
  if (!stopped.ok()) return stopped;
  if (!RunEtcd(LaunchForData(), /*on_data=*/true)) {
    return absl::FailedPreconditionError("the member's data vanished; etcd stays stopped");
  }
  return absl::OkStatus();
}

absl::Status LocalNode::Unfence(const peer::UnfenceRequest& req) {
  MutexLock lock(&mu_);
  if (req.republish() && FencedRestoreId().empty()) {
    // The member list still names another client URL than ours: etcd publishes its own only
    // when it starts.
    return RestartEtcdLocked(absl::StrCat("restore ", req.restore_id(),
                                          ": the member list does not show this member's client "
                                          "URL; restarting etcd to publish it again"));
  }
  return UnfenceLocked(req.restore_id());
}

absl::Status LocalNode::Destroy(const peer::DestroyRequest& req) {
  MutexLock lock(&mu_);
  if (env_.store == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", config_.node.name,
                     " has no backup store configured, so it cannot see the "
                     "destroy mark"));
  }
  // Re-checked right before it acts: the store's mark is the authority, not the caller.
  auto mark = ReadDestroyMark(*env_.store, config_.cluster.name);
  if (!mark.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "reading the destroy mark in ", env_.store->Describe(), ": ", mark.status().message()));
  }
  if (req.undo()) {
    if (mark->has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the store still marks the cluster destroyed (destroy ", (*mark)->id, ")"));
    }
    if (absl::Status s = disk_.Remove(Marker::kDestroyed); !s.ok()) return s;
    spdlog::warn("destroy {} undone: this node decides its start again", req.destroy_id());
    return absl::OkStatus();
  }
  if (!mark->has_value() || (*mark)->id != req.destroy_id()) {
    return absl::FailedPreconditionError(absl::StrCat("the store does not mark cluster ",
                                                      config_.cluster.name,
                                                      " destroyed by destroy ", req.destroy_id()));
  }
  return CarryOutDestroyLocked(**mark);
}

absl::Status LocalNode::CarryOutDestroyLocked(const DestroyMark& mark) {
  // Recorded first: an agent that restarts from here on keeps etcd stopped (SD1, and
  // AdoptRunning / MayRestart). The data stays where it is: undestroy starts the members on it
  // again, losing nothing; only on empty nodes does the final backup come into play.
  if (disk_.Read(Marker::kDestroyed) != mark.id) {
    if (absl::Status s = disk_.Write(Marker::kDestroyed, mark.id); !s.ok()) return s;
  }
  held_ = true;
  absl::Status stopped = runner_.Stop();
  held_ = false;  // SD1 keeps it stopped from here on
  if (!stopped.ok()) return stopped;
  spdlog::warn("{}; etcd stopped, its data stays in {}",
               DescribeDestroyMark(config_.cluster.name, mark), disk_.DataDir());
  return absl::OkStatus();
}

}  // namespace steward
