// etcd's member ID derivation, so the agents can tell an initial-cluster member entry (ID from
// the peer URLs and the cluster token) from one added later (whose ID also mixes in the time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace steward {

// The ID etcd gives a member of the initial cluster: the first 8 bytes (big-endian) of
// SHA-1(sorted peer URLs concatenated + token).
uint64_t InitialMemberId(std::vector<std::string> peer_urls, const std::string& token);

}  // namespace steward
