// Rolling upgrades (PlanUpgrade, reconcile/plan.h): one table test per rule U1-U6, and through
// PlanNextStep (an upgrade step only once the cluster is healthy at its size).
#include <gtest/gtest.h>

#include "reconcile/plan.h"

namespace steward {
namespace {

// Three healthy voters n1..n3 (n3 the etcd leader) running `versions`.
ClusterObservation Cluster(std::vector<std::string> versions, std::string desired,
                           std::vector<std::string> available) {
  ClusterObservation o;
  o.desired_size = 3;
  o.member_list_ok = true;
  o.desired_version = std::move(desired);
  o.available_versions = std::move(available);
  for (int i = 0; i < 3; ++i) {
    NodeView n;
    n.name = "n" + std::to_string(i + 1);
    n.peer_url = "https://127.0.0." + std::to_string(11 + i) + ":2380";
    n.agent_up = true;
    n.etcd_running = true;
    n.has_data = true;
    n.local_member_id = 100 + i;
    o.nodes.push_back(n);
    MemberView m;
    m.id = 100 + i;
    m.name = n.name;
    m.peer_url = n.peer_url;
    m.started = true;
    m.healthy = true;
    m.is_etcd_leader = i == 2;
    m.version = versions[static_cast<size_t>(i)];
    o.members.push_back(m);
  }
  return o;
}

const std::vector<std::string> kAll = {"3.3.25", "3.4.23", "3.5.16"};

TEST(PlanUpgradeTest, U1_NoDesiredVersionOrEveryoneThereMeansNothing) {
  EXPECT_EQ(PlanUpgrade(Cluster({"3.4.23", "3.4.23", "3.4.23"}, "", kAll)).kind, StepKind::kNone);
  EXPECT_EQ(PlanUpgrade(Cluster({"3.5.16", "3.5.16", "3.5.16"}, "3.5.16", kAll)).kind,
            StepKind::kNone);
}

TEST(PlanUpgradeTest, U2_ADesiredVersionWithoutABinaryWaitsAndSaysSo) {
  Step s = PlanUpgrade(Cluster({"3.4.23", "3.4.23", "3.4.23"}, "3.5.16", {"3.4.23"}));
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("no binary"), std::string::npos) << s.reason;
}

TEST(PlanUpgradeTest, U3_AnUnknownMemberVersionWaits) {
  Step s = PlanUpgrade(Cluster({"3.4.23", "", "3.4.23"}, "3.5.16", kAll));
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("not known"), std::string::npos) << s.reason;
}

TEST(PlanUpgradeTest, U4_NeverBelowTheClustersVersion) {
  Step s = PlanUpgrade(Cluster({"3.5.16", "3.5.16", "3.5.16"}, "3.4.23", kAll));
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("downgrades"), std::string::npos) << s.reason;
  // A member that went ahead alone goes back to the version the others run: not a downgrade of
  // the cluster, whose version is still 3.4.
  Step back = PlanUpgrade(Cluster({"3.5.16", "3.4.23", "3.4.23"}, "3.4.23", kAll));
  EXPECT_EQ(back.kind, StepKind::kSwitchVersion);
  EXPECT_EQ(back.node, "n1");
}

TEST(PlanUpgradeTest, U5_OneMinorVersionAtATime) {
  Step s = PlanUpgrade(Cluster({"3.3.25", "3.3.25", "3.3.25"}, "3.5.16", kAll));
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion);
  EXPECT_EQ(s.version, "3.4.23") << "3.3 -> 3.5 goes through 3.4";
  // Until every member is on 3.4, nobody goes to 3.5.
  s = PlanUpgrade(Cluster({"3.4.23", "3.4.23", "3.3.25"}, "3.5.16", kAll));
  EXPECT_EQ(s.version, "3.4.23");
  EXPECT_EQ(s.node, "n3");
  s = PlanUpgrade(Cluster({"3.4.23", "3.4.23", "3.4.23"}, "3.5.16", kAll));
  EXPECT_EQ(s.version, "3.5.16");
  // Without a 3.4 binary, the jump is refused.
  s = PlanUpgrade(Cluster({"3.3.25", "3.3.25", "3.3.25"}, "3.5.16", {"3.3.25", "3.5.16"}));
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("one minor version at a time"), std::string::npos) << s.reason;
}

TEST(PlanUpgradeTest, U9_IntoThreeSixOnlyOnceEveryMemberRunsTheGuidesPatch) {
  const std::vector<std::string> avail = {"3.5.30", "3.5.32", "3.6.4"};
  Step s = PlanUpgrade(Cluster({"3.5.32", "3.5.30", "3.5.32"}, "3.6.4", avail));
  EXPECT_EQ(s.kind, StepKind::kWait);
  EXPECT_NE(s.reason.find("member n2"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("3.5.32 or later"), std::string::npos) << s.reason;
  // The patch roll the guide asks for is an ordinary round, and then 3.6 goes on.
  s = PlanUpgrade(Cluster({"3.5.32", "3.5.30", "3.5.32"}, "3.5.32", avail));
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion);
  EXPECT_EQ(s.node, "n2");
  s = PlanUpgrade(Cluster({"3.5.32", "3.5.32", "3.5.32"}, "3.6.4", avail));
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion);
  EXPECT_EQ(s.version, "3.6.4");
  // Mid-round, a member already on 3.6 is not held against it.
  s = PlanUpgrade(Cluster({"3.6.4", "3.5.32", "3.5.32"}, "3.6.4", avail));
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion);
}

TEST(PlanUpgradeTest, U6_FollowersFirstTheEtcdLeaderLast) {
  Step s = PlanUpgrade(Cluster({"3.4.23", "3.4.23", "3.4.23"}, "3.5.16", kAll));
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion);
  EXPECT_EQ(s.node, "n1");
  s = PlanUpgrade(Cluster({"3.5.16", "3.4.23", "3.4.23"}, "3.5.16", kAll));
  EXPECT_EQ(s.node, "n2");
  s = PlanUpgrade(Cluster({"3.5.16", "3.5.16", "3.4.23"}, "3.5.16", kAll));
  EXPECT_EQ(s.node, "n3");
  EXPECT_NE(s.reason.find("etcd leader, last"), std::string::npos) << s.reason;
  // A member whose agent does not answer cannot be switched: wait.
  ClusterObservation o = Cluster({"3.4.23", "3.4.23", "3.4.23"}, "3.5.16", kAll);
  o.nodes[0].agent_up = false;
  EXPECT_EQ(PlanUpgrade(o).kind, StepKind::kWait);
}

TEST(PlanUpgradeTest, AnUpgradeStepComesOnlyFromAHealthyClusterAtItsSize) {
  ClusterObservation o = Cluster({"3.5.16", "3.4.23", "3.4.23"}, "3.5.16", kAll);
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kSwitchVersion);
  // The member switched last is restarting: unhealthy, so the roll waits for it.
  o.members[0].healthy = false;
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
}

TEST(PlanUpgradeTest, U7_AMemberDownOnAVersionThatFailedGoesBackWhenTheSpecSaysSo) {
  ClusterObservation o = Cluster({"", "3.4.23", "3.4.23"}, "3.4.23", {"3.4.23", "3.5.99"});
  o.members[0].healthy = false;
  o.members[0].unhealthy_for = std::chrono::seconds(30);
  o.nodes[0].switched_version = "3.5.99";
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kSwitchVersion) << s.reason;
  EXPECT_EQ(s.node, "n1");
  EXPECT_EQ(s.version, "3.4.23");
  // While the spec still asks for the failed version, the roll waits (it does not go on).
  o.desired_version = "3.5.99";
  s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  // Never below what the running members run.
  o.desired_version = "3.3.25";
  o.available_versions.push_back("3.3.25");
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kWait);
}

// Found in review: in a 3.3 -> 3.5 roll, the member just switched to 3.4 is restarting (down)
// when the next pass runs; U7 must not take it on to 3.5 while the others run 3.3.
TEST(PlanUpgradeTest, U7_AMemberRestartingMidRoundIsNotJumpedAhead) {
  ClusterObservation o = Cluster({"", "3.3.25", "3.3.25"}, "3.5.16", kAll);
  o.members[0].healthy = false;
  o.nodes[0].switched_version = "3.4.23";
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
}

}  // namespace
}  // namespace steward
