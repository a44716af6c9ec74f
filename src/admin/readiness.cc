#include "admin/readiness.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace steward {

std::optional<std::string> NotReady(const ReadyView& v) {
  if (!v.etcd_running) return "etcd is not running on this node";
  if (v.fenced) return "this member was restored and is fenced until the restore settles";
  if (!v.status_ok) return absl::StrCat("etcd does not answer: ", v.status_error);
  if (!v.errors.empty()) return absl::StrCat("etcd reports: ", absl::StrJoin(v.errors, "; "));
  if (!v.has_leader) return "the member has no leader (no quorum, or an election)";
  if (v.is_learner) return "the member is a learner (catching up, not yet promoted)";
  // etcd < 3.4 does not report the applied index (0): no lag check there.
  if (v.raft_applied_index != 0 && v.raft_index > v.raft_applied_index + kReadyApplyLag) {
    return absl::StrCat("the member has applied ", v.raft_applied_index, " of ", v.raft_index,
                        " committed entries");
  }
  return std::nullopt;
}

}  // namespace steward
