// `stewardctl status`: a view of the cluster gathered from etcd, and its renderings.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "etcd/client.h"
#include "nlohmann/json.hpp"

namespace steward {

struct MemberRow {
  MemberInfo member;
  std::optional<MemberStatus> status;  // empty when the member did not answer
  std::string error;                   // why it did not answer
  std::string role;                    // leader, follower, learner, unreachable, not started
  bool healthy = false;                // answers with a leader; alarms do not count against it
  std::vector<std::string> alarms;     // active alarms it reports (NOSPACE, CORRUPT)
};

// A node from the config that has no member entry (a spare, or a node waiting to be added).
struct NodeRow {
  std::string name;
  std::string peer_url;
};

struct ClusterView {
  bool reachable = false;  // some endpoint answered MemberList
  std::string error;       // why not
  uint64_t cluster_id = 0;
  uint64_t list_cluster_id = 0;  // the cluster of the member that answered the member list
  uint64_t leader_id = 0;
  std::vector<MemberRow> members;
  std::vector<NodeRow> non_members;
  bool healthy = false;  // reachable, a leader, every member healthy, no alarm
  std::vector<std::string> alarms;  // "NOSPACE on n2", one per alarm and member reporting it
  int voters = 0;
  int healthy_voters = 0;
  bool quorum = false;   // healthy voters form a quorum of the voters
};

// Asks any endpoint for the member list, then each member's Status in parallel. `nodes`
// (name, peer URL) from a config adds rows for configured nodes that are not members.
// `linearizable`: the list through a quorum read (a removed or cut-off member cannot answer it
// from its own stale state) — for decisions, not just display.
ClusterView CollectStatus(EtcdClient& client, std::chrono::milliseconds timeout,
                          const std::vector<NodeRow>& nodes = {}, bool linearizable = false);

std::string RenderStatusTable(const ClusterView& view);
nlohmann::json StatusToJson(const ClusterView& view);

// "1.5 MB" style sizes for tables.
std::string HumanBytes(int64_t n);

}  // namespace steward
