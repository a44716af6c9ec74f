// Restart rolls (reconcile/restart_roll.h): one table test per rule RS1-RS5, through PlanNextStep
// (only once the cluster is healthy at its size), the stored document, and stewardctl's choice
// of nodes (RollNodes).
#include "reconcile/restart_roll.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ctl/restart_cmd.h"

namespace steward {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RestartRoll Roll(std::vector<std::string> nodes) {
  RestartRoll r;
  r.id = "r-1-abc";
  r.by = "alice@host";
  r.reason = "pending: --quota-backend-bytes on n1, n2, n3";
  r.since = 1700000000;
  r.pending_only = true;
  r.nodes = std::move(nodes);
  return r;
}

// Three healthy voters n1..n3, n3 the etcd leader, with the roll over all three.
ClusterObservation Cluster() {
  ClusterObservation o;
  o.desired_size = 3;
  o.member_list_ok = true;
  for (int i = 0; i < 3; ++i) {
    NodeView n;
    n.name = "n" + std::to_string(i + 1);
    n.peer_url = "https://127.0.0." + std::to_string(11 + i) + ":2380";
    n.agent_up = true;
    n.etcd_running = true;
    n.has_data = true;
    n.pending_restart = {"--quota-backend-bytes"};
    o.nodes.push_back(n);
    MemberView m;
    m.id = 100 + i;
    m.name = n.name;
    m.peer_url = n.peer_url;
    m.started = true;
    m.healthy = true;
    m.raft_index = 50 + i;
    m.is_etcd_leader = i == 2;
    o.members.push_back(m);
  }
  o.restart = Roll({"n3", "n1", "n2"});
  return o;
}

TEST(RestartRollTest, RS1_NoRollOrEveryNodeRestartedForItMeansNothing) {
  ClusterObservation o = Cluster();
  o.restart.reset();
  EXPECT_EQ(PlanRestart(o).kind, StepKind::kNone);
  o = Cluster();
  for (auto& n : o.nodes) n.restarted_for = "r-1-abc";
  Step s = PlanRestart(o);
  EXPECT_EQ(s.kind, StepKind::kNone);
  EXPECT_THAT(s.reason, HasSubstr("done"));
  // A node that restarted for an older roll has not restarted for this one.
  o.nodes[0].restarted_for = "r-0-old";
  EXPECT_EQ(PlanRestart(o).kind, StepKind::kRestart);
  // A named node that no longer holds a member is not waited for.
  o = Cluster();
  o.members.erase(o.members.begin());  // n1's member is gone
  o.nodes[1].restarted_for = o.nodes[2].restarted_for = "r-1-abc";
  EXPECT_EQ(PlanRestart(o).kind, StepKind::kNone);
}

TEST(RestartRollTest, RS2_FollowersFirstInTheOrderAskedOneAtATime) {
  ClusterObservation o = Cluster();
  Step s = PlanRestart(o);
  ASSERT_EQ(s.kind, StepKind::kRestart);
  EXPECT_EQ(s.node, "n1") << "n3 was asked first but leads";
  EXPECT_EQ(s.member_id, 100u);
  EXPECT_EQ(s.restart_id, "r-1-abc");
  EXPECT_THAT(s.reason, HasSubstr("--quota-backend-bytes"));
  EXPECT_THAT(RestartsLeft(*o.restart, o), ElementsAre("n3", "n1", "n2"));
  o.nodes[0].restarted_for = "r-1-abc";
  s = PlanRestart(o);
  EXPECT_EQ(s.node, "n2");
  EXPECT_THAT(RestartsLeft(*o.restart, o), ElementsAre("n3", "n2"));
}

TEST(RestartRollTest, RS3_TheLeaderLastAfterLeadershipMovesToTheFurthestVoter) {
  ClusterObservation o = Cluster();
  o.nodes[0].restarted_for = o.nodes[1].restarted_for = "r-1-abc";
  Step s = PlanRestart(o);
  ASSERT_EQ(s.kind, StepKind::kMoveLeader);
  EXPECT_EQ(s.node, "n3");
  EXPECT_EQ(s.member_id, 101u) << "n2 has the higher raft index";
  // An unhealthy voter is no successor.
  o.members[1].healthy = false;
  EXPECT_EQ(PlanRestart(o).member_id, 100u);
  // Once it no longer leads, it restarts.
  o = Cluster();
  o.nodes[0].restarted_for = o.nodes[1].restarted_for = "r-1-abc";
  o.members[2].is_etcd_leader = false;
  o.members[0].is_etcd_leader = true;
  s = PlanRestart(o);
  EXPECT_EQ(s.kind, StepKind::kRestart);
  EXPECT_EQ(s.node, "n3");
  // A single voter restarts as it is: there is no one to move to.
  ClusterObservation one = Cluster();
  one.members.resize(1);
  one.members[0].is_etcd_leader = true;
  one.restart = Roll({"n1"});
  EXPECT_EQ(PlanRestart(one).kind, StepKind::kRestart);
}

TEST(RestartRollTest, RS4_APausedNodeWaitsSayingSo) {
  ClusterObservation o = Cluster();
  o.nodes[0].paused = "until 2026-12-02 18:00:00Z by bob@host: disk swap";
  Step s = PlanRestart(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_THAT(s.reason, HasSubstr("n1 is paused"));
  // Cluster-wide (P4), through PlanNextStep: held.
  o = Cluster();
  o.cluster_paused = "until 2026-12-02 18:00:00Z by bob@host: audit";
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_THAT(s.reason, HasSubstr("paused"));
}

TEST(RestartRollTest, RS5_ASilentAgentWaits) {
  ClusterObservation o = Cluster();
  o.nodes[0].agent_up = false;
  Step s = PlanRestart(o);
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_THAT(s.reason, HasSubstr("does not answer"));
}

TEST(RestartRollTest, PlanNextStepRestartsOnlyWhenHealthyAtSize) {
  ClusterObservation o = Cluster();
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kRestart);
  // Degraded: one voter unhealthy. Nothing restarts, though quorum would survive it.
  o.members[1].healthy = false;
  o.members[1].unhealthy_for = std::chrono::milliseconds(5000);
  Step s = PlanNextStep(o);
  EXPECT_NE(s.kind, StepKind::kRestart);
  EXPECT_NE(s.kind, StepKind::kMoveLeader);
  // A learner on its way: its turn comes first.
  o = Cluster();
  MemberView learner;
  learner.id = 200;
  learner.peer_url = "https://127.0.0.14:2380";
  learner.is_learner = true;
  o.members.push_back(learner);
  EXPECT_NE(PlanNextStep(o).kind, StepKind::kRestart);
}

TEST(RestartRollTest, TheDocumentRoundTripsAndNamesWhatIsWrong) {
  const RestartRoll r = Roll({"n1", "n2"});
  auto back = RestartRollFromJson(RestartRollToJson(r).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, r.id);
  EXPECT_EQ(back->by, r.by);
  EXPECT_EQ(back->reason, r.reason);
  EXPECT_EQ(back->since, r.since);
  EXPECT_TRUE(back->pending_only);
  EXPECT_THAT(back->nodes, ElementsAre("n1", "n2"));
  EXPECT_THAT(RestartRollFromJson("[]").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(RestartRollFromJson(R"({"id":"","by":"","reason":"","since":1,"nodes":[]})")
                  .status()
                  .message(),
              HasSubstr("\"id\" is empty"));
  EXPECT_THAT(RestartRollFromJson(R"({"id":"x","by":"","reason":"","since":1,"nodes":[3]})")
                  .status()
                  .message(),
              HasSubstr("\"nodes\""));
  EXPECT_THAT(
      RestartRollFromJson(R"({"id":"x","reason":"","since":1,"nodes":[]})").status().message(),
      HasSubstr("\"by\""));
}

TEST(RestartRollTest, StewardctlRollsTheNodesAskedPendingOrAll) {
  std::map<std::string, peer::NodeState> states;
  states["n1"].set_has_data(true);
  states["n1"].add_pending_restart("--quota-backend-bytes");
  states["n2"].set_has_data(true);
  states["n4"].set_has_data(false);  // a spare
  const std::vector<std::string> all = {"n1", "n2", "n3", "n4"};
  std::vector<std::string> silent;
  EXPECT_THAT(RollNodes(all, states, {}, false, &silent), ElementsAre("n1", "n2"));
  EXPECT_THAT(silent, ElementsAre("n3"));
  silent.clear();
  EXPECT_THAT(RollNodes(all, states, {}, true, &silent), ElementsAre("n1"));
  silent.clear();
  // Asked by name, a silent node stays in: the leader waits for its agent (RS5).
  EXPECT_THAT(RollNodes(all, states, {"n3", "n2"}, false, &silent), ElementsAre("n3", "n2"));
  EXPECT_THAT(silent, ElementsAre("n3"));
}

}  // namespace
}  // namespace steward
