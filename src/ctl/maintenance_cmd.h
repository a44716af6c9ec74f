// stewardctl's maintenance commands (issue 15): pause and resume the steward leader's
// replacements on a node or the whole cluster, move etcd's leadership, drain a node (move
// leadership away, then pause it), remove a node for good and add it back. The state they write
// is reconcile/maintenance.h's document under MaintenanceKey; the planner honours it (plan.h,
// rules P1-P4 and RM1-RM2). Each command checks what it is about to do against a fresh view of
// the cluster right before it acts.
#pragma once

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "ctl/common.h"
#include "ctl/status.h"

namespace steward {

// Registers pause, resume, move-leader, drain, remove-node and readd-node.
void AddMaintenanceCommands(CLI::App& app, Common* common, Commands* commands);

// remove-node's quorum check, pure: may the voting member of `node` (peer URL `peer_url`) be
// removed from the cluster `view` shows? Refuses (returns the reason) without a leader, when
// the member is the last voter, or when the voters that remain would hold fewer healthy members
// than their quorum. "" when the removal is safe or the node has no member.
std::string RemovalRefusal(const ClusterView& view, const std::string& node,
                           const std::string& peer_url);

}  // namespace steward
