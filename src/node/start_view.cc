#include "node/start_view.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/fan_out.h"
#include "control/destroy.h"
#include "control/env.h"
#include "control/records.h"
#include "etcd/member_id.h"

namespace steward {

using std::chrono::milliseconds;

bool InitialPeersAllowBootstrap(const std::map<std::string, PeerApi*>& initial_agents,
                                bool parallel, std::string* why) {
  std::vector<std::string> names;
  std::vector<std::function<absl::StatusOr<peer::NodeState>()>> calls;
  for (const auto& [name, client] : initial_agents) {
    PeerApi* c = client;
    names.push_back(name);
    calls.push_back([c] { return c->GetState(milliseconds(1000)); });
  }
  auto states = FanOut(parallel, calls);
  std::vector<std::string> problems;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& st = states[i];
    if (!st.ok()) {
      problems.push_back(absl::StrCat(names[i], " does not answer"));
    } else if (st->ever_joined()) {
      problems.push_back(absl::StrCat(names[i], " has been a member of a running cluster"));
    } else if ((st->has_data() || st->etcd_running()) && !st->bootstrapping()) {
      problems.push_back(absl::StrCat(names[i], " holds member data"));
    }
  }
  *why = absl::StrJoin(problems, ", ");
  return problems.empty();
}

std::string MemberRemovedWhy(EtcdApi& peers, const WalIdentity& id) {
  if (peers.endpoints().empty()) return "";
  uint64_t list_cluster = 0;
  auto members = peers.LinearizableMemberList(&list_cluster);
  std::vector<uint64_t> ids;
  if (members.ok()) {
    for (const auto& m : *members) ids.push_back(m.id);
  }
  if (!MemberRemoved(id.member_id, id.cluster_id, members.ok(), list_cluster, ids)) return "";
  return absl::StrCat("member ", HexId(id.member_id), " of this data dir is no longer in cluster ",
                      HexId(id.cluster_id),
                      " (the member list a quorum serves lacks it): not "
                      "starting its etcd; the leader sets the data aside and adds the node back, "
                      "unless the node was removed for good (stewardctl readd-node ends that)");
}

StartView GatherStartView(const Config& config, const StartFacts& facts, EtcdApi& peers,
                          const std::map<std::string, PeerApi*>& initial_agents, BackupStore* store,
                          bool parallel) {
  const NodeSpec& self = config.self();
  StartView v;
  v.node = self.name;
  v.data = facts.data;
  v.ever_joined = facts.ever_joined;
  v.adopting = config.cluster.adopt.enabled();
  for (int i = 0; i < config.cluster.size; ++i) {
    if (config.cluster.nodes[static_cast<size_t>(i)].name == self.name) v.initial = true;
  }
  v.local_destroyed = facts.destroyed;
  // The destroy mark, at every start decision (they are rare). An unreadable store stops only
  // a node that recorded a destroy (SD1): a store outage must not keep a member down.
  {
    if (store == nullptr) {
      v.destroy_store_error = "no backup store is configured";
    } else if (auto mark = ReadDestroyMark(*store, config.cluster.name); !mark.ok()) {
      v.destroy_store_error = std::string(mark.status().message());
    } else {
      v.destroy_store_ok = true;
      if (mark->has_value()) {
        v.destroyed = DescribeDestroyMark(config.cluster.name, **mark);
        v.destroyed_id = (*mark)->id;
      }
    }
  }
  if (!v.local_destroyed.empty() || !v.destroyed.empty()) return v;
  if (v.data == DataDirState::kMember && facts.identity) {
    v.member_removed = MemberRemovedWhy(peers, *facts.identity);
  }
  if (v.data != DataDirState::kEmpty || v.ever_joined || !v.initial || v.adopting) return v;
  // Does a cluster already run that knows this node? A bootstrapping etcd does not answer
  // client requests until it has a leader, so silence here means "no cluster yet".
  if (!peers.endpoints().empty()) {
    if (auto members = peers.LinearizableMemberList(); members.ok()) {
      const std::string my_peer = config.PeerUrl(self);
      const MemberInfo* mine = nullptr;
      for (const auto& m : *members) {
        for (const auto& u : m.peer_urls) {
          if (u == my_peer) mine = &m;
        }
      }
      // Members of the initial cluster carry their names from the start; what shows that a
      // member has run is that it published client URLs (etcd's own bootstrap check). An
      // entry whose ID is not the initial one was added later and is the leader's to handle.
      const uint64_t initial_id = InitialMemberId({my_peer}, config.ClusterToken());
      v.cluster = mine == nullptr ? ClusterAnswer::kWithoutThisNode
                  : (!mine->client_urls.empty() || mine->id != initial_id)
                      ? ClusterAnswer::kEntryHasRun
                      : ClusterAnswer::kInitialEntryUnstarted;
    }
  }
  if (v.cluster != ClusterAnswer::kSilent) return v;
  v.peers_allow = InitialPeersAllowBootstrap(initial_agents, parallel, &v.peers_why);
  if (!v.peers_allow) return v;
  if (store != nullptr) {
    v.has_store = true;
    auto existed = ClusterEverExisted(*store, config.cluster.name);
    if (!existed.ok()) {
      v.store_ok = false;
      v.store_error = std::string(existed.status().message());
    } else {
      v.cluster_existed = *existed;
    }
  }
  return v;
}

}  // namespace steward
