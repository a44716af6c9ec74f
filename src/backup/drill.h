// A restore drill: proves a backup restores by restoring it, not by its checksums alone. The
// backup is fetched and checked (every hash), its DB walked page by page and restored in place
// into a scratch data dir, a scratch etcd started on it (its own process on loopback ports
// picked at random, lower CPU and I/O priority, killed with its parent), the backup's deltas
// replayed into it (each checked), and what it serves is compared with the live cluster at the
// revision the deltas reach (the snapshot's own without deltas): every key, its value and the
// revision that last changed it, page by page. Where etcd's KV hash of the scratch etcd at the
// backup's revision is the live cluster's, that proves every value up to it, and the pages
// carry keys and revisions only, with the values of keys changed since read one by one. If the live
// cluster is compacted past that revision, keys the live cluster has not changed since are compared
// instead (a sample). Nothing of the drill touches a member; the scratch dir is removed afterwards,
// and one left by a drill that was killed is removed by the next.
//
// Thread-compatible: one drill at a time per scratch root.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "config/config.h"
#include "etcd/api.h"

namespace steward {

struct DrillOptions {
  std::string etcd_binary;   // the etcd to run (the backup's version, or one that reads it)
  std::string scratch_root;  // where the scratch dir is made (checked for free space first)
  std::chrono::seconds start_bound{60};  // for the scratch etcd to serve
  size_t sample = 200;  // keys compared one by one when the live cluster is compacted past
};

struct DrillResult {
  std::string backup;
  int64_t revision = 0;     // the backup's
  int64_t deltas = 0;       // deltas replayed after it
  int64_t to_revision = 0;  // the revision compared: the deltas' last, else the backup's
  bool passed = false;
  bool skipped = false;  // not run (too little disk): `failure` says why
  std::string failure;   // why it failed or was skipped ("" when it passed)
  std::string compared;  // what was compared, for people
  int64_t keys = 0;      // keys the scratch etcd serves
  int64_t restore_ms = 0, start_ms = 0, hash_ms = 0, replay_ms = 0, compare_ms = 0;
};

// Which live revision each revision of the scratch etcd stands for. The scratch etcd starts at
// the backup's revision, and replaying a delta revision makes one revision of its own, or
// several when a revision is split (etcd's request limits), or none when nothing changed: so
// the two count alike until they do not. Kept as runs of a constant offset.
class ReplayedRevisions {
 public:
  // The scratch etcd's revision `scratch` (after a transaction) holds live revision `live`.
  void Add(int64_t scratch, int64_t live);
  // The live revision of the scratch revision `scratch`; revisions from before the replay are
  // the backup's own, the same in both.
  int64_t Live(int64_t scratch) const;
  size_t runs() const { return runs_.size(); }

 private:
  std::vector<std::pair<int64_t, int64_t>> runs_;  // (first scratch revision, live - scratch)
  int64_t last_ = 0;                               // the last scratch revision added
};

// Runs the drill of `meta` (a complete backup of `cluster` in `store`) against `live`, the
// live cluster. An error only when the drill could not run (the store, the scratch dir);
// a backup that does not restore or does not match is a result that did not pass.
absl::StatusOr<DrillResult> RunDrill(BackupStore& store, const std::string& cluster,
                                     const BackupMeta& meta, EtcdApi& live,
                                     const DrillOptions& options);

// Removes the scratch dirs under `root` of drills whose process is gone (killed mid-drill).
void RemoveStaleScratch(const std::string& root);

// The etcd to run a backup taken by etcd `version` with: the binary etcd.versions maps to the
// same minor (the newest patch), else etcd.binary.
std::string DrillEtcdFor(const Config& config, const std::string& version);

// Records `r` in the store (<cluster>/backups/<name>/verified.json), for list-backups.
absl::Status RecordDrill(BackupStore& store, const std::string& cluster, const DrillResult& r,
                         int64_t now_unix);

// One line for list-backups' VERIFIED column from a verified.json ("" if unreadable).
std::string DescribeDrill(const std::string& verified_json);
// Why the last drill (`verified_json`) speaks against restoring the backup, "" if it does not: a
// drill that failed, unless it found a live member, not the backup, to be the odd one out. Such
// a backup is never the newest restorable point, and an automatic restore skips it.
std::string DrillRefutes(const std::string& verified_json);

}  // namespace steward
