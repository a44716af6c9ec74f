// How a node carries out a restore order, decided without I/O from what it knows (rules
// NR1-NR4). LocalNode::Restore (node_restore.cc) asks it after it fetched the backup's
// meta.json and before it stops anything, so a refusal leaves the node as it was.
//   NR1 a restore that raises the revision needs a means to: etcd.etcdutl (etcd >= 3.5's
//       `snapshot restore --bump-revision`) or etcd.restore_in_place (the in-place edit).
//       Neither: refused.
//   NR2 never a backup from a newer minor version than the node runs: etcd does not support
//       downgrades. (A node with no data first switches to a binary of the backup's version
//       when it has one: rule EV1, etcd/version.h.) An unknown node version is not refused.
//   NR3 the tool: only the in-place edit when the revision must be raised without etcdutl;
//       etcdutl when the revision is raised, or the node runs etcd >= 3.5 and etcdutl is set
//       (3.5 moved `snapshot restore` there); else etcdctl.
//   NR4 with only the in-place edit (no fallback), the staged DB is checked before the node is
//       touched; a DB the edit refuses is reported (bump_refused), the file system's own
//       errors are retried.
// Thread-safe: a pure function.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace steward {

struct NodeRestoreFacts {
  bool member = true;            // this node is in the restored cluster
  uint64_t bump_revision = 0;    // the order's revision bump
  std::string etcdutl;           // etcd.etcdutl ("" none)
  std::string etcdctl;           // etcd.etcdctl
  bool restore_in_place = true;  // etcd.restore_in_place
  std::string backup;            // the backup's name, for messages
  std::string backup_version;    // the etcd version the backup was taken from ("" unknown)
  std::string node_version;      // the etcd version this node runs ("" unknown)
};

struct NodeRestorePlan {
  absl::Status refusal;  // not OK: refuse the order (NR1, NR2); nothing is touched
  std::string tool;      // NR3: etcdutl's or etcdctl's path, "" for the in-place edit only
  bool check_in_place_first = false;  // NR4
  bool unknown_version = false;       // NR2 could not check: say so in the log
};

NodeRestorePlan PlanNodeRestore(const NodeRestoreFacts& f);

}  // namespace steward
