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

}  // namespace steward
