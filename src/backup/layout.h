// The backup layout in a store, documented in docs/backup-layout.md:
//   <cluster>/backups/<YYYYMMDDTHHMMSSZ>-<revision, 20 digits>/snapshot.db.zst
//   <cluster>/backups/<...>/meta.json        written last: its presence marks a complete backup
//   <cluster>/control/created.json           written once a cluster has been created
//   <cluster>/control/destroyed.json         stewardctl destroy's mark, until undestroy
// (the store's own prefix, e.g. an S3 prefix, comes before <cluster>). Pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace steward {

struct BackupMeta {
  std::string name;     // the backup's directory name
  std::string cluster;  // cluster name from the config
  std::string etcd_version;
  uint64_t cluster_id = 0;
  int64_t revision = 0;  // the member's revision as the snapshot began: it holds at least this
  // Its revision once the snapshot was streamed: it holds nothing above this (0: unknown, a
  // backup from before delta backups). A point-in-time restore starts only from a backup
  // whose revision_max is at or before the point.
  int64_t revision_max = 0;
  int64_t finished_unix_ms = 0;  // when revision_max was read (0: unknown)
  uint64_t raft_index = 0;
  uint64_t db_size = 0;          // bytes of the snapshot as etcd streamed it (incl. its hash)
  uint64_t compressed_size = 0;  // bytes of snapshot.db.zst
  std::string sha256;            // hex sha256 of snapshot.db.zst (what is stored)
  std::string db_sha256;         // hex sha256 of the uncompressed snapshot
  std::string compression = "zstd";
  std::string member;     // name of the member it was taken from
  std::string node;       // the agent (or "stewardctl") that took it
  int64_t unix_time = 0;  // when it was taken, seconds since the epoch (UTC)
  // How many restores lie behind the cluster it was taken of (0: never restored). Backups are
  // ordered by (generation, revision): a restore to an older backup starts a new generation,
  // so the abandoned history's higher revisions never win over the restored cluster's.
  int64_t generation = 0;
  // Set when the snapshot came from a file (stewardctl restore-backup --from-file): the file's
  // path. An automatic restore never picks such a backup: it restores only what the cluster
  // backed up itself.
  std::string imported_from;
  // The id of the key snapshot.db.zst is encrypted with (backup.encryption; "": in clear).
  // sha256 and compressed_size describe the compressed stream before encryption.
  std::string encryption_key_id;
};

// Newest first: higher generation, then higher revision, then name. Never the clock: a backup
// named by a clock hours ahead must not win over a later revision.
bool BackupNewer(const BackupMeta& a, const BackupMeta& b);
// The taker's clock was ahead: the backup's time is more than `tolerance_s` past `now`.
bool BackupTimeInFuture(const BackupMeta& m, int64_t now, int64_t tolerance_s = 300);

std::string BackupName(std::chrono::system_clock::time_point t, int64_t revision);
// Parses a backup name; nullopt if it is not one.
std::optional<std::pair<int64_t, int64_t>> ParseBackupName(
    const std::string& name);  // unix time, revision

std::string BackupsPrefix(const std::string& cluster);  // "<cluster>/backups/"
std::string SnapshotKey(const std::string& cluster, const std::string& name);
std::string MetaKey(const std::string& cluster, const std::string& name);
// Written when a restore found the backup's DB damaged (valid checksums, a page that is not):
// an automatic restore skips it from then on. <cluster>/backups/<name>/damaged.json
std::string DamagedMarkKey(const std::string& cluster, const std::string& name);
std::string CreatedMarkerKey(const std::string& cluster);
// The control records (docs/backup-layout.md): the restore intent, the highest revision seen,
// the last known voting members.
std::string RestoreIntentKey(const std::string& cluster);   // <cluster>/control/restore.json
std::string RevisionRecordKey(const std::string& cluster);  // <cluster>/control/revision.json
std::string MembersRecordKey(const std::string& cluster);   // <cluster>/control/members.json
std::string EpochRecordKey(const std::string& cluster);     // <cluster>/control/epoch.json
std::string DestroyMarkKey(const std::string& cluster);     // <cluster>/control/destroyed.json

nlohmann::json MetaToJson(const BackupMeta& m);
absl::StatusOr<BackupMeta> MetaFromJson(const std::string& text);

}  // namespace steward
