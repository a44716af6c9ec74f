// stewardctl restart: a restart roll (reconcile/restart_roll.h). It names the nodes to restart
// (all, --member's, or with --pending those whose etcd runs with flags the config has changed
// since), stores the request under RestartKey, and follows the steward leader as it restarts
// them one at a time, the etcd leader last. The roll is the leader's: it goes on if this
// command is stopped, and a new steward leader finishes it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "ctl/common.h"
#include "steward_peer.pb.h"

namespace steward {

void AddRestartCommand(CLI::App& app, Common* common, Commands* commands);

// The nodes a roll restarts, pure: `members` (--member) if any, else every configured node
// (`configured`, in order) whose agent answered in `states` with member data, and with
// `pending_only` only those reporting pending flags. Nodes whose agent did not answer are left
// out and named in `*silent`.
std::vector<std::string> RollNodes(const std::vector<std::string>& configured,
                                   const std::map<std::string, peer::NodeState>& states,
                                   const std::vector<std::string>& members, bool pending_only,
                                   std::vector<std::string>* silent);

}  // namespace steward
