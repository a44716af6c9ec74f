// What a restore keeps in the backup store, where every coordinator (and stewardctl) finds it:
//   <cluster>/control/restore.json   the restore intent (RestoreIntent)
//   <cluster>/control/revision.json  the highest revision the cluster was seen to serve
//   <cluster>/control/members.json   the voting members as last recorded
// and the one way a restore intent is prepared (PrepareRestoreIntent), for the coordinator's
// automatic restores and the operator's restore-backup alike.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/store.h"
#include "config/config.h"

namespace steward {

struct RestoreIntent {
  std::string id;
  std::string backup;
  std::string token;
  std::string requested_by;                                          // "auto" or "stewardctl"
  std::vector<std::pair<std::string, std::string>> initial_cluster;  // name, peer URL
  // The restored cluster's generation (BackupMeta::generation): one above every backup's.
  int64_t generation = 1;
  // How far each member raises the restored revision (RevisionBump); the same on every node.
  int64_t bump_revision = 0;
  // The revision the backup's deltas (backup/delta.h) are replayed to while fenced; 0 or the
  // backup's own revision: none. Chosen, and every delta up to it checked, before the intent
  // is written: every coordinator replays the same.
  int64_t delta_to = 0;
  // The restored cluster's leases are revoked and its generation recorded (while fenced); from
  // here on members are unfenced, and nothing may revoke leases again.
  bool settled = false;
  // Restore orders may have gone out (written before the first one): from here on the restore
  // is carried through, never cancelled (rule R6).
  bool ordered = false;
  bool done = false;
  bool cancelled = false;  // an automatic restore whose total loss could not be re-proved
  std::string cancel_reason;
  // The automatic restore this one replaced before it settled, because deltas that one was to
  // replay were lost or damaged after it was chosen ("" if none). It carries that restore's
  // orders on (so it is `ordered` from the start) and re-orders its fenced members.
  std::string supersedes;
  int64_t created_at = 0;
};

absl::StatusOr<std::optional<RestoreIntent>> ReadRestoreIntent(BackupStore& store,
                                                               const std::string& cluster);
absl::Status WriteRestoreIntent(BackupStore& store, const std::string& cluster,
                                const RestoreIntent& intent);
// A fresh intent to restore `backup` onto the first cluster.size nodes, with a new token. Its ID
// is made of `created_at` (Unix seconds) and a 16-bit `nonce`.
RestoreIntent NewRestoreIntent(const Config& config, const std::string& backup,
                               const std::string& requested_by, int64_t generation,
                               int64_t bump_revision, int64_t created_at, uint32_t nonce);

// The highest revision the cluster was seen to serve, kept in the store by the leader:
//   <cluster>/control/revision.json  {"revision": R, "updated_at": <unix seconds>}
// 0 when nothing is recorded.
absl::StatusOr<int64_t> ReadHighestRevision(BackupStore& store, const std::string& cluster);
absl::Status WriteHighestRevision(BackupStore& store, const std::string& cluster, int64_t revision,
                                  int64_t now_unix);
// The highest leader epoch the cluster used, kept in the store by each new leader before its
// first step, as the revision is (the epoch in etcd comes back from a backup with it):
//   <cluster>/control/epoch.json  {"epoch": E, "updated_at": <unix seconds>}
// A restore raises the restored cluster's epoch past it. 0 without a record.
absl::StatusOr<uint64_t> ReadHighestEpoch(BackupStore& store, const std::string& cluster);
// Raises the record to `epoch` unless it is there already (never lowers it).
absl::Status RaiseHighestEpoch(BackupStore& store, const std::string& cluster, uint64_t epoch,
                               int64_t now_unix);
// The revision a restored cluster starts at: the backup's (or, with deltas replayed, their
// point's, 0 for none) plus the bump.
inline int64_t RestoredStartRevision(int64_t backup_revision, int64_t delta_to, int64_t bump) {
  return std::max(backup_revision, delta_to) + bump;
}
// Raises the record to `revision` unless it is there already (never lowers it). Called with
// the revision a restore starts its cluster at before the restore is ordered: a restored
// cluster lost again before the leader records what it served is then restored past it.
absl::Status RaiseHighestRevision(BackupStore& store, const std::string& cluster, int64_t revision,
                                  int64_t now_unix);
// Writes since the last record are covered by this margin: the leader records at least every
// kRevisionRecordInterval, and etcd does not serve this many writes in that time.
inline constexpr int64_t kRevisionBumpMargin = 10'000'000;
inline constexpr std::chrono::seconds kRevisionRecordInterval{30};
// How far to raise a restore of a backup taken at `backup_revision`: past the highest recorded
// revision, plus the margin.
int64_t RevisionBump(int64_t highest_recorded, int64_t backup_revision);
// One above the highest generation of any backup in the store.
absl::StatusOr<int64_t> NextGeneration(BackupStore& store, const std::string& cluster);

// The voting members (node names) as last recorded in the store, by the leader when the
// membership changes and by the restore coordinator when a restore is done:
//   <cluster>/control/members.json  {"voters": [...], "updated_at": <unix seconds>}
// nullopt when nothing is recorded yet.
absl::StatusOr<std::optional<std::vector<std::string>>> ReadLastVoters(BackupStore& store,
                                                                       const std::string& cluster);
absl::Status WriteLastVoters(BackupStore& store, const std::string& cluster,
                             const std::vector<std::string>& voters, int64_t now_unix);

// Is there a sign that this cluster ever existed (a backup, or the created marker)? Errors
// when the store cannot be read: the caller must then not bootstrap an empty cluster.
absl::StatusOr<bool> ClusterEverExisted(BackupStore& store, const std::string& cluster);

// What a new restore intent is made from.
struct IntentRequest {
  std::string backup;
  std::string requested_by;  // "auto" or "stewardctl"
  int64_t delta_to = 0;      // the revision its deltas are replayed to (0: none)
  // A revision the cluster is known to have served beyond the record (a safety backup's).
  int64_t served = 0;
  // Why the restored revision must not be raised ("" if it may): a node cannot, or it restores
  // a backup that a replaced restore could not raise.
  std::string no_bump;
  int64_t now_unix = 0;
  std::function<uint32_t()> nonce;  // asked once, for the intent's ID
};
// The one way a restore intent is prepared: its generation (NextGeneration), its revision bump
// (past the record and `served`, unless `no_bump`), and the revision the restored cluster starts
// at raised in the record before the intent exists, so that a restore after this cluster is
// lost again, before the leader records what it served, starts past it. Not written: the
// caller records the intent.
absl::StatusOr<RestoreIntent> PrepareRestoreIntent(BackupStore& store, const Config& config,
                                                   const IntentRequest& request);

}  // namespace steward
