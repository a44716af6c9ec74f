// The control objects every agent runs, and how they reach each other: the node side
// (LocalNode), the leadership, the restore coordinator and the reconciler, whose restore check,
// leader confirmation and epoch floor are the other objects'. The agent (agent.cc, Wire) builds
// them over real clients, processes and files, and the simulation (tests/sim/agent_wiring.cc)
// over its models, both through WireControl: what the simulation checks is linked as the agent
// runs it.
#pragma once

#include <memory>

#include "backup/scheduler.h"
#include "backup/store.h"
#include "config/config.h"
#include "control/env.h"
#include "etcd/api.h"
#include "node/local_node.h"
#include "peer/leadership.h"
#include "reconcile/reconciler.h"
#include "restore/coordinator.h"

namespace steward {

// What the control objects are built over; every pointer must outlive them.
struct ControlSeams {
  const Config* config = nullptr;
  EtcdApi* cluster = nullptr;          // every member's client URL (leadership, restore, reconcile)
  BackupStore* store = nullptr;        // null: no backup.store, so no restore coordinator
  BackupScheduler* backups = nullptr;  // the reconciler's backups before risky steps (may be null)
  LocalNodeEnv node;                   // this node's disk, runner and clients
  ControlEnv restore_env;              // the coordinator's agents, etcd handles and clock
  ControlEnv reconcile_env;            // the reconciler's
};

struct ControlParts {
  std::unique_ptr<LocalNode> node;
  std::unique_ptr<Leadership> leadership;
  std::unique_ptr<RestoreCoordinator> restorer;  // null without a store
  std::unique_ptr<Reconciler> reconciler;
};

ControlParts WireControl(ControlSeams seams);

}  // namespace steward
