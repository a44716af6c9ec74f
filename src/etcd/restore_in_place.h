// A member's `snapshot restore` done in place: the backup's DB has been decompressed straight
// into <data dir>/member/snap/db, and this makes that data dir what `etcdutl snapshot restore`
// would have made of it (a new cluster of the given initial members), without copying the DB:
//   - the DB (etcd/bolt.h): the "members" bucket holds the new members and "members_removed"
//     nothing; "meta" gets the consistent index and term of the new WAL's snapshot; with a bump,
//     a revision `bump` past the DB's newest is added to "key" and marked compacted;
//   - the WAL: the member and cluster ID, one configuration entry per member, the hard state
//     and a snapshot record;
//   - the .snap file: etcd's v2 store with the members, at the same index.
// The IDs are etcd's own for an initial cluster (member: SHA-1 of peer URLs + token; cluster:
// SHA-1 of the sorted member IDs), so the result is interchangeable with the tool's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace steward {

// etcd's WAL segment size (wal.SegmentSizeBytes): each segment file is preallocated to it.
inline constexpr uint64_t kWalSegmentBytes = 64 * 1024 * 1024;

struct InPlaceRestore {
  std::string data_dir;  // etcd's --data-dir; member/snap/db must hold the snapshot's DB
  std::string name;      // this member's name
  std::string peer_url;  // its --initial-advertise-peer-urls (must be its initial-cluster URL)
  std::string token;     // --initial-cluster-token
  std::vector<std::pair<std::string, std::string>> initial_cluster;  // name -> peer URL
  uint64_t bump_revision = 0;  // > 0: raise the revision by this much and mark it compacted
  // Only check that the edit can be made: the input, and the DB read as the edit reads it
  // (opened read-only; the edits are staged in memory and dropped). Nothing is written.
  bool check_only = false;
};

// Errors leave the data dir unusable. The DB changes only at the end of its edit (one meta page
// written): `db_changed` (optional) says whether it did, so that a DB this code refused can
// still be restored by the tool as it was.
absl::Status RestoreInPlace(const InPlaceRestore& r, bool* db_changed = nullptr);

// etcd's cluster ID for an initial cluster of these member IDs.
uint64_t InitialClusterId(std::vector<uint64_t> member_ids);

// CRC-32C (Castagnoli), continuing from `crc`, as etcd's WAL and snap files use it.
uint32_t Crc32c(uint32_t crc, const char* data, size_t n);

}  // namespace steward
