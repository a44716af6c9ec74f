// Table tests of the planner's maintenance rules (plan.h: P1-P4, RM1-RM2) and of the
// maintenance document (reconcile/maintenance.h): one case per rule, each asserting the step
// kind, its target and the key words of its reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reconcile/maintenance.h"
#include "reconcile/plan.h"

namespace steward {
namespace {

using std::chrono::seconds;

constexpr uint64_t kLeaderIndex = 1000;
constexpr uint64_t kLearnerId = 0x44a;
constexpr char kNote[] = "until 2026-11-26 18:00:00Z by alice@host: kernel upgrade";

std::string PeerUrl(int i) { return absl::StrCat("http://10.0.0.", i, ":2380"); }
uint64_t Id(int i) { return 0x100 + static_cast<uint64_t>(i); }

// `nodes` configured nodes n1..; n1..n`voters` run healthy voting members (n1 leads etcd); the
// others are spares (agent up, no data).
ClusterObservation Cluster(int nodes = 4, int voters = 3) {
  ClusterObservation o;
  o.desired_size = voters;
  o.replace_after = seconds(60);
  o.learner_timeout = seconds(60);
  for (int i = 1; i <= nodes; ++i) {
    NodeView n;
    n.name = absl::StrCat("n", i);
    n.peer_url = PeerUrl(i);
    n.agent_up = true;
    n.initial_member_id = Id(i);
    if (i <= voters) {
      n.etcd_running = n.has_data = true;
      n.local_member_id = Id(i);
      MemberView m;
      m.id = Id(i);
      m.name = n.name;
      m.peer_url = n.peer_url;
      m.started = m.healthy = true;
      m.raft_index = kLeaderIndex;
      m.is_etcd_leader = i == 1;
      o.members.push_back(m);
    }
    o.nodes.push_back(n);
  }
  o.member_list_ok = true;
  o.leader_raft_index = kLeaderIndex;
  return o;
}

NodeView& Node(ClusterObservation& o, int i) { return o.nodes[static_cast<size_t>(i - 1)]; }
MemberView& Member(ClusterObservation& o, int i) {
  for (auto& m : o.members) {
    if (m.peer_url == PeerUrl(i) && !m.is_learner) return m;
  }
  ADD_FAILURE() << "no member n" << i;
  return o.members.front();
}

// Node i is down (machine off) for `for_`.
void Down(ClusterObservation& o, int i, seconds for_ = seconds(120)) {
  NodeView& n = Node(o, i);
  n.agent_up = n.etcd_running = n.has_data = false;
  n.local_member_id = 0;
  Member(o, i).healthy = false;
  Member(o, i).unhealthy_for = for_;
}

MemberView& Learner(ClusterObservation& o, int i) {
  MemberView l;
  l.id = kLearnerId;
  l.peer_url = PeerUrl(i);
  l.is_learner = true;
  o.members.push_back(l);
  return o.members.back();
}

void ExpectWait(const Step& s, const std::vector<std::string>& words) {
  EXPECT_EQ(s.kind, StepKind::kWait) << StepKindName(s.kind) << ": " << s.reason;
  for (const auto& w : words)
    EXPECT_NE(s.reason.find(w), std::string::npos) << w << " in: " << s.reason;
}

TEST(MaintenanceDoc, DropPauseAndDropRemovedTouchOnlyThatNode) {
  Maintenance m;
  m.pauses = {Pause{"n1", "a", "x", 0, 10}, Pause{"", "a", "cluster", 0, 10}};
  m.removed = {RemovedNode{"n1", "a", "gone", 0, 1}, RemovedNode{"n2", "a", "gone", 0, 2}};
  m.DropPause("n1");
  m.DropRemoved("n2");
  m.DropRemoved("n9");  // none: nothing changes
  ASSERT_EQ(m.pauses.size(), 1u);
  EXPECT_EQ(m.pauses[0].node, "");
  ASSERT_EQ(m.removed.size(), 1u);
  EXPECT_EQ(m.removed[0].node, "n1");
}

TEST(MaintenancePlan, BaselineDeadMemberIsReplaced) {
  ClusterObservation o = Cluster();
  Down(o, 2);
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, Id(2));
}

TEST(MaintenancePlan, P1PausedDeadMemberIsNotReplaced) {
  ClusterObservation o = Cluster();
  Down(o, 2);
  Node(o, 2).paused = kNote;
  ExpectWait(PlanNextStep(o),
             {"n2", "not replaced", "node n2 is paused until", "alice@host", "kernel upgrade"});
}

TEST(MaintenancePlan, P1AnotherDeadMemberIsStillReplaced) {
  ClusterObservation o = Cluster(5, 3);
  Down(o, 2);
  Down(o, 3, seconds(30));  // not yet due
  Node(o, 3).paused = kNote;
  // Quorum: 1 of 3 healthy: nothing at all (the quorum rule comes first).
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kWait);
  o = Cluster(6, 5);
  Down(o, 2);
  Down(o, 3);
  Node(o, 2).paused = kNote;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, Id(3));
}

TEST(MaintenancePlan, P1PausedNodeBackEmptyKeepsItsMember) {
  ClusterObservation o = Cluster();
  NodeView& n = Node(o, 2);
  n.etcd_running = n.has_data = false;
  n.local_member_id = 0;
  Member(o, 2).healthy = false;
  Member(o, 2).unhealthy_for = seconds(5);
  ASSERT_EQ(PlanNextStep(o).kind, StepKind::kRemoveMember);  // without the pause
  n.paused = kNote;
  ExpectWait(PlanNextStep(o), {"empty data dir", "node n2 is paused"});
}

TEST(MaintenancePlan, P1PausedNodeWithForeignDataIsNotWiped) {
  ClusterObservation o = Cluster();
  NodeView& n = Node(o, 4);
  n.has_data = true;
  n.local_member_id = 0x999;  // a member no longer in the list
  ASSERT_EQ(PlanNextStep(o).kind, StepKind::kWipe);
  n.paused = kNote;
  EXPECT_NE(PlanNextStep(o).kind, StepKind::kWipe);
}

TEST(MaintenancePlan, P1PausedMemberIsNotShrunkAway) {
  ClusterObservation o = Cluster(3, 3);
  o.desired_size = 2;
  for (int i = 1; i <= 3; ++i) Node(o, i).paused = kNote;
  ExpectWait(PlanNextStep(o), {"not shrinking", "paused"});
  Node(o, 2).paused.clear();
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, Id(2));
}

TEST(MaintenancePlan, P2PausedSpareIsNotAdded) {
  ClusterObservation o = Cluster(4, 2);
  o.desired_size = 3;
  Step s = PlanNextStep(o);
  ASSERT_EQ(s.kind, StepKind::kAddLearner);
  ASSERT_EQ(s.node, "n3");
  Node(o, 3).paused = kNote;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kAddLearner);
  EXPECT_EQ(s.node, "n4");
  Node(o, 4).paused = kNote;
  ExpectWait(PlanNextStep(o), {"no spare node is ready"});
}

TEST(MaintenancePlan, P2LearnerOnPausedNodeIsNotJoinedButIsPromoted) {
  ClusterObservation o = Cluster(4, 3);
  o.desired_size = 4;
  Learner(o, 4);
  Node(o, 4).paused = kNote;
  ExpectWait(PlanNextStep(o), {"learner", "node n4 is paused"});
  o.learner_age = seconds(600);  // not removed for being slow either
  ExpectWait(PlanNextStep(o), {"node n4 is paused"});
  MemberView& l = o.members.back();
  l.started = l.healthy = true;
  l.name = "n4";
  l.raft_index = kLeaderIndex;
  Node(o, 4).etcd_running = Node(o, 4).has_data = true;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kPromote) << s.reason;
  EXPECT_EQ(s.member_id, kLearnerId);
}

TEST(MaintenancePlan, P3PausedNodeIsNotUpgraded) {
  ClusterObservation o = Cluster(3, 3);
  o.available_versions = {"3.4.23", "3.5.16"};
  o.desired_version = "3.5.16";
  for (auto& m : o.members) m.version = "3.4.23";
  Step s = PlanNextStep(o);
  ASSERT_EQ(s.kind, StepKind::kSwitchVersion) << s.reason;
  Node(o, 3).paused = Node(o, 2).paused = kNote;
  ExpectWait(PlanNextStep(o), {"rolling upgrade waits", "is paused"});
}

TEST(MaintenancePlan, P4ClusterPauseHoldsReplacementButPromotes) {
  ClusterObservation o = Cluster();
  Down(o, 2);
  o.cluster_paused = kNote;
  ExpectWait(PlanNextStep(o),
             {"the cluster is paused until", "alice@host", "held: removing member"});
  // A caught-up learner is still promoted.
  o = Cluster(4, 3);
  o.desired_size = 4;
  o.cluster_paused = kNote;
  ExpectWait(PlanNextStep(o), {"the cluster is paused", "adding node n4"});
  MemberView& l = Learner(o, 4);
  ExpectWait(PlanNextStep(o), {"the cluster is paused", "join"});
  l.started = l.healthy = true;
  l.name = "n4";
  l.raft_index = kLeaderIndex;
  Node(o, 4).etcd_running = Node(o, 4).has_data = true;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kPromote);
  // Nothing to do: says so, and that the cluster is paused.
  o = Cluster();
  o.cluster_paused = kNote;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kNone);
  EXPECT_NE(s.reason.find("the cluster is paused"), std::string::npos) << s.reason;
}

TEST(MaintenancePlan, RM1RemovedNodeIsNoSpare) {
  ClusterObservation o = Cluster(4, 3);
  Down(o, 2);
  Node(o, 4).removed = true;
  ExpectWait(PlanNextStep(o), {"n2", "no spare node is ready"});
  // Nor is it added to grow the cluster.
  o = Cluster(5, 3);
  o.desired_size = 4;
  Node(o, 4).removed = true;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kAddLearner) << s.reason;
  EXPECT_EQ(s.node, "n5");
}

TEST(MaintenancePlan, RM1RemovedNodesDataIsNotWipedAndItsLearnerGoes) {
  ClusterObservation o = Cluster(4, 3);
  Node(o, 4).has_data = true;
  Node(o, 4).local_member_id = 0x999;
  Node(o, 4).removed = true;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kNone);
  o = Cluster(4, 3);
  o.desired_size = 4;
  Learner(o, 4);
  Node(o, 4).removed = true;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, kLearnerId);
}

TEST(MaintenancePlan, RM2DesiredSizeClampedToNodesNotRemoved) {
  // Three nodes, size 3, n3 removed and its member gone: two voters is the goal, not a wait.
  ClusterObservation o = Cluster(3, 3);
  o.members.pop_back();
  Node(o, 3).removed = true;
  Node(o, 3).etcd_running = false;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kNone) << s.reason;
  EXPECT_NE(s.reason.find("clamped"), std::string::npos) << s.reason;
  // Its member still listed (remove-node marked it, the removal has not happened yet): it
  // goes first, even though it is healthy and n2 comes later in the config.
  o = Cluster(3, 3);
  Node(o, 2).removed = true;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kRemoveMember) << s.reason;
  EXPECT_EQ(s.member_id, Id(2));
  // With a spare, the size is kept: the spare is added.
  o = Cluster(4, 3);
  o.members.erase(o.members.begin() + 1);
  Node(o, 2).removed = true;
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kAddLearner) << s.reason;
  EXPECT_EQ(s.node, "n4");
  // Re-added (the mark cleared) with old data: set aside, then added back as a spare.
  o = Cluster(3, 3);
  o.members.erase(o.members.begin() + 2);
  Node(o, 3).local_member_id = 0x999;
  Node(o, 3).etcd_running = false;
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kWipe);
}

TEST(Maintenance, JsonRoundTripAndExpiry) {
  Maintenance m;
  m.pauses.push_back({"n2", "alice@host", "kernel", 100, 200});
  m.pauses.push_back({"", "n1", "everything", 100, 150});
  m.removed.push_back({"n3", "bob@h", "decommission", 120, 0x8e9e05c52164694dULL});
  auto back = MaintenanceFromJson(MaintenanceToJson(m).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->pauses.size(), 2u);
  EXPECT_EQ(back->PauseFor("n2")->reason, "kernel");
  EXPECT_EQ(back->Removed("n3")->member_id, 0x8e9e05c52164694dULL);
  ClusterObservation o = Cluster(3, 3);
  ApplyMaintenance(*back, 149, &o);
  EXPECT_NE(o.cluster_paused.find("everything"), std::string::npos);
  EXPECT_NE(Node(o, 2).paused.find("by alice@host: kernel"), std::string::npos);
  EXPECT_TRUE(Node(o, 3).removed);
  o = Cluster(3, 3);
  ApplyMaintenance(*back, 150, &o);  // the cluster pause ended at 150
  EXPECT_TRUE(o.cluster_paused.empty());
  EXPECT_FALSE(Node(o, 2).paused.empty());
  o = Cluster(3, 3);
  ApplyMaintenance(*back, 500, &o);  // both ended
  EXPECT_TRUE(Node(o, 2).paused.empty());
  back->DropExpired(160);
  EXPECT_EQ(back->pauses.size(), 1u);
  EXPECT_FALSE(MaintenanceFromJson("[1]").ok());
  EXPECT_FALSE(MaintenanceFromJson(R"({"pauses":[{"node":"n1"}]})").ok());
}

TEST(Maintenance, PauseDurationBounds) {
  EXPECT_EQ(*ParsePauseDuration("90m"), seconds(5400));
  EXPECT_EQ(*ParsePauseDuration("7d"), seconds(7 * 86400));
  EXPECT_FALSE(ParsePauseDuration("8d").ok());
  EXPECT_FALSE(ParsePauseDuration("169h").ok());
  EXPECT_FALSE(ParsePauseDuration("0s").ok());
  EXPECT_FALSE(ParsePauseDuration("soon").ok());
}

}  // namespace
}  // namespace steward
