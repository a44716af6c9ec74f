// Table tests of stewardctl recover-quorum's decision (src/restore/recover_decision.h), one
// per rule.
#include "restore/recover_decision.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

// Three voters in cluster 0xc; n1 survives (raft index 100), n2 and n3 are silent, their agents
// silent too. A backup older than n1's revision is stored.
RecoverView OneSurvivor() {
  RecoverView v;
  v.cluster = "demo";
  v.linearizable_unavailable = true;
  v.linearizable_error = "deadline exceeded";
  RecoverView::Node n1;
  n1.name = "n1";
  n1.endpoint = "https://10.0.0.1:2379";
  n1.etcd_answered = true;
  n1.member_id = 0xa1;
  n1.cluster_id = 0xc;
  n1.raft_index = 100;
  n1.revision = 50;
  RecoverView::Node n2;
  n2.name = "n2";
  RecoverView::Node n3;
  n3.name = "n3";
  v.nodes = {n1, n2, n3};
  v.list_ok = true;
  v.list_cluster_id = 0xc;
  v.voter_ids = {0xa1, 0xa2, 0xa3};
  v.newest_backup = "b40";
  v.newest_backup_revision = 40;
  return v;
}

TEST(RecoverDecisionTest, TheSurvivorOfALostMajorityIsChosen) {
  RecoverDecision d = DecideRecover(OneSurvivor());
  ASSERT_TRUE(d.refusal.empty()) << d.refusal;
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_EQ(*d.chosen, 0u);
  EXPECT_EQ(d.voters, 3u);
  ASSERT_EQ(d.gone.size(), 2u);
  EXPECT_NE(d.gone[0].find("neither its etcd nor its agent"), std::string::npos) << d.gone[0];
}

TEST(RecoverDecisionTest, Q1_Q2_AQuorumOrAnUnknownAnswerRefuses) {
  RecoverView v = OneSurvivor();
  v.linearizable_ok = true;
  EXPECT_EQ(DecideRecover(v).rule, "Q1");
  v = OneSurvivor();
  v.linearizable_unavailable = false;
  v.linearizable_error = "permission denied";
  RecoverDecision d = DecideRecover(v);
  EXPECT_EQ(d.rule, "Q2");
  EXPECT_NE(d.refusal.find("permission denied"), std::string::npos) << d.refusal;
  EXPECT_FALSE(d.chosen.has_value());
}

TEST(RecoverDecisionTest, Q3_Q4_ALeaderSeenOrTwoClustersRefuse) {
  RecoverView v = OneSurvivor();
  v.nodes[0].leader = 0xa2;
  EXPECT_EQ(DecideRecover(v).rule, "Q3");
  v = OneSurvivor();
  v.nodes[1].etcd_answered = true;
  v.nodes[1].cluster_id = 0xd;
  v.nodes[1].member_id = 0xb2;
  EXPECT_EQ(DecideRecover(v).rule, "Q4");
}

TEST(RecoverDecisionTest, Q5_Q6_NothingToRecoverFromOrAMajorityAnswers) {
  RecoverView v = OneSurvivor();
  v.nodes[0].etcd_answered = false;
  EXPECT_EQ(DecideRecover(v).rule, "Q5");
  v = OneSurvivor();
  v.list_ok = false;
  EXPECT_EQ(DecideRecover(v).rule, "Q5");
  v = OneSurvivor();
  v.nodes[0].is_learner = true;  // only a learner answers
  EXPECT_EQ(DecideRecover(v).rule, "Q6");
  v = OneSurvivor();
  v.nodes[1].etcd_answered = true;
  v.nodes[1].cluster_id = 0xc;
  v.nodes[1].member_id = 0xa2;
  RecoverDecision d = DecideRecover(v);
  EXPECT_EQ(d.rule, "Q6");
  EXPECT_NE(d.refusal.find("2 of 3"), std::string::npos) << d.refusal;
}

TEST(RecoverDecisionTest, Q7_ASilentMemberWhoseAgentHoldsDataIsNotGone) {
  RecoverView v = OneSurvivor();
  v.nodes[2].agent_answered = true;
  v.nodes[2].agent_has_data = true;
  RecoverDecision d = DecideRecover(v);
  EXPECT_EQ(d.rule, "Q7");
  EXPECT_NE(d.refusal.find("n3"), std::string::npos) << d.refusal;
  v.nodes[2].agent_has_data = false;  // answers, empty: gone
  d = DecideRecover(v);
  EXPECT_TRUE(d.refusal.empty()) << d.refusal;
  EXPECT_NE(d.gone[1].find("with no data"), std::string::npos) << d.gone[1];
}

TEST(RecoverDecisionTest, TheBestSurvivorUnlessFromNamesAnother_Q8) {
  // Five voters, two survive: n2 is further than n1.
  RecoverView v = OneSurvivor();
  v.voter_ids = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5};
  v.nodes[1].etcd_answered = true;
  v.nodes[1].cluster_id = 0xc;
  v.nodes[1].member_id = 0xa2;
  v.nodes[1].raft_index = 120;
  v.nodes[1].revision = 60;
  RecoverView::Node n4, n5;
  n4.name = "n4";
  n5.name = "n5";
  v.nodes.push_back(n4);
  v.nodes.push_back(n5);
  RecoverDecision d = DecideRecover(v);
  ASSERT_TRUE(d.refusal.empty()) << d.refusal;
  EXPECT_EQ(*d.chosen, 1u);
  ASSERT_EQ(d.survivors.size(), 2u);
  EXPECT_EQ(d.survivors[1], 0u);
  v.from = "n1";
  d = DecideRecover(v);
  ASSERT_TRUE(d.refusal.empty()) << d.refusal;
  EXPECT_EQ(*d.chosen, 0u);
  v.from = "n3";
  EXPECT_EQ(DecideRecover(v).rule, "Q8");
}

TEST(RecoverDecisionTest, Q9_ANewerBackupOrAnUnreadableStoreRefusesUnlessForced) {
  RecoverView v = OneSurvivor();
  v.newest_backup_revision = 70;  // past n1's revision 50
  RecoverDecision d = DecideRecover(v);
  EXPECT_EQ(d.rule, "Q9");
  EXPECT_NE(d.refusal.find("b40 (revision 70)"), std::string::npos) << d.refusal;
  v.force = true;
  d = DecideRecover(v);
  EXPECT_TRUE(d.refusal.empty()) << d.refusal;
  EXPECT_EQ(d.newer_backup, "b40 (revision 70)");
  v = OneSurvivor();
  v.backups_ok = false;
  v.backups_error = "503";
  EXPECT_EQ(DecideRecover(v).rule, "Q9");
}

}  // namespace
}  // namespace steward
