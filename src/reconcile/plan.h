// The reconciler's decision: a pure function from what the leader observed and the desired spec
// to the one next step. No I/O, no clock reads (time comes in the view), so it is table-tested
// and driven by a randomized cluster simulation (tests/unit/plan_*_test.cc).
//
// Safety rules every plan obeys:
//   - never a member removal or promotion that leaves fewer healthy voters than a quorum of the
//     voters that remain;
//   - never more than one learner;
//   - never a wipe of a node whose member is still in the member list;
//   - never bootstrap: creating a cluster is not a step of this planner.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace steward {

// One configured node as its agent reported it.
struct NodeView {
  std::string name;
  std::string peer_url;
  bool agent_up = false;     // the agent answered this pass
  bool etcd_running = false;
  bool has_data = false;     // its etcd data dir holds a member
  uint64_t local_member_id = 0;  // the member ID of that data, 0 if unknown
  // The member ID etcd gives this node as a member of the initial cluster (from the token).
  uint64_t initial_member_id = 0;
};

// One entry of etcd's member list, with what its Status call said.
struct MemberView {
  uint64_t id = 0;
  std::string name;       // empty until started (except initial-cluster members)
  std::string peer_url;   // the first peer URL
  bool started = false;   // has published client URLs
  bool is_learner = false;
  bool healthy = false;   // answered Status with a leader and no errors
  uint64_t raft_index = 0;
  bool is_etcd_leader = false;
  // How long it has been unhealthy, as the leader has watched it (0 if healthy).
  std::chrono::milliseconds unhealthy_for{0};
};

struct ClusterObservation {
  int desired_size = 0;
  std::chrono::milliseconds replace_after{60000};
  // A learner that never starts for this long is removed again.
  std::chrono::milliseconds learner_timeout{60000};
  std::vector<NodeView> nodes;      // in config order (priority order for adds)
  std::vector<MemberView> members;  // empty if the member list could not be read
  bool member_list_ok = false;
  uint64_t leader_raft_index = 0;
  // How long the current learner (if any) has existed, as the leader has watched it.
  std::chrono::milliseconds learner_age{0};
};

enum class StepKind {
  kNone,          // nothing to do
  kWait,          // something is wrong or in progress; nothing safe to do now
  kRemoveMember,  // member_id
  kAddLearner,    // node (peer URL from the node)
  kJoin,          // order node to start as an existing member (member_id is its learner)
  kPromote,       // member_id
  kWipe,          // order node to stop etcd and set its data aside (its member is gone)
};

const char* StepKindName(StepKind k);

struct Step {
  StepKind kind = StepKind::kNone;
  uint64_t member_id = 0;
  std::string node;
  std::string reason;  // for logs and status: why this step (or why waiting)
  // For kJoin: name -> peer URL of every member, this node included, for --initial-cluster.
  std::vector<std::pair<std::string, std::string>> initial_cluster;
};

// Quorum of `voters` voting members.
inline int Quorum(int voters) { return voters / 2 + 1; }

Step PlanNextStep(const ClusterObservation& obs);

}  // namespace steward
