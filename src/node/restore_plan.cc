#include "node/restore_plan.h"

#include "absl/strings/str_cat.h"
#include "common/rules.h"
#include "etcd/version.h"

namespace steward {

NodeRestorePlan PlanNodeRestore(const NodeRestoreFacts& f) {
  NodeRestorePlan p;
  const bool only_in_place = f.bump_revision > 0 && f.etcdutl.empty();
  if (f.member && only_in_place && !f.restore_in_place && !RuleOff("NR1")) {
    p.refusal = absl::FailedPreconditionError(
        "this restore raises the revision, and on this node neither etcd.etcdutl is set nor "
        "etcd.restore_in_place on");
    return p;
  }
  if (f.member) {
    auto from = ParseVersion(f.backup_version);
    auto to = ParseVersion(f.node_version);
    p.unknown_version = !to.has_value();
    if (MinorBelow(f.node_version, f.backup_version) && !RuleOff("NR2")) {
      p.refusal = absl::FailedPreconditionError(absl::StrCat(
          "backup ", f.backup, " was taken from etcd ", f.backup_version, "; this node runs ",
          f.node_version,
          ", an older version, and etcd does not support downgrades: switch the "
          "nodes to ",
          (*from)[0], ".", (*from)[1], " first (etcd.versions, configure-cluster --etcd-version)"));
      return p;
    }
  }
  const bool etcd35 = !MinorBelow(f.node_version, "3.5.0") && ParseVersion(f.node_version);
  p.tool = only_in_place                                             ? ""
           : (f.bump_revision > 0 || (etcd35 && !f.etcdutl.empty())) ? f.etcdutl
                                                                     : f.etcdctl;
  p.check_in_place_first = f.member && only_in_place;
  return p;
}

}  // namespace steward
