// Delta backups: what changed after a full backup, as a chain of store objects, so a restore
// after total loss loses seconds of writes instead of everything since the last full backup.
//
// Layout (docs/backup-layout.md), beside the full backup `base` they apply to:
//   <cluster>/deltas/<base>/<from, 20 digits>-<to, 20 digits>-<node>.delta.zst   the changes of the
//       revisions (from, to]: a steward.backup.DeltaChunk, zstd-compressed (then encrypted
//       when backup.encryption is on)
//   <cluster>/deltas/<base>/<from>-<to>-<node>.json   written last: its presence marks a
//       complete delta (<node>: the agent that wrote it, so two writers never share a key)
// A chain starts at the base's revision; each delta covers the revision after the one before
// it. Two leaders of a moment may store overlapping deltas: both hold the same cluster's
// history, so the chain takes, at each step, the delta that reaches furthest, and readers skip
// the revisions it repeats.
//
// Thread-compatible; the store must be thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "steward_backup.pb.h"

namespace steward {

struct DeltaMeta {
  std::string name;  // "<from>-<to>-<node>"
  std::string cluster;
  uint64_t cluster_id = 0;
  std::string base;           // the full backup's name
  int64_t from_revision = 0;  // exclusive
  int64_t to_revision = 0;    // inclusive
  int64_t revisions = 0;      // how many revisions carry events in it
  int64_t events = 0;
  int64_t first_unix_ms = 0;  // when the leader received its first and last revision
  int64_t last_unix_ms = 0;
  uint64_t stored_size = 0;  // bytes of the compressed object, before encryption
  std::string sha256;        // hex sha256 of the compressed object, before encryption
  std::string encryption_key_id;
  std::string node;  // the agent that wrote it
};

std::string DeltasPrefix(const std::string& cluster, const std::string& base);
std::string DeltaName(int64_t from_revision, int64_t to_revision, const std::string& node);
std::string DeltaObjectKey(const std::string& cluster, const std::string& base,
                           const std::string& name);
std::string DeltaMetaKey(const std::string& cluster, const std::string& base,
                         const std::string& name);
nlohmann::json DeltaMetaToJson(const DeltaMeta& m);
absl::StatusOr<DeltaMeta> DeltaMetaFromJson(const std::string& text);

// Stores `chunk` (its cluster, base and revisions set; at least one revision) as a delta of
// (chunk.from_revision, chunk.to_revision]: the object, then its meta. `node` names the writer.
// The chunk is serialized into zstd and the store in pieces: besides the chunk this holds
// zstd's window and a few hundred KiB, never a serialized or compressed copy of the whole.
absl::StatusOr<DeltaMeta> WriteDelta(BackupStore& store, const backup::DeltaChunk& chunk,
                                     const std::string& node);

// Reads a delta and checks it: size and sha256 against its meta, zstd's frame checksum, and
// that it holds what its meta says (cluster, base, revisions in order within (from, to]).
// DataLoss names the check that failed.
absl::StatusOr<backup::DeltaChunk> ReadDelta(BackupStore& store, const DeltaMeta& meta);

// The chain of `base` as its metas say (no object is read). Pure.
struct DeltaChain {
  std::vector<DeltaMeta> deltas;  // in order, each covering the revision after the one before
  int64_t end_revision = 0;       // the base's revision when there is no delta
  // Why the chain ends before deltas that exist ("" when it does not): a gap, a meta that
  // does not parse or belongs to another cluster.
  std::string stopped;
};
DeltaChain BuildDeltaChain(const BackupMeta& base, const std::vector<DeltaMeta>& metas,
                           const std::vector<std::string>& unreadable = {});

// Lists the deltas of `base` and builds its chain (reads the metas, not the objects).
absl::StatusOr<DeltaChain> ListDeltaChain(BackupStore& store, const BackupMeta& base);

// Where a restore of `base` plus its deltas can stop: the newest revision at or before both
// limits (0: no limit) that every delta up to it proves (each object read and checked).
struct RestorePoint {
  int64_t revision = 0;  // the base's revision when no delta applies
  int64_t unix_ms = 0;   // when the leader received that revision (0: the base itself)
  int64_t deltas = 0;    // how many deltas apply
  std::string stopped;   // why it stops before the limits or the chain's end ("" if not)
};
absl::StatusOr<RestorePoint> FindRestorePoint(BackupStore& store, const BackupMeta& base,
                                              int64_t to_revision = 0, int64_t to_unix_ms = 0);

// Which of `backups` (complete ones, newest first by BackupNewer) a restore to the point should
// start from, and how far its deltas take it. Eligible: with `to_revision`, a backup whose
// snapshot holds nothing after it (revision_max known and at or before it); with `to_unix_ms`,
// one taken at or before it. The newest eligible one, unless the next older eligible one of
// the same cluster and generation reaches further (right after a full backup, before the
// leader's deltas have moved to it, the changes are in the older one's chain). NotFound if
// none is eligible. Returns the index into `backups`.
absl::StatusOr<std::pair<size_t, RestorePoint>> ChooseRestoreBase(
    BackupStore& store, const std::vector<BackupMeta>& backups, int64_t to_revision = 0,
    int64_t to_unix_ms = 0);

// Calls `apply` with every revision of `base`'s chain after the base, up to `to_revision`
// inclusive, in order. Fails (without calling `apply` further) if the chain no longer reaches
// `to_revision` or an object fails its checks: then `*chain_broken` (if given) is set, and not
// for any other error (the store's, or `apply`'s).
absl::Status ForEachDeltaRevision(
    BackupStore& store, const BackupMeta& base, int64_t to_revision,
    const std::function<absl::Status(const backup::DeltaRevision&)>& apply,
    bool* chain_broken = nullptr);

// Whether deltas keep the writes to `key`: everything but the agents' own keys under the
// cluster's reserved prefix, of which only the spec and maintenance are kept (the rest is the
// agents' status, which a restored cluster writes anew).
bool KeptInDeltas(const std::string& cluster, const std::string& key);

// How the events of one delta revision become transactions for an etcd to replay.
struct ReplayShape {
  // A put under a lease: false makes it a delete (a restore revokes every lease, and its keys
  // go with it); true puts it without its lease (a drill compares with the live cluster, where
  // the key still stands at that revision).
  bool keep_leased_puts = false;
  // etcd's default --max-txn-ops is 128 and --max-request-bytes 1.5 MiB: a revision with more
  // goes in several transactions.
  int max_ops = 100;
  size_t max_bytes = size_t{1} << 20;
};
// The transactions that replay revision `r`, its events in order (at least one transaction
// when it has events). Pure.
std::vector<etcdserverpb::TxnRequest> RevisionTxns(const backup::DeltaRevision& r,
                                                   const ReplayShape& shape);

// Packs consecutive replay transactions into fewer, for a restore: one transaction per
// revision costs etcd a raft round and an fsync each (bench/scale measured a restore replaying
// 10,085 revisions in 59 s on seven members), and a transaction may hold many revisions' writes
// as long as no key repeats in it (etcd refuses a transaction that names a key twice) and it
// stays within the shape's limits. Operations keep their order; a key written again starts a
// new transaction, so every key's writes still apply in order. The packed history is not the
// original's revision by revision. A restore that raised the revision past everything clients
// saw does not need that (nobody watches a fenced cluster); one that could not raise it
// replays unpacked, so as not to fall further below, and so does a drill, which compares
// revisions. Pure.
class TxnPacker {
 public:
  explicit TxnPacker(const ReplayShape& shape) : shape_(shape) {}
  // Adds `txn`'s operations; returns the transactions completed by it (to be sent, in order).
  std::vector<etcdserverpb::TxnRequest> Add(const etcdserverpb::TxnRequest& txn);
  // The transaction still open, if it has operations (then empty).
  std::vector<etcdserverpb::TxnRequest> Flush();

 private:
  ReplayShape shape_;
  etcdserverpb::TxnRequest open_;
  std::set<std::string> keys_;
  size_t bytes_ = 0;
};

// Deletes every delta of `base` (retention, when the base goes).
absl::Status DeleteDeltas(BackupStore& store, const std::string& cluster, const std::string& base);

}  // namespace steward
