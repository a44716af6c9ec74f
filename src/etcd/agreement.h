// Do the members hold the same data? etcd's HashKV of each member at one shared revision,
// compared: the members that agree with a majority of the voters, and the ones that differ.
//
// A member can diverge silently (etcd #13766 on 3.5.0-3.5.2, bit-rot on disk): it keeps
// answering reads, even linearizable ones, with its own wrong values. etcd's own corruption
// checks are off by default. This is the check the steward leader runs every few minutes and
// the backup picks its source by (docs/running.md, "A member whose data differs").
//
// JudgeHashes is pure (tests/unit/agreement_test.cc); CompareMembers does the calls. Rules:
//   DV1 only hashes at the same revision and the same compaction revision are compared (HashKV
//       hashes what compaction keeps); a member that did not answer, or answered for another
//       compaction, is "unknown", never "differs".
//   DV2 a hash held by a majority of the voting members (Quorum(voters), counted over voters
//       only) is the cluster's; every member whose comparable hash is another differs, a
//       learner included.
//   DV3 with no such majority nothing differs (no member is judged by a minority): the verdict
//       says that no majority agrees, and who holds which hash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "etcd/api.h"

namespace steward {

struct HashSample {
  std::string member;  // its name (or hex ID if unnamed)
  uint64_t id = 0;
  bool voter = true;
  std::optional<EtcdApi::KvHash> hash;  // empty: it did not answer
  std::string error;                    // why not
};

struct HashVerdict {
  int64_t revision = 0;
  int64_t compact_revision = 0;
  bool majority = false;  // DV2: a majority of the voters agrees
  uint32_t majority_hash = 0;
  std::vector<std::string> agreeing;   // members holding the majority's hash
  std::vector<std::string> differing;  // DV2: members holding another hash
  std::vector<std::string> unknown;    // DV1: not answered or not comparable
  bool split = false;                  // DV3: two or more hashes and no majority
  std::string text;                    // one line for logs, status and history
};

HashVerdict JudgeHashes(int64_t revision, const std::vector<HashSample>& samples, int voters);

// HashKV of every started member with a client URL, at the lowest revision every answering
// member has reached (so each can hash it), then JudgeHashes. Retries once at a fresh revision
// when a compaction lands between the calls. An error only if the member list or every Status
// call fails.
absl::StatusOr<HashVerdict> CompareMembers(EtcdApi& etcd, std::chrono::milliseconds timeout);

}  // namespace steward
