// The node's disk, as the agent's node-side code sees it: etcd's data dir (empty, partial,
// a member's data with its cluster and member ID), the markers the agent keeps beside it, the
// places data is set aside to, and the staging area a restore builds a new data dir in.
//
// FsNodeDisk is the real one (files under node.data_dir); the deterministic simulation
// (tests/sim/) implements it over its model of a disk, so the order handlers, the start policy
// and the node-side restore run there unchanged. Nothing else on the node side touches the
// data dir.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "etcd/wal.h"

namespace steward {

// What a node's data dir holds, as the start decision (start_decision.h) reads it.
enum class DataDirState {
  kEmpty,    // no member dir
  kPartial,  // member dir without a WAL segment
  kMember,   // a WAL: the data of a member
};

// Small files beside etcd's data dir (they outlive a wiped data dir, not the node).
enum class Marker {
  kJoined,            // "joined": the member has been part of a cluster with a leader
  kInitialBootstrap,  // "initial-bootstrap": this node started the initial cluster's bootstrap
  kFenced,            // "fenced": <restore id> whose fenced start etcd is in
  kRestoreId,         // "restore-id": the restore this node carried out last
  kLeaderTerm,        // "leader-term": "<term> <leader>", the newest term admitted (TermGuard)
  kEtcdVersion,       // "etcd-version": the etcd.versions entry this node switched to last
  kDestroyed,         // "destroyed": <destroy id> this node stopped its etcd for (SD1)
  kRestartedFor,      // "restarted-for": the restart roll this node restarted etcd for last
};
const char* MarkerName(Marker m);

// What `snapshot restore` is asked to build from the staged snapshot.
struct SnapshotRestore {
  // etcdctl, or etcdutl (which can raise the revision); empty when no tool here can make this
  // restore (a bump without etcdutl): then only the in-place edit can.
  std::string tool;
  std::string name, peer_url, token;
  std::vector<std::pair<std::string, std::string>> initial_cluster;  // name -> peer URL
  // > 0: raise the revision by this much and mark it compacted (in place, or etcdutl's
  // --bump-revision --mark-compacted; etcd 3.4's etcdctl cannot).
  uint64_t bump_revision = 0;
  // Restore in place (etcd/restore_in_place.h): no tool, no copy of the DB. The tool is the
  // fallback for a DB the in-place edit refuses.
  bool in_place = true;
};

class NodeDisk {
 public:
  virtual ~NodeDisk() = default;
  // etcd's --data-dir, for messages and etcd's flags.
  virtual std::string DataDir() const = 0;

  // --- etcd's data dir ---
  virtual DataDirState State() = 0;
  // The member and cluster ID in the WAL (NotFound without one).
  virtual absl::StatusOr<WalIdentity> Identity() = 0;
  // The highest commit index in the WAL (ReadWalCommit).
  virtual absl::StatusOr<uint64_t> WalCommit() = 0;
  // Moves the data dir to removed/<label>, keeping only the newest such copy (a retried order
  // finds its copy there and only drops what is left). OK if there is no data dir. `moved_to`
  // receives where it went ("" if nothing moved).
  virtual absl::Status SetAside(const std::string& label, std::string* moved_to) = 0;
  // Moves a partial data dir to partial-aside/ (its own place: removed/ keeps real member
  // data, which this must not push out).
  virtual absl::Status SetPartialAside(std::string* moved_to) = 0;
  // Undoes SetAside: `aside` becomes the data dir again.
  virtual absl::Status PutBack(const std::string& aside) = 0;
  // Deletes whatever the data dir holds (only ever a partial dir of a repeated restore).
  virtual absl::Status RemoveData() = 0;

  // --- markers ---
  virtual bool Has(Marker m) = 0;
  // The marker's content, whitespace-trimmed ("" if absent).
  virtual std::string Read(Marker m) = 0;
  virtual absl::Status Write(Marker m, const std::string& content) = 0;
  virtual absl::Status Remove(Marker m) = 0;

  // --- a restore's staging area ---
  // Fetches backup `meta` of `cluster` from `store` into the staging area, checking its size
  // and zstd's frame checksum (the sha256 was checked by whoever chose the backup). Anything
  // staged before is dropped first. Nothing outside the staging area changes.
  virtual absl::Status StageBackup(BackupStore& store, const std::string& cluster,
                                   const BackupMeta& meta) = 0;
  // Makes the staged backup a staged data dir: in place, or by the tool's `snapshot restore`.
  virtual absl::Status RestoreStaged(const SnapshotRestore& r) = 0;
  // Whether the staged backup can be restored in place as `r` asks; reads, writes nothing. For
  // a restore only the in-place edit can make, checked before the node's etcd is stopped.
  virtual absl::Status CheckStagedInPlace(const SnapshotRestore& r) = 0;
  // The staged data dir becomes etcd's data dir (there must be none), atomically.
  virtual absl::Status InstallStaged() = 0;
  // Drops the staged snapshot (the installed data dir stays).
  virtual void ClearStaging() = 0;
};

// The real disk: etcd's data dir is <node_dir>/etcd, the markers are files in node_dir.
class FsNodeDisk : public NodeDisk {
 public:
  // `cancelled` (optional): once true, a running restore tool is killed (Cancelled).
  FsNodeDisk(std::string node_dir, std::string etcd_data_dir,
             std::function<bool()> cancelled = nullptr);
  std::string DataDir() const override { return etcd_dir_; }
  DataDirState State() override;
  absl::StatusOr<WalIdentity> Identity() override;
  absl::StatusOr<uint64_t> WalCommit() override;
  absl::Status SetAside(const std::string& label, std::string* moved_to) override;
  absl::Status SetPartialAside(std::string* moved_to) override;
  absl::Status PutBack(const std::string& aside) override;
  absl::Status RemoveData() override;
  bool Has(Marker m) override;
  std::string Read(Marker m) override;
  absl::Status Write(Marker m, const std::string& content) override;
  absl::Status Remove(Marker m) override;
  absl::Status StageBackup(BackupStore& store, const std::string& cluster,
                           const BackupMeta& meta) override;
  absl::Status RestoreStaged(const SnapshotRestore& r) override;
  absl::Status CheckStagedInPlace(const SnapshotRestore& r) override;
  absl::Status InstallStaged() override;
  void ClearStaging() override;

 private:
  std::string MarkerPath(Marker m) const;
  std::string WorkDir() const;

  const std::string node_dir_, etcd_dir_;
  const std::function<bool()> cancelled_;
};

}  // namespace steward
