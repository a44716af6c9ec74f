// etcd's own record of its membership in the backend (the "members" bucket of member/snap/db),
// checked against the live member list. etcd 3.5.1-3.5.19 did not persist a learner's promotion
// to this bucket (etcd #19557; a snapshot from such a member during a roll, #20793, is a second
// path): the raft member list says voter, the bucket still says learner. etcd 3.6 reads the
// bucket, and refuses to start such a member ("membership: too many learner members in
// cluster"). The agent reads its own member's bucket and names what differs before anyone rolls
// to 3.6 (docs/etcd-versions.md says how to fix it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "etcd/api.h"

namespace steward {

struct BoltMember {
  uint64_t id = 0;
  std::string name;
  bool is_learner = false;
};

// The "members" bucket of the bbolt file at `db_path` (a member's member/snap/db, or a snapshot):
// one entry per key, a member as etcd marshals it to JSON. Read-only. NotFound without the
// bucket; DataLoss for an entry that is not such JSON, naming its key.
absl::StatusOr<std::vector<BoltMember>> ReadMembersBucket(const std::string& db_path);

// Pure: one sentence per member on which `db` and the live member list `live` disagree — a
// learner flag that differs (#19557), a member only in the DB (a removed member etcd kept), one
// only in the live list. Empty when they agree.
std::vector<std::string> MembershipDisagreements(const std::vector<BoltMember>& db,
                                                 const std::vector<MemberInfo>& live);

}  // namespace steward
