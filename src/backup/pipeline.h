// The backup pipeline: etcd's Maintenance.Snapshot stream -> zstd -> sha256 -> store, in
// bounded memory (a few MiB whatever the DB size), and its reverse for restore: store ->
// checks (as deep as VerifyOptions asks) -> zstd -d -> local staging file.
//
// Thread-compatible: each call is independent; the store and client must be thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "etcd/api.h"

namespace steward {

struct BackupSource {
  std::string endpoint;
  std::string member;  // its name
};

// A healthy member to snapshot, a follower when there is one (the leader is busiest).
absl::StatusOr<BackupSource> PickBackupSource(EtcdApi& etcd);

// Takes a backup of `source` into `store` under `cluster`. meta.json is written last, after the
// snapshot object is committed, so a crash leaves no listed backup. `taken_by` names the agent
// or tool. Checks the 32-byte sha256 etcd appends to the stream.
// `progress`, if set, gets the bytes streamed so far.
absl::StatusOr<BackupMeta> TakeBackup(EtcdApi& etcd, const BackupSource& source, BackupStore& store,
                                      const std::string& cluster, const std::string& taken_by,
                                      std::chrono::milliseconds timeout,
                                      const std::function<void(uint64_t)>& progress = {});

// A healthy voting member that has applied everything the etcd leader had committed when this
// was called (so every write acknowledged before it is in its snapshot), a follower when one is
// (PickBackupSource's preference). Waits up to `bound` for one to catch up, then settles for
// the one that has applied the most.
absl::StatusOr<BackupSource> PickUpToDateSource(EtcdApi& etcd, std::chrono::milliseconds bound);

// What TakeBackup does once it has a stream: `produce` hands every chunk of a snapshot (etcd's
// trailing sha256 included) to its sink in order and returns the byte count; the chunks are
// compressed and checksummed into the snapshot object of `meta` (its name, cluster and
// descriptive fields set by the caller), which is committed, and meta.json written, only when
// the trailer matches. Returns `meta` with the sizes and hashes filled in.
using SnapshotProducer =
    std::function<absl::StatusOr<uint64_t>(const std::function<absl::Status(std::string_view)>&)>;
// `finish`, if set, may fill in more of the meta right before meta.json is written.
absl::StatusOr<BackupMeta> StoreSnapshotStream(BackupStore& store, BackupMeta meta,
                                               const SnapshotProducer& produce,
                                               const std::function<void(BackupMeta*)>& finish = {});

struct ListedBackup {
  std::string name;
  std::optional<BackupMeta> meta;  // empty if meta.json is missing (incomplete) or unreadable
  std::string error;               // why meta is empty
  // Why a restore found its DB damaged (MarkBackupDamaged), "" if never: such a backup is
  // still listed, but no automatic restore or delta chain takes it.
  std::string damaged;
  // Its last restore drill's record (backup/drill.h's verified.json), "" if none.
  std::string verified_json;
};

// Records in the store that restoring backup `name` found its DB damaged (`why`, by `node`),
// so that automatic restores skip it for an older one. Its files are kept, for a post-mortem.
absl::Status MarkBackupDamaged(BackupStore& store, const std::string& cluster,
                               const std::string& name, const std::string& why,
                               const std::string& node, int64_t now_unix);

// Backups under `cluster`, newest first by (generation, revision) (BackupNewer), never by the
// time in their names. Incomplete ones (no meta.json) come last, listed with an error, never
// silently dropped.
absl::StatusOr<std::vector<ListedBackup>> ListBackups(BackupStore& store,
                                                      const std::string& cluster);

struct VerifyOptions {
  // The stored object's sha256 against meta.json. Off, only its size is checked, and with
  // out_path zstd's own frame checksum (xxh64 of the content) still guards what is written.
  bool hash_stored = true;
  // Decompress and check the DB itself: its size, etcd's trailing sha256 and meta.json's
  // db_sha256. Off, a verified stored sha256 is enough to prove the bytes are those the backup
  // wrote, whose content was checked against etcd's hash when it was taken.
  bool hash_content = true;
  // If set, the snapshot (as etcd streamed it, hash included) is written there, via a temp file
  // renamed only when every check passed. Not fsynced: it is a staging copy. Its decompressed
  // size is checked against meta.json.
  std::string out_path;
  // If set, gets the stored (compressed) bytes read so far.
  std::function<void(uint64_t)> progress;
};

// Streams the backup and checks it as `opts` says. DataLoss names the check that failed.
absl::Status VerifyBackup(BackupStore& store, const std::string& cluster, const BackupMeta& meta,
                          const VerifyOptions& opts = {});

}  // namespace steward
