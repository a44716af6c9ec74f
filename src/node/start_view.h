// What a node observes before its start decision (DecideStart, node/start_decision.h),
// gathered through the seams only — the other nodes' etcd (EtcdApi), the other initial agents
// (PeerApi) and the backup store — so the agent and the deterministic simulation (tests/sim/)
// run the same code. Read in the order of DecideStart's rules: what an earlier rule decides is
// not asked of the network.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "backup/store.h"
#include "config/config.h"
#include "etcd/api.h"
#include "etcd/wal.h"
#include "node/start_decision.h"
#include "peer/api.h"

namespace steward {

// What the node's own disk says.
struct StartFacts {
  DataDirState data = DataDirState::kEmpty;
  bool ever_joined = false;             // the "joined" marker
  std::string destroyed;                // the "destroyed" marker: the destroy's id ("" if none)
  std::optional<WalIdentity> identity;  // the WAL's, for a member's data (RM3)
};

// `peers` reaches the other nodes' client URLs; `initial_agents` the other initial nodes'
// agents (for S6); `store` may be null. `parallel`: ask the agents concurrently.
StartView GatherStartView(const Config& config, const StartFacts& facts, EtcdApi& peers,
                          const std::map<std::string, PeerApi*>& initial_agents, BackupStore* store,
                          bool parallel);

// RM3's question for a member's data: why `id`'s member is provably out of its cluster ("" if
// it is not, or the others cannot show it). One linearizable member list through `peers`.
std::string MemberRemovedWhy(EtcdApi& peers, const WalIdentity& id);

// S6's question: every other initial agent answers, and none was part of a running cluster or
// holds data other than this same bootstrap. `why` lists what stands against it.
bool InitialPeersAllowBootstrap(const std::map<std::string, PeerApi*>& initial_agents,
                                bool parallel, std::string* why);

}  // namespace steward
