// Adopting a cluster no agent created (reconcile/plan.h, rules AD1-A3): one table test per rule,
// and the whole adoption walked through PlanNextStep step by step.
#include <gtest/gtest.h>

#include "reconcile/plan.h"

namespace steward {
namespace {

// Three unmanaged voters o1..o3 (o1 the etcd leader) on 127.0.0.2x, and `nodes` configured
// nodes n1.. on 127.0.0.1x whose agents are up and hold nothing yet.
ClusterObservation Adopting(int nodes = 3) {
  ClusterObservation o;
  o.adopting = true;
  o.desired_size = 3;
  o.member_list_ok = true;
  o.leader_raft_index = 1000;
  for (int i = 0; i < 3; ++i) {
    MemberView m;
    m.id = 900 + i;
    m.name = "o" + std::to_string(i + 1);
    m.peer_url = "http://127.0.0." + std::to_string(21 + i) + ":2380";
    m.started = true;
    m.healthy = true;
    m.raft_index = 1000;
    m.is_etcd_leader = i == 0;
    o.members.push_back(m);
  }
  for (int i = 0; i < nodes; ++i) {
    NodeView n;
    n.name = "n" + std::to_string(i + 1);
    n.peer_url = "http://127.0.0." + std::to_string(11 + i) + ":2380";
    n.agent_up = true;
    o.nodes.push_back(n);
  }
  return o;
}

// Node `i` (0-based) as a healthy managed voter.
void Managed(ClusterObservation& o, int i) {
  NodeView& n = o.nodes[static_cast<size_t>(i)];
  n.etcd_running = true;
  n.has_data = true;
  n.local_member_id = 100 + static_cast<uint64_t>(i);
  MemberView m;
  m.id = n.local_member_id;
  m.name = n.name;
  m.peer_url = n.peer_url;
  m.started = true;
  m.healthy = true;
  m.raft_index = 1000;
  o.members.push_back(m);
}

// A learner entry not yet started (name empty unless given).
MemberView Learner(uint64_t id, const std::string& peer_url, const std::string& name = "") {
  MemberView l;
  l.id = id;
  l.name = name;
  l.peer_url = peer_url;
  l.is_learner = true;
  return l;
}

TEST(AdoptPlanTest, AD1_TheSizeCountsManagedVotersSoTheAgentsGrowBesideTheOldMembers) {
  ClusterObservation o = Adopting();
  // Without adopt, three healthy voters are "at size": nothing to do.
  o.adopting = false;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kNone);
  o.adopting = true;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kAddLearner);
  EXPECT_EQ(s.node, "n1");
  Managed(o, 0);
  Managed(o, 1);
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kAddLearner);
  EXPECT_EQ(s.node, "n3");
  Managed(o, 2);
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kNone);
  EXPECT_NE(s.reason.find("3 unmanaged"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("retire-unmanaged"), std::string::npos) << s.reason;
}

TEST(AdoptPlanTest, AD1_UnmanagedMembersAreNeverRemovedByThePlanner) {
  // Six voters, size 3: without adopt the planner would shrink; adopting, the three managed
  // voters are the size and nothing is removed.
  ClusterObservation o = Adopting();
  for (int i = 0; i < 3; ++i) Managed(o, i);
  o.adopting = false;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kRemoveMember);
  o.adopting = true;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kNone);
  // Shrinking the size removes managed voters only.
  o.desired_size = 2;
  Step s = PlanNextStep(o);
  ASSERT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_GE(s.member_id, 100u);
  EXPECT_LT(s.member_id, 900u);
}

TEST(AdoptPlanTest, AD1_ADeadUnmanagedMemberIsNotReplacedAndTheWaitSaysWhy) {
  ClusterObservation o = Adopting(4);
  for (int i = 0; i < 3; ++i) Managed(o, i);
  o.members[1].healthy = false;
  o.members[1].unhealthy_for = std::chrono::minutes(10);  // far past replace_after
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("no agent manages it"), std::string::npos) << s.reason;
  // The same member managed (its node configured) is replaced by the spare n4.
  o.adopting = false;
  o.desired_size = 6;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, 901u);
}

TEST(AdoptPlanTest, AD1_QuorumStillCountsTheUnmanagedVoters) {
  // Three unmanaged voters, two of them down: no quorum, whoever manages them.
  ClusterObservation o = Adopting();
  o.members[1].healthy = false;
  o.members[2].healthy = false;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("quorum lost"), std::string::npos) << s.reason;
}

TEST(AdoptPlanTest, AD2_AnUnmanagedLearnerIsLeftToItsOperator) {
  ClusterObservation o = Adopting();
  o.members.push_back(Learner(950, "http://127.0.0.24:2380", "o4"));
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("no agent manages it"), std::string::npos) << s.reason;
  // Not adopting, a learner on no configured node is removed (it is nobody's).
  o.adopting = false;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember);
  EXPECT_EQ(s.member_id, 950u);
}

TEST(AdoptPlanTest, AD3_AnUnmanagedMemberNamedLikeANodeBlocksJoinsAndIsNotRemoved) {
  ClusterObservation o = Adopting();
  o.members[2].name = "n1";
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("has the name of node n1"), std::string::npos) << s.reason;
}

TEST(AdoptPlanTest, TheJoinOrderListsTheUnmanagedMembersByTheirNames) {
  ClusterObservation o = Adopting();
  o.members.push_back(Learner(100, o.nodes[0].peer_url));
  Step s = PlanNextStep(o);
  ASSERT_EQ(s.kind, StepKind::kJoin) << s.reason;
  EXPECT_EQ(s.node, "n1");
  ASSERT_EQ(s.initial_cluster.size(), 4u);
  EXPECT_EQ(s.initial_cluster[0].first, "o1");
  EXPECT_EQ(s.initial_cluster[3].first, "n1");
  // Once it runs and caught up, it is promoted; the quorum check counts all four voters.
  o.members.back().started = true;
  o.members.back().healthy = true;
  o.members.back().raft_index = 1000;
  o.nodes[0].etcd_running = true;
  o.nodes[0].has_data = true;
  o.nodes[0].local_member_id = 100;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kPromote);
  EXPECT_EQ(s.member_id, 100u);
}

TEST(AdoptPlanTest, NoRollingUpgradeStartsWhileUnmanagedMembersRemain) {
  ClusterObservation o = Adopting();
  for (int i = 0; i < 3; ++i) Managed(o, i);
  for (auto& m : o.members) m.version = "3.4.23";
  o.desired_version = "3.5.16";
  o.available_versions = {"3.4.23", "3.5.16"};
  // No roll starts while members no agent can switch are in the cluster.
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("no agent can upgrade it"), std::string::npos) << s.reason;
}

TEST(AdoptPlanTest, AD3_AnOldMemberOnANodesHostAndPeerPortIsNeverRemoved) {
  // The nodes reuse the old machines and the old peer port: o1..o3 sit on n1..n3's peer URLs.
  // Without AD3 the node's own rules would read "node back with an empty data dir" and remove
  // live members one by one.
  ClusterObservation o = Adopting();
  for (int i = 0; i < 3; ++i)
    o.members[static_cast<size_t>(i)].peer_url = o.nodes[static_cast<size_t>(i)].peer_url;
  for (int step = 0; step < 3; ++step) {
    Step s = PlanNextStep(o);
    EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
    EXPECT_NE(s.reason.find("same host and peer port"), std::string::npos) << s.reason;
  }
  // Not adopting (an ordinary cluster whose node was re-imaged), the rule does not apply.
  o.adopting = false;
  EXPECT_EQ(PlanNextStep(o).reason.find("same host and peer port"), std::string::npos);
}

}  // namespace
}  // namespace steward
