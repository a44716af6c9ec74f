// The cluster's status as the agents' admin port and stewardctl gather it: every member's
// Status, asked in parallel through the etcd client, and the steward's own records (leader,
// reconciler step, backups, spec, maintenance) from the cluster's reserved prefix. The status
// page (admin/status_page.h) and `stewardctl status` (ctl/status.h) render it.
//
// No state; thread-safe as the etcd client is.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
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
  bool healthy = false;             // reachable, a leader, every member healthy, no alarm
  std::vector<std::string> alarms;  // "NOSPACE on n2", one per alarm and member reporting it
  int voters = 0;
  int healthy_voters = 0;
  bool quorum = false;  // healthy voters form a quorum of the voters
};

// Asks any endpoint for the member list, then each member's Status in parallel. `nodes`
// (name, peer URL) from a config adds rows for configured nodes that are not members.
// `linearizable`: the list through a quorum read (a removed or cut-off member cannot answer it
// from its own stale state) — for decisions, not just display.
ClusterView CollectStatus(EtcdClient& client, std::chrono::milliseconds timeout,
                          const std::vector<NodeRow>& nodes = {}, bool linearizable = false);

// The view as JSON (`stewardctl status -o json`, and the status page's members).
nlohmann::json StatusToJson(const ClusterView& view);

// The steward's own state from the cluster's reserved prefix (etcd/keys.h): "leader" (the
// steward leader's node name), "reconciler" (its last published step: leader, term, step,
// detail, at), "backups" (the backup scheduler's last result), "spec" (configure-cluster) and
// "maintenance" (reconcile/maintenance.h's pauses, each with "active", and removed nodes).
// A key that is missing or unreadable is left out: an empty object when nothing answers.
// The four reads run in parallel, each with the client's deadline. `local`: while the quorum
// is lost, serializable reads of what a member holds (answered at once, not after the
// deadline), marked "local": true; the leader key is then no leader's (no lease can be kept).
nlohmann::json ReadStewardState(EtcdClient& client, const Config& config, bool local = false);
}  // namespace steward
