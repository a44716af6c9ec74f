// The leader's orders as this node carries them out (the peer server has admitted them:
// AdmitOrder), and the state it reports: join, stop, wipe (DecideWipe), unfence.
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "common/files.h"
#include "etcd/member_id.h"
#include "etcd/wal.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

peer::NodeState Agent::State() {
  peer::NodeState s;
  s.set_node_name(config_.node.name);
  s.set_agent_version(STEWARD_VERSION);
  auto pid = runner_->pid();
  s.set_etcd_running(runner_->wanted() || pid.has_value());
  s.set_etcd_pid(pid.value_or(0));
  s.set_etcd_restarts(runner_->restarts());
  s.set_has_data(HasMemberData());
  s.set_fenced(!FencedRestoreId().empty());
  s.set_can_bump_revision(!config_.etcd.etcdutl.empty());
  s.set_ever_joined(EverJoined());
  s.set_bootstrapping(Bootstrapping());
  s.set_restore_id(AppliedRestoreId());
  {
    std::unique_lock<std::mutex> lock(order_mu_, std::try_to_lock);
    if (lock.owns_lock()) s.set_restore_error(restore_error_);
  }
  if (s.has_data()) {
    if (auto id = ReadWalIdentity(config_.EtcdDataDir()); id.ok()) {
      s.set_member_id(id->member_id);
      s.set_cluster_id(id->cluster_id);
    }
  }
  if (pid) {
    const std::string url =
        s.fenced() ? config_.FenceUrl(config_.self()) : config_.ClientUrl(config_.self());
    if (auto st = local_client_->Status(url, milliseconds(300));
        st.ok()) {
      s.set_raft_index(st->raft_index);
      s.set_raft_term(st->raft_term);
      // The leader asks every pass: mark "joined" as soon as a leader is seen, not only on
      // the control loop's next round.
      if (st->leader != 0 && s.has_data() && !s.ever_joined() && !s.fenced()) {
        MarkJoined();
        s.set_ever_joined(true);
        s.set_bootstrapping(false);
      }
      s.set_etcd_version(st->version);
    }
  }
  return s;
}

absl::Status Agent::Join(const peer::StartRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  if (!runner_->wanted() && !SetPartialDataAside()) {
    return absl::InternalError("a partial data dir could not be set aside");
  }
  if (HasMemberData()) {
    return absl::AlreadyExistsError("the data dir already holds a member; wipe it first");
  }
  if (runner_->wanted()) return absl::OkStatus();  // already starting from an earlier order
  EtcdLaunch l = BootstrapLaunch(config_);
  l.initial_cluster.clear();
  for (const auto& m : req.initial_cluster()) l.initial_cluster.emplace_back(m.name(), m.peer_url());
  l.token = req.token();
  l.new_cluster = false;
  held_ = false;
  spdlog::info("joining the cluster as an existing member");
  RunEtcd(l, /*on_data=*/false);
  return absl::OkStatus();
}

absl::Status Agent::StopEtcd() {
  std::lock_guard<std::mutex> lock(order_mu_);
  held_ = true;
  return runner_->Stop();
}

absl::Status Agent::Wipe(const peer::OrderHeader& header) {
  std::lock_guard<std::mutex> lock(order_mu_);
  WipeView v;
  v.has_member_data = HasMemberData();
  auto id = v.has_member_data ? ReadWalIdentity(config_.EtcdDataDir())
                              : absl::StatusOr<WalIdentity>(absl::NotFoundError("no data"));
  if (id.ok()) {
    v.member_id = id->member_id;
  } else {
    v.identity_error = std::string(id.status().message());
  }
  if (v.has_member_data && id.ok()) {
    // Ask the other members, not our own etcd: an expelled member may still list itself.
    auto members = peers_client_->LinearizableMemberList(&v.list_cluster_id);
    v.list_ok = members.ok();
    if (members.ok()) {
      for (const auto& m : *members) v.member_ids.push_back(m.id);
    } else {
      v.list_error = std::string(members.status().message());
    }
  }
  v.leader_cluster_id = header.cluster_id();
  WipeDecision d = DecideWipe(v);
  if (d.action != WipeAction::kSetAside) return d.status;
  held_ = true;
  if (absl::Status s = runner_->Stop(); !s.ok()) {
    held_ = false;
    return s;
  }
  std::string dest;
  if (absl::Status s = SetDataAside(absl::StrCat("etcd-member-", HexId(id->member_id)), &dest);
      !s.ok()) {
    held_ = false;
    return s;
  }
  spdlog::warn("data of removed member {} moved to {}", HexId(id->member_id), dest);
  held_ = false;
  return absl::OkStatus();
}

absl::Status Agent::SetDataAside(const std::string& label, std::string* moved_to) {
  // Set the data aside rather than delete it; keep only the newest such copy.
  const fs::path removed = fs::path(config_.node.data_dir) / "removed";
  std::error_code ec;
  if (!fs::exists(config_.EtcdDataDir(), ec)) return absl::OkStatus();  // nothing to move
  const fs::path dest = removed / label;
  if (fs::exists(dest, ec)) {
    // A retried order: the first attempt already set the data aside here; keep that copy.
    fs::remove_all(config_.EtcdDataDir(), ec);
    *moved_to = dest.string();
    return absl::OkStatus();
  }
  fs::remove_all(removed, ec);
  fs::create_directories(removed, ec);
  fs::rename(config_.EtcdDataDir(), dest, ec);
  if (ec) return absl::InternalError(absl::StrCat("moving the data dir aside: ", ec.message()));
  *moved_to = dest.string();
  return absl::OkStatus();
}

std::string Agent::FencedRestoreId() const {
  auto text = ReadFile(config_.node.data_dir + "/fenced");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

absl::Status Agent::UnfenceLocked(const std::string& restore_id) {
  const std::string fenced = FencedRestoreId();
  if (fenced.empty()) return absl::OkStatus();
  if (fenced != restore_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("fenced by restore ", fenced, ", not ", restore_id));
  }
  // etcd re-reads its flags only when it starts: restart it on the client URL. The marker goes
  // only once etcd is stopped, so a failed stop leaves the node visibly fenced (and retried).
  // A short grace: every member stops at once, and a graceful etcd leader would first try to
  // hand its leadership to peers that are stopping too (seconds); everything the fenced
  // cluster acknowledged (the lease revocations) is on disk already.
  held_ = true;
  if (absl::Status s = runner_->Stop(milliseconds(200)); !s.ok()) {
    held_ = false;
    return s;
  }
  std::error_code ec;
  fs::remove(config_.node.data_dir + "/fenced", ec);
  held_ = false;
  if (ec) return absl::InternalError(absl::StrCat("removing the fence marker: ", ec.message()));
  spdlog::info("restore {}: settled; etcd now serves clients on {}", restore_id,
               config_.ClientUrl(config_.self()));
  RunEtcd(LaunchForData(), /*on_data=*/true);
  return absl::OkStatus();
}

absl::Status Agent::Unfence(const peer::UnfenceRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  return UnfenceLocked(req.restore_id());
}

void Agent::MaybeUnfenceSelf() {
  if (!store_) return;
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!intent.ok() || !intent->has_value()) return;
  const RestoreIntent& r = **intent;
  if (!r.settled && !r.done) return;
  std::lock_guard<std::mutex> lock(order_mu_);
  if (FencedRestoreId() != r.id) return;
  if (absl::Status s = UnfenceLocked(r.id); !s.ok()) {
    Note(absl::StrCat("cannot drop the fence of restore ", r.id, ": ", s.message()));
  }
}

}  // namespace steward
