// A node's disk, as a model: etcd's data dir (empty, partial, or a member's data with the
// revision it holds, its locally served member list and its WAL's commit index), the markers
// and files beside it (lost only with the whole node), the copy set aside last, and a
// restore's staged data dir. SimDisk is the agent's NodeDisk over it; as data goes (set aside,
// deleted) and as a restore builds a cluster, it lets the world check its ground truth
// (World::BeforeDataGoes in invariants.cc, World::RestoreCluster in backup_model.cc).
// Single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "node/node_disk.h"
#include "node/start_decision.h"
#include "sim/etcd_cluster.h"

namespace steward::sim {

class World;

struct Disk {
  DataDirState state = DataDirState::kEmpty;
  uint64_t cluster = 0, member = 0;
  int64_t rev = 0;           // the revision this member's data holds
  std::vector<Member> seen;  // its locally served member list
  // Markers and files beside etcd's data dir (lost only with the whole node).
  bool joined = false, bootstrapping = false;
  // The WAL's commit index (ReadWalCommit): the initial members' configuration entries at a
  // bootstrap, more once a leader's entries were accepted.
  uint64_t wal_commit = 0;
  bool EverJoined() const { return steward::EverJoined(joined, wal_commit, 3); }
  std::string restore_id;
  std::string fenced;         // the "fenced" marker: the restore whose fenced start etcd is in
  std::string leader_term;    // the "leader-term" marker (TermGuard's "<term> <leader>")
  std::string destroyed;      // the "destroyed" marker: the destroy this node stopped etcd for
  std::string etcd_version;   // the "etcd-version" marker (Options::upgraded)
  std::string restarted_for;  // the "restarted-for" marker
  // Its data changed behind etcd's back (Options::diverge): which change (0: none). A member
  // that joins copies its leader's data, and so its change.
  uint64_t diverged = 0;
  // The data set aside last (removed/<label>; one copy, as FsNodeDisk keeps), and a restore's
  // staged data dir.
  std::shared_ptr<Disk> removed;
  std::string removed_label;
  std::shared_ptr<Disk> staged;
};

// etcd's data dir only (the markers beside it stay).
void ClearData(Disk& d);
void CopyData(const Disk& from, Disk& to);

// The node's disk over the world's model of it; the world checks its ground truth as data
// goes (BeforeDataGoes) and as a restore builds a cluster (RestoreCluster).
class SimDisk : public NodeDisk {
 public:
  SimDisk(World* w, int node) : w_(w), node_(node) {}
  Disk& d();
  std::string DataDir() const override;
  DataDirState State() override;
  absl::StatusOr<WalIdentity> Identity() override;
  absl::StatusOr<uint64_t> WalCommit() override;
  absl::Status SetAside(const std::string& label, std::string* moved_to) override;
  absl::Status SetPartialAside(std::string* moved_to) override;
  absl::Status PutBack(const std::string&) override;
  absl::Status RemoveData() override;
  bool Has(Marker m) override { return !Read(m).empty(); }
  std::string Read(Marker m) override;
  absl::Status Write(Marker m, const std::string& content) override;
  absl::Status Remove(Marker m) override;
  absl::Status StageBackup(BackupStore& store, const std::string& cluster,
                           const BackupMeta& meta) override;
  absl::Status RestoreStaged(const SnapshotRestore& r) override;
  absl::Status CheckStagedInPlace(const SnapshotRestore&) override;
  absl::Status InstallStaged() override;
  void ClearStaging() override { staged_backup_.clear(); }

 private:
  World* w_;
  int node_;
  std::string staged_backup_;
};

}  // namespace steward::sim
