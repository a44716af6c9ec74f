// reconcile/space.h: the rolling defragmentation's order and quorum check, and the leader's
// NOSPACE recovery decision, one test per rule (S1-S5).
#include "reconcile/space.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

DefragMember M(uint64_t id, const std::string& name, bool reachable = true, bool leader = false,
               bool learner = false) {
  DefragMember m;
  m.id = id;
  m.name = name;
  m.endpoint = "https://" + name + ":2379";
  m.reachable = reachable;
  m.is_leader = leader;
  m.is_learner = learner;
  return m;
}

std::vector<std::string> Names(const std::vector<DefragMember>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(m.name);
  return out;
}

TEST(DefragOrderTest, FollowersAndLearnersFirstLeaderLast) {
  auto order =
      DefragOrder({M(1, "n1", true, true), M(2, "n2"), M(3, "n3"), M(4, "n4", true, false, true)});
  EXPECT_EQ(Names(order), (std::vector<std::string>{"n2", "n3", "n4", "n1"}));
}

TEST(DefragOrderTest, UnreachableAndNeverStartedAreLeftOut) {
  DefragMember never = M(4, "n4");
  never.endpoint.clear();
  auto order = DefragOrder({M(1, "n1", false), M(2, "n2", true, true), M(3, "n3"), never});
  EXPECT_EQ(Names(order), (std::vector<std::string>{"n3", "n2"}));
}

TEST(DefragQuorumTest, BlockingOneOfThreeHealthyKeepsQuorum) {
  std::vector<DefragMember> ms = {M(1, "n1", true, true), M(2, "n2"), M(3, "n3")};
  EXPECT_EQ(DefragQuorumBlocker(ms, 2), "");
  EXPECT_EQ(DefragQuorumBlocker(ms, 1), "");
}

TEST(DefragQuorumTest, RefusedWhenTheOthersAreNoQuorum) {
  // n3 is down: blocking n2 leaves 1 of 3 answering.
  std::vector<DefragMember> ms = {M(1, "n1", true, true), M(2, "n2"), M(3, "n3", false)};
  std::string why = DefragQuorumBlocker(ms, 2);
  EXPECT_NE(why.find("only 1 of the other voting members answer"), std::string::npos) << why;
  EXPECT_NE(why.find("quorum of 3 is 2"), std::string::npos) << why;
}

TEST(DefragQuorumTest, ALearnerNeverCostsTheQuorum) {
  std::vector<DefragMember> ms = {M(1, "n1", true, true), M(2, "n2", false),
                                  M(3, "n3", true, false, true)};
  EXPECT_EQ(DefragQuorumBlocker(ms, 3), "");
}

TEST(DefragQuorumTest, ASingleMemberClusterMayBeDefragmented) {
  // One voter: its defragmentation stalls the cluster, which a one-member cluster cannot
  // avoid (nor can its NOSPACE recovery).
  std::vector<DefragMember> ms = {M(1, "n1", true, true)};
  EXPECT_EQ(DefragQuorumBlocker(ms, 1), "");
}

SpaceObservation Nospace() {
  SpaceObservation o;
  o.quorum = true;
  o.alarms = {{0x11, "NOSPACE"}, {0x22, "NOSPACE"}};
  o.now = milliseconds(1'000'000);
  return o;
}

TEST(SpaceDecisionTest, NoAlarmNothingToDo) {
  SpaceObservation o = Nospace();
  o.alarms.clear();
  EXPECT_EQ(DecideSpace(o).kind, SpaceDecision::kNothing);
}

// S1
TEST(SpaceDecisionTest, S1_CorruptIsLeftToTheOperator) {
  SpaceObservation o = Nospace();
  o.alarms = {{0x11, "CORRUPT"}};
  SpaceDecision d = DecideSpace(o);
  EXPECT_EQ(d.kind, SpaceDecision::kWait);
  EXPECT_NE(d.reason.find("CORRUPT"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("operator"), std::string::npos) << d.reason;
}

// S2
TEST(SpaceDecisionTest, S2_NothingWithoutQuorum) {
  SpaceObservation o = Nospace();
  o.quorum = false;
  SpaceDecision d = DecideSpace(o);
  EXPECT_EQ(d.kind, SpaceDecision::kWait);
  EXPECT_NE(d.reason.find("no quorum"), std::string::npos) << d.reason;
}

// S3
TEST(SpaceDecisionTest, S3_BackOffAfterFailuresDoublingToFiveMinutes) {
  SpaceObservation o = Nospace();
  o.failures = 1;
  o.last_failure_at = o.now - 10s;
  SpaceDecision d = DecideSpace(o);
  EXPECT_EQ(d.kind, SpaceDecision::kWait);
  EXPECT_EQ(d.retry_in, 20s);
  EXPECT_NE(d.reason.find("failed 1 time(s)"), std::string::npos) << d.reason;
  o.last_failure_at = o.now - 30s;
  EXPECT_EQ(DecideSpace(o).kind, SpaceDecision::kRecover);
  o.failures = 3;  // 30 s, 60 s, 120 s
  o.last_failure_at = o.now - 100s;
  EXPECT_EQ(DecideSpace(o).retry_in, 20s);
  o.failures = 20;  // capped
  o.last_failure_at = o.now - 299s;
  EXPECT_EQ(DecideSpace(o).retry_in, 1s);
  o.last_failure_at = o.now - 300s;
  EXPECT_EQ(DecideSpace(o).kind, SpaceDecision::kRecover);
}

// S4
TEST(SpaceDecisionTest, S4_AnAlarmThatComesBackSoonIsNotLoopedOn) {
  SpaceObservation o = Nospace();
  o.last_success_at = o.now - 40s;
  SpaceDecision d = DecideSpace(o);
  EXPECT_EQ(d.kind, SpaceDecision::kWait);
  EXPECT_EQ(d.retry_in, 260s);
  EXPECT_NE(d.reason.find("quota"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("Not looping"), std::string::npos) << d.reason;
  o.last_success_at = o.now - kSpaceReturnWindow;
  EXPECT_EQ(DecideSpace(o).kind, SpaceDecision::kRecover);
}

// S5
TEST(SpaceDecisionTest, S5_RecoverWhenNospaceAndQuorum) {
  EXPECT_EQ(DecideSpace(Nospace()).kind, SpaceDecision::kRecover);
  // A CORRUPT beside it does not stop the NOSPACE recovery (nor is it disarmed: Recover
  // disarms NOSPACE only).
  SpaceObservation o = Nospace();
  o.alarms.push_back({0x33, "CORRUPT"});
  EXPECT_EQ(DecideSpace(o).kind, SpaceDecision::kRecover);
}

}  // namespace
}  // namespace steward
