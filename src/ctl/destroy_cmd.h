// stewardctl destroy / undestroy (issue 15, part 6): retire a cluster without losing its last
// state, and bring it back.
//   destroy: PlanDestroy (reconcile/destroy.h) on what is observed; a final backup (or, with
//     --force and no quorum, the newest backup) as the last state; the plan asked again; the
//     store's destroy mark; then every agent is asked to carry it out (each checks the mark
//     itself, stops its etcd, moves its data dir aside and keeps a marker). From then on no
//     agent bootstraps, restores or starts this cluster (start rules SD1/SD2, restore rule R7).
//     Run again, it retries the agents that have not carried it out.
//   undestroy: the mark goes, then every agent drops its marker. The nodes are empty and the
//     store shows the cluster existed: with backup.auto_restore on, the agents restore the
//     newest backup — the final one — by themselves.
#pragma once

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

void AddDestroyCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
