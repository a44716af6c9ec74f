// stewardctl recover-quorum (issue 15, part 4): a cluster whose majority of members is gone for
// good, but whose survivors still hold data, is rebuilt from the survivor that has the most:
// Steps 1-3 are DecideRecover (restore/recover_decision.h, rules Q1-Q9) on what was observed.
//   1. refuse while a quorum answers (a linearizable member list succeeds): nothing is lost
//      then, and the leader heals by itself;
//   2. ask every configured member's etcd for its status (served locally, without a quorum)
//      and pick the survivor with the highest raft index, or the one named by --from;
//   3. print what will happen and what can be lost (only what no survivor holds: entries past
//      the chosen survivor's index), and ask;
//   4. stream a snapshot from that survivor (etcd serves it locally too), verify it, import it
//      into the backup store as a backup, and restore the whole cluster from it through the
//      same restore path as restore-backup (fenced, every node, then a backup of the result).
// We restore rather than restart the survivor with --force-new-cluster: the restore path is the
// one the simulation and the fault suite prove, every node comes back in one step rather than
// one learner at a time, and the survivor's data is the snapshot, so nothing more is lost. The
// restored cluster gets a new cluster ID and bumped revisions, as after any restore.
#pragma once

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

void AddRecoverCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
