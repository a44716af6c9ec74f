#include "sim/disk_model.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sim/world.h"

namespace steward::sim {

void ClearData(Disk& d) {
  d.state = DataDirState::kEmpty;
  d.cluster = d.member = 0;
  d.rev = 0;
  d.seen.clear();
  d.wal_commit = 0;
  d.diverged = 0;
}
void CopyData(const Disk& from, Disk& to) {
  to.state = from.state;
  to.cluster = from.cluster;
  to.member = from.member;
  to.rev = from.rev;
  to.seen = from.seen;
  to.wal_commit = from.wal_commit;
  to.diverged = from.diverged;
}

Disk& SimDisk::d() { return w_->nodes()[node_]->disk; }

std::string SimDisk::DataDir() const { return w_->nodes()[node_]->config.EtcdDataDir(); }

DataDirState SimDisk::State() { return d().state; }

absl::StatusOr<WalIdentity> SimDisk::Identity() {
  if (d().state != DataDirState::kMember) return absl::NotFoundError("no WAL");
  return WalIdentity{d().member, d().cluster};
}

absl::StatusOr<uint64_t> SimDisk::WalCommit() {
  if (d().state != DataDirState::kMember) return absl::NotFoundError("no WAL");
  return d().wal_commit;
}

absl::Status SimDisk::SetAside(const std::string& label, std::string* moved_to) {
  moved_to->clear();
  if (d().state == DataDirState::kEmpty) return absl::OkStatus();
  const std::string dest = "/sim/removed/" + label;
  if (d().removed && d().removed_label == label) {
    // A retried order: the first attempt's copy stays.
    w_->BeforeDataGoes(node_, "deletes what is left of its data dir");
    ClearData(d());
    *moved_to = dest;
    return absl::OkStatus();
  }
  w_->BeforeDataGoes(node_, "sets its data aside to " + label);
  d().removed = std::make_shared<Disk>();
  CopyData(d(), *d().removed);
  d().removed_label = label;
  ClearData(d());
  *moved_to = dest;
  return absl::OkStatus();
}

absl::Status SimDisk::SetPartialAside(std::string* moved_to) {
  if (d().state == DataDirState::kPartial) ClearData(d());
  *moved_to = "/sim/partial-aside";
  return absl::OkStatus();
}

absl::Status SimDisk::PutBack(const std::string&) {
  if (!d().removed) return absl::NotFoundError("nothing set aside");
  CopyData(*d().removed, d());
  w_->Refresh();
  return absl::OkStatus();
}

absl::Status SimDisk::RemoveData() {
  if (d().state != DataDirState::kEmpty) w_->BeforeDataGoes(node_, "deletes its data dir");
  ClearData(d());
  return absl::OkStatus();
}

std::string SimDisk::Read(Marker m) {
  switch (m) {
    case Marker::kJoined:
      return d().joined ? "1" : "";
    case Marker::kInitialBootstrap:
      return d().bootstrapping ? "1" : "";
    case Marker::kFenced:
      return d().fenced;
    case Marker::kRestoreId:
      return d().restore_id;
    case Marker::kLeaderTerm:
      return d().leader_term;
    case Marker::kDestroyed:
      return d().destroyed;
    case Marker::kEtcdVersion:
      return d().etcd_version;
    case Marker::kRestartedFor:
      return d().restarted_for;
  }
  return "";
}

absl::Status SimDisk::Write(Marker m, const std::string& content) {
  switch (m) {
    case Marker::kJoined:
      d().joined = true;
      break;
    case Marker::kInitialBootstrap:
      d().bootstrapping = true;
      break;
    case Marker::kFenced:
      d().fenced = content;
      break;
    case Marker::kRestoreId:
      d().restore_id = content;
      break;
    case Marker::kLeaderTerm:
      d().leader_term = content;
      break;
    case Marker::kDestroyed:
      d().destroyed = content;
      break;
    case Marker::kEtcdVersion:
      d().etcd_version = content;
      break;
    case Marker::kRestartedFor:
      d().restarted_for = content;
      break;
  }
  return absl::OkStatus();
}

absl::Status SimDisk::Remove(Marker m) {
  switch (m) {
    case Marker::kJoined:
      d().joined = false;
      break;
    case Marker::kInitialBootstrap:
      d().bootstrapping = false;
      break;
    case Marker::kFenced:
      // The node's etcd will serve clients: no lease of the lost cluster may live on.
      if (!d().fenced.empty()) w_->CheckNoRestoredLease(node_);
      if (!d().fenced.empty()) w_->CheckReplayed(node_);
      d().fenced.clear();
      break;
    case Marker::kRestoreId:
      d().restore_id.clear();
      break;
    case Marker::kLeaderTerm:
      d().leader_term.clear();
      break;
    case Marker::kDestroyed:
      d().destroyed.clear();
      break;
    case Marker::kEtcdVersion:
      d().etcd_version.clear();
      break;
    case Marker::kRestartedFor:
      d().restarted_for.clear();
      break;
  }
  return absl::OkStatus();
}

absl::Status SimDisk::StageBackup(BackupStore& store, const std::string& cluster,
                                  const BackupMeta& meta) {
  d().staged.reset();
  auto bytes = store.Get(SnapshotKey(cluster, meta.name));
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() != meta.compressed_size) return absl::DataLossError("size mismatch");
  staged_backup_ = meta.name;
  return absl::OkStatus();
}

absl::Status SimDisk::RestoreStaged(const SnapshotRestore& r) {
  if (staged_backup_.empty()) return absl::FailedPreconditionError("nothing staged");
  if (r.bump_revision > 0) {
    // The bump is made in place (unless the edit refuses the backup) or by etcdutl; etcd
    // 3.4's etcdctl cannot make it, and no tool at all is named when only the edit can.
    const bool in_place = (r.in_place || r.tool.empty()) && !w_->InPlaceRefuses(staged_backup_);
    if (!in_place && !absl::EndsWith(r.tool, "etcdutl")) {
      w_->Violation(absl::StrCat("node ", w_->nodes()[node_]->spec.name, " restores ",
                                 staged_backup_, " with a revision bump that ",
                                 r.tool.empty() ? "the refused in-place edit" : r.tool,
                                 " cannot make"));
      return absl::InternalError("cannot bump");
    }
  }
  auto staged = std::make_shared<Disk>();
  if (auto s = w_->RestoreCluster(node_, staged_backup_, r, staged.get()); !s.ok()) return s;
  d().staged = staged;
  return absl::OkStatus();
}

absl::Status SimDisk::CheckStagedInPlace(const SnapshotRestore&) {
  if (staged_backup_.empty()) return absl::FailedPreconditionError("nothing staged");
  if (w_->InPlaceRefuses(staged_backup_)) {
    // The edit refuses with more than one code (bolt.cc).
    return staged_backup_.size() % 2 == 0
               ? absl::DataLossError("corrupt: (modelled) a DB the in-place edit does not know")
               : absl::FailedPreconditionError("(modelled) a nested bucket where none is kept");
  }
  return absl::OkStatus();
}

absl::Status SimDisk::InstallStaged() {
  if (d().state != DataDirState::kEmpty) return absl::FailedPreconditionError("data dir exists");
  if (!d().staged) return absl::FailedPreconditionError("nothing restored");
  CopyData(*d().staged, d());
  d().staged.reset();
  return absl::OkStatus();
}

}  // namespace steward::sim
