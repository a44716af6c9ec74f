// stewardctl destroy / undestroy (issue 15, part 6): retire a cluster without losing its last
// state, and bring it back.
//   destroy: PlanDestroy (control/destroy.h) on what is observed; a final backup (or, with
//     --force and no quorum, the newest backup) as the last state; the plan asked again; the
//     store's destroy mark; then every agent is asked to carry it out (each checks the mark
//     itself, records it on its disk and stops its etcd; the data stays in place). From then
//     on no agent bootstraps, restores or starts this cluster (start rules SD1/SD2, restore
//     rule R7); an agent that missed the order carries it out when it next starts or decides
//     to start etcd. Run again, it retries the agents that have not carried it out.
//   undestroy: the mark goes, then every agent drops its marker. Nodes with their data start
//     on it (nothing is lost); if every node is empty, the store shows the cluster existed and,
//     with backup.auto_restore on, the agents restore the newest backup — the final one.
#pragma once

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

void AddDestroyCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
