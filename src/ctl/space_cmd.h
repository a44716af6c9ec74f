// `stewardctl defrag`, `stewardctl alarm list` and `stewardctl alarm disarm`: the backend's
// space by hand (reconcile/space.h has the order and the leader's own NOSPACE recovery).
//
// defrag: one member at a time, followers and learners first, the etcd leader last; each
// member is looked at again right before its turn (it must answer, and blocking it must leave
// a quorum of the other voters answering). Stops at the first failure and names the member;
// skips members that do not answer, says so and exits 1. Prints each member's DB size before
// and after (table, or -o json).
//
// alarm list: every active alarm, with the member's name. alarm disarm: clears every active
// alarm (etcdctl's `alarm disarm`) and prints each one it cleared; a member still over its
// quota raises NOSPACE again on its next write, so compact and defrag first.
#pragma once

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

void AddSpaceCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
