// Plain etcd snapshot files, as `etcdctl snapshot save` writes them: a bbolt database followed,
// when it came from Maintenance.Snapshot, by a 32-byte sha256 of everything before it (etcd's
// rule: a file whose size modulo 512 is 32 carries the trailer; a bare bbolt file is a whole
// number of pages). What stewardctl's snapshot save, backup export and restore-backup
// --from-file need: inspect such a file without etcd, and import one into the backup store.
//
// Thread-compatible: each call is independent.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "backup/layout.h"
#include "backup/store.h"

namespace steward {

struct SnapshotFileInfo {
  uint64_t size = 0;         // the file, trailer included
  bool has_trailer = false;  // size % 512 == 32
  uint32_t page_size = 0;
  uint64_t txid = 0;
  // From the bbolt buckets etcd keeps (0 / "" when absent):
  int64_t revision = 0;           // the highest key revision ("key" bucket)
  uint64_t consistent_index = 0;  // "meta" bucket: the raft index the snapshot reflects
  std::string cluster_version;    // "cluster" bucket: "3.4.0"
  uint64_t keys = 0;              // entries of the "key" bucket (revisions, not live keys)
};

// Reads the bbolt structure of the file at `path` (never writes it): at least one meta page
// with bbolt's magic, version 2 and a valid checksum, and etcd's "key" bucket reachable from
// it through sane pages. Does not hash the file. InvalidArgument names what is wrong (not a
// bbolt file, not etcd's, truncated); NotFound / PermissionDenied from the filesystem.
absl::StatusOr<SnapshotFileInfo> InspectSnapshotFile(const std::string& path);

// Streams the file and checks etcd's sha256 trailer. DataLoss if it does not match (or the file
// has none). `progress` gets the bytes read so far.
absl::Status CheckSnapshotTrailer(const std::string& path,
                                  const std::function<void(uint64_t)>& progress = {});

struct ImportOptions {
  // A file without etcd's trailer (a copy of a member's db file) is refused unless this is set;
  // it is then stored with a trailer computed here, so every later check and export works as
  // for a streamed snapshot.
  bool skip_hash_check = false;
  std::string taken_by = "stewardctl";  // meta.json's node
  std::function<void(uint64_t)> progress;
};

// Imports the snapshot file at `path` (inspected as `info`) into `store` as a backup of
// `cluster`: zstd-compressed and checksummed as TakeBackup stores one, with meta.json's
// `imported_from` set to `path` and its revision, raft index and etcd version taken from the
// file. The trailer is checked while the file streams; the snapshot object is committed (and
// meta.json written) only when it matches, so a bad file leaves nothing in the store.
// `generation` is meta.json's generation (see BackupMeta).
absl::StatusOr<BackupMeta> ImportSnapshotFile(BackupStore& store, const std::string& cluster,
                                              const std::string& path, const SnapshotFileInfo& info,
                                              int64_t generation, const ImportOptions& opts);

}  // namespace steward
