// Table tests of the total-loss -> restore decision (src/reconcile/restore_decision.h), one
// test per rule, named for it.
#include "reconcile/restore_decision.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

RestoreAgentView Empty() { return {}; }
RestoreAgentView WithData() { return {true, true, ""}; }

// Five nodes, size three: n1..n3 are the members, n4 and n5 spares. Everyone answers, empty.
RestoreView FiveNodes() {
  RestoreView v;
  v.self = "n1";
  v.configured = {"n1", "n2", "n3", "n4", "n5"};
  for (const auto& n : v.configured) v.answered[n] = Empty();
  v.cluster_existed = true;
  v.last_voters = {"n1", "n2", "n3"};
  return v;
}

TEST(RestoreDecisionTest, EveryMemberEmptyStartsARestore) {
  RestoreDecision d = DecideRestore(FiveNodes());
  EXPECT_EQ(d.action, RestoreAction::kStart) << d.reason;
}

// R1: issue 9, path 1: n1 and n2 stall, n3 comes back wiped, the spares answer empty.
TEST(RestoreDecisionTest, R1_SparesAndOneWipedMemberAreNotTotalLoss) {
  RestoreView v = FiveNodes();
  v.self = "n3";
  v.answered.erase("n1");
  v.answered.erase("n2");
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("only 1 of the last known voting members"), std::string::npos)
      << d.reason;
  EXPECT_NE(d.reason.find("silent: n1,n2"), std::string::npos) << d.reason;
}

// R1 with size 1 on three nodes: the single member is silent, two empty nodes answer.
TEST(RestoreDecisionTest, R1_SilentSingleMemberBlocksTheRestore) {
  RestoreView v;
  v.self = "n2";
  v.configured = {"n1", "n2", "n3"};
  v.answered = {{"n2", Empty()}, {"n3", Empty()}};
  v.cluster_existed = true;
  v.last_voters = {"n1"};
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
}

// R1: the record, not the configured order, names the members (a spare replaced n1 earlier).
TEST(RestoreDecisionTest, R1_RecordedVotersCountNotTheInitialOnes) {
  RestoreView v = FiveNodes();
  v.last_voters = {"n2", "n4", "n5"};
  v.answered.erase("n4");
  v.answered.erase("n5");
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
  v.answered["n4"] = Empty();
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kStart);
}

TEST(RestoreDecisionTest, R1_AnyDataOrRunningEtcdMeansNoRestore) {
  RestoreView v = FiveNodes();
  v.answered["n5"] = WithData();
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v = FiveNodes();
  v.answered["n2"].etcd_running = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v = FiveNodes();
  v.etcd_answers = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
}

// R2: a majority of the voters is not enough when most configured nodes are silent.
TEST(RestoreDecisionTest, R2_MajorityOfAllConfiguredNodesMustAnswer) {
  RestoreView v = FiveNodes();
  v.answered.erase("n3");
  v.answered.erase("n4");
  v.answered.erase("n5");
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("2 of 5 agents"), std::string::npos) << d.reason;
}

TEST(RestoreDecisionTest, R3_OnlyTheLowestNamedAnsweringAgentCoordinates) {
  RestoreView v = FiveNodes();
  v.self = "n2";
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v.answered.erase("n1");
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kStart);
}

TEST(RestoreDecisionTest, R4_UnreadableStoreWaitsAndNewClusterIsNotRestored) {
  RestoreView v = FiveNodes();
  v.store_ok = false;
  v.store_error = "the directory does not exist";
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("does not exist"), std::string::npos);
  v = FiveNodes();
  v.cluster_existed = false;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
}

TEST(RestoreDecisionTest, AutoRestoreOffWaitsForTheOperator) {
  RestoreView v = FiveNodes();
  v.auto_restore = false;
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("restore-backup"), std::string::npos);
}

// R5: a pending automatic restore written by a minority is cancelled when the members return.
TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreIsCancelledByLiveData) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.answered["n3"].restore_id = "r1";  // n3 already restored it
  v.answered["n3"].has_data = true;
  v.answered["n3"].etcd_running = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
  v.answered["n2"] = WithData();  // n2 is back with the live cluster's data
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kCancel);
  EXPECT_NE(d.reason.find("n2"), std::string::npos) << d.reason;
}

TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreIsCancelledByAnAnsweringEtcd) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.etcd_answers = true;  // nobody applied r1 yet: this etcd is the live cluster
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kCancel);
}

TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreWaitsWhenTheVotersFallSilent) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.answered.erase("n1");
  v.answered.erase("n2");
  v.self = "n3";
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
}

TEST(RestoreDecisionTest, R5_OperatorRestoreIsCarriedOnOverLiveData) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", false};
  v.answered["n1"] = WithData();
  v.etcd_answers = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
}

}  // namespace
}  // namespace steward
