// How a node starts its etcd on its own: the start decision (DecideStart on GatherStartView,
// reconcile/start_decision.h), what the data dir holds, the markers beside it, and starting
// the runner.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "common/files.h"
#include "etcd/flags.h"
#include "etcd/wal.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

void Agent::RunEtcd(const EtcdLaunch& launch, bool on_data) {
  started_on_data_ = on_data;
  member_data_seen_ = false;
  runner_->Run(RenderEtcdFlags(launch));
}

bool Agent::HasMemberData() const { return DataState() == DataDirState::kMember; }

DataDirState Agent::DataState() const {
  std::error_code ec;
  const fs::path member = fs::path(config_.EtcdDataDir()) / "member";
  if (!fs::exists(member, ec)) return DataDirState::kEmpty;
  // etcd opens its backend (member/snap/db) before it creates the WAL; a WAL segment is what
  // shows that raft state, and so anything acknowledged, was ever written here.
  for (const auto& e : fs::directory_iterator(member / "wal", ec)) {
    if (e.path().extension() == ".wal") return DataDirState::kMember;
  }
  return DataDirState::kPartial;
}

bool Agent::SetPartialDataAside() {
  if (DataState() != DataDirState::kPartial) return true;
  // Its own place, replacing only an earlier partial dir: removed/ keeps the last copy of real
  // member data (a wiped member, the data a restore replaced), which this must not push out.
  const fs::path dest = fs::path(config_.node.data_dir) / "partial-aside";
  std::error_code ec;
  fs::remove_all(dest, ec);
  fs::rename(config_.EtcdDataDir(), dest, ec);
  if (ec) {
    spdlog::error("setting aside a partial data dir: {}", ec.message());
    return false;
  }
  spdlog::warn("data dir {} held no WAL (a start or join that failed before etcd wrote one): "
               "moved to {}; this node now counts as empty",
               config_.EtcdDataDir(), dest.string());
  return true;
}

bool Agent::EverJoined() const {
  if (fs::exists(config_.node.data_dir + "/joined")) return true;
  // The marker is written once the agent sees a leader, but a leader may have come and gone
  // unseen (the agent died first): the WAL's commit index tells. Past the initial members'
  // configuration entries, a majority accepted a leader's entries; returning empty under this
  // identity could then lose them. (Read only until the marker exists.)
  if (DataState() != DataDirState::kMember) return false;
  auto commit = ReadWalCommit(config_.EtcdDataDir());
  if (!commit.ok() || !steward::EverJoined(false, *commit, config_.cluster.size)) return false;
  spdlog::info("the WAL shows a leader committed entries (commit index {}): this member has "
               "been part of a running cluster", *commit);
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/joined", "1\n"); !s.ok()) {
    spdlog::warn("writing the joined marker: {}", s.message());
  }
  return true;
}

bool Agent::Bootstrapping() const {
  return !EverJoined() && fs::exists(config_.node.data_dir + "/initial-bootstrap");
}

void Agent::MarkJoined() {
  if (EverJoined()) return;
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/joined", "1\n"); !s.ok()) {
    spdlog::warn("writing the joined marker: {}", s.message());
  }
}

void Agent::MaybeStartEtcd() {
  StartDecision d = DecideStart(ObserveStart());
  switch (d.action) {
    case StartAction::kWait:
      Note(d.reason);
      return;
    case StartAction::kSetPartialAside:
      SetPartialDataAside();  // logs; the next pass decides on the empty dir
      return;
    case StartAction::kStartOnData:
      spdlog::info("data dir {} holds a member; starting etcd{}", config_.EtcdDataDir(),
                   FencedRestoreId().empty() ? "" : " (fenced: a restore is not settled yet)");
      RunEtcd(LaunchForData(), /*on_data=*/true);
      return;
    case StartAction::kBootstrap:
      break;
  }
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/initial-bootstrap", "1\n");
      !s.ok()) {
    Note(absl::StrCat("not bootstrapping: recording it failed: ", s.message()));
    return;
  }
  spdlog::info("{}: starting etcd as a member of the initial cluster ({} members)", d.reason,
               config_.cluster.size);
  RunEtcd(BootstrapLaunch(config_), /*on_data=*/false);
}

StartView Agent::ObserveStart() {
  std::map<std::string, PeerApi*> initial;
  for (auto& [name, client] : initial_agents_) initial[name] = client.get();
  return GatherStartView(config_, StartFacts{DataState(), EverJoined()}, *peers_client_, initial,
                         store_.get(), /*parallel=*/true);
}

EtcdLaunch Agent::LaunchForData() const {
  EtcdLaunch l = BootstrapLaunch(config_);
  if (!FencedRestoreId().empty()) l.client_url = config_.FenceUrl(config_.self());
  return l;
}

}  // namespace steward
