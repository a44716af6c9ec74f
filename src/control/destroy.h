// A destroyed cluster (stewardctl destroy / undestroy; docs/operations.md). The store's mark,
// <cluster>/control/destroyed.json, says: the cluster was retired on purpose, its last state is
// the named final backup, and no agent may bootstrap, restore or start this cluster's etcd until
// `stewardctl undestroy` removes the mark. Each agent that carried the destroy out also keeps a
// "destroyed" marker on its disk, so it stays stopped when the store cannot be read. The data
// dirs stay in place: undestroy starts the members on them again.
//
// Whether `stewardctl destroy` may go ahead is a pure function of what it observed (PlanDestroy,
// tabled in tests/unit/destroy_test.cc), asked twice: before the final backup and again right
// before the mark is written. Rules, the first that applies decides:
//   X1 no backup store: refuse — the final backup and the mark live there;
//   X2 the store cannot be read: refuse;
//   X3 the store already marks the cluster destroyed: nothing to do;
//   X4 a restore is under way (or the store cannot tell): refuse;
//   X5 cluster.adopt is set: refuse — members no agent manages would keep running;
//   X6 an agent does not answer: refuse unless --force — its etcd would keep running until its
//      agent comes back (which then finds the mark and stops it);
//   X7 a quorum answers: take a final backup, then destroy;
//   X8 no quorum: with --force and a valid backup in the store, destroy and keep that newest
//      backup as the last state; otherwise refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backup/store.h"

namespace steward {

struct DestroyMark {
  std::string id;  // names this destroy; the agents' markers carry it
  std::string by;  // user@host
  int64_t unix_time = 0;
  std::string final_backup;  // the cluster's last state
  int64_t revision = 0;      // of the final backup
  std::string reason;
};

// nullopt when the store holds no mark; DataLoss for a damaged mark (never read as "none").
absl::StatusOr<std::optional<DestroyMark>> ReadDestroyMark(BackupStore& store,
                                                           const std::string& cluster);
absl::Status WriteDestroyMark(BackupStore& store, const std::string& cluster,
                              const DestroyMark& mark);
absl::Status ClearDestroyMark(BackupStore& store, const std::string& cluster);
// "cluster demo was destroyed by root@host at 2026-11-26 17:00:00Z (...); its last state is
// backup NAME; `stewardctl undestroy` brings it back"
std::string DescribeDestroyMark(const std::string& cluster, const DestroyMark& mark);

struct DestroyView {
  bool has_store = true;
  bool store_ok = true;
  std::string store_error;
  std::optional<DestroyMark> mark;
  bool restore_may_be_under_way = false;
  bool adopting = false;
  std::vector<std::string> silent_agents;    // configured nodes whose agent did not answer
  bool quorum = false;                       // a linearizable read succeeded
  std::optional<std::string> newest_backup;  // a valid backup of this cluster, newest first
  bool force = false;
};

enum class DestroyStep {
  kRefuse,
  kAlready,           // X3
  kFinalBackupFirst,  // X7
  kKeepNewestBackup,  // X8 with --force
};

struct DestroyPlan {
  DestroyStep step = DestroyStep::kRefuse;
  std::string rule;    // "X1".."X8"
  std::string reason;  // for a refusal: why, and what to do
};

DestroyPlan PlanDestroy(const DestroyView& view);

}  // namespace steward
