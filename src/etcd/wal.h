// Reads the member and cluster ID that etcd records at the start of every WAL segment, so the
// agent knows which member its data dir belongs to even while etcd is down.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace steward {

struct WalIdentity {
  uint64_t member_id = 0;
  uint64_t cluster_id = 0;
};

// `etcd_data_dir` is etcd's --data-dir. NotFound when it holds no WAL; DataLoss when the first
// records cannot be decoded.
absl::StatusOr<WalIdentity> ReadWalIdentity(const std::string& etcd_data_dir);

// The highest raft commit index recorded in the WAL's HardState records (0 if none). A fresh
// bootstrap commits only the initial members' configuration entries (one per member); a commit
// above that count means a leader was elected and a majority accepted its entries: the member
// has been part of a running cluster, whether or not its agent saw the leader. Reads every
// segment up to its zero-filled tail, so call it only while that is still in doubt.
absl::StatusOr<uint64_t> ReadWalCommit(const std::string& etcd_data_dir);

}  // namespace steward
