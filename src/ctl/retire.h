// `stewardctl retire-unmanaged`: after the agents adopted a running cluster (cluster.adopt) and
// grew it to its size with members of their own, the members no agent manages are removed, one
// at a time, each removal checked against quorum. Which member goes next, or why none may, is a
// pure function of the cluster's status (tests/unit/retire_test.cc tables it).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ctl/status.h"

namespace steward {

struct RetireStep {
  enum Kind {
    kRemove,  // remove `member_id`
    kRefuse,  // nothing may be removed now; `reason` says why
    kDone,    // no unmanaged member is left
  };
  Kind kind = kDone;
  uint64_t member_id = 0;
  std::string name;
  std::string reason;
};

// `managed`: the configured nodes' peer URL -> node name. A member on a node's peer URL under
// another name is an adopted member on the same host and port, not the node's (`size`: the
// desired voting members).
// Rules:
//   T1 nothing is removed unless the cluster has a leader and at least `size` managed voters
//      are healthy (the agents finished growing it);
//   T2 a removal must leave a quorum of healthy voters among the voters that remain, and the
//      healthy managed voters alone must hold a quorum of those voters once every unmanaged
//      one is gone;
//   T3 order: unmanaged learners, then unhealthy unmanaged voters, then healthy ones, the etcd
//      leader last.
//   T4 every member that answers must answer for the member list's cluster and as itself:
//      otherwise the view mixes two clusters and nothing is removed.
RetireStep NextRetirement(const ClusterView& view,
                          const std::map<std::string, std::string>& managed, int size);

}  // namespace steward
