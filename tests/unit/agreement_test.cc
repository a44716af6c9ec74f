// JudgeHashes (etcd/agreement.h): which members hold the majority's data, one case per rule.
#include "etcd/agreement.h"

#include <gtest/gtest.h>

#include "common/rules.h"
#include "reconcile/divergence.h"

namespace steward {
namespace {

HashSample S(const std::string& name, uint32_t hash, int64_t compact = 5, bool voter = true) {
  HashSample s;
  s.member = name;
  s.voter = voter;
  s.hash = EtcdApi::KvHash{hash, compact};
  return s;
}
HashSample Silent(const std::string& name) {
  HashSample s;
  s.member = name;
  s.error = "deadline exceeded";
  return s;
}
using Names = std::vector<std::string>;

TEST(Agreement, AllAgree) {
  HashVerdict v = JudgeHashes(100, {S("n1", 7), S("n2", 7), S("n3", 7)}, 3);
  EXPECT_TRUE(v.majority);
  EXPECT_EQ(v.agreeing, (Names{"n1", "n2", "n3"}));
  EXPECT_TRUE(v.differing.empty());
  EXPECT_EQ(v.text, "at revision 100: n1, n2, n3 agree (hash 00000007)");
}

TEST(Agreement, DV2TheOneThatDiffersIsNamed) {
  HashVerdict v = JudgeHashes(100, {S("n1", 7), S("n2", 9), S("n3", 7)}, 3);
  EXPECT_TRUE(v.majority);
  EXPECT_EQ(v.majority_hash, 7u);
  EXPECT_EQ(v.differing, (Names{"n2"}));
  EXPECT_NE(v.text.find("n2 hold 00000009, which differs"), std::string::npos) << v.text;
}

TEST(Agreement, DV2ALearnerThatDiffersIsNamedButDoesNotCount) {
  // Two voters of three agree: a majority. The learner differs; it never makes a majority.
  HashVerdict v = JudgeHashes(100, {S("n1", 7), S("n2", 7), S("n4", 9, 5, false)}, 3);
  EXPECT_TRUE(v.majority);
  EXPECT_EQ(v.differing, (Names{"n4"}));
  HashVerdict learners =
      JudgeHashes(100, {S("n1", 7), S("n4", 9, 5, false), S("n5", 9, 5, false), S("n2", 8)}, 3);
  EXPECT_FALSE(learners.majority) << learners.text;
  EXPECT_TRUE(learners.differing.empty());
}

TEST(Agreement, DV3NoMajorityNobodyDiffers) {
  HashVerdict v = JudgeHashes(100, {S("n1", 7), S("n2", 8), S("n3", 9)}, 3);
  EXPECT_FALSE(v.majority);
  EXPECT_TRUE(v.split);
  EXPECT_TRUE(v.differing.empty());
  EXPECT_NE(v.text.find("no majority of the 3 voting members agrees"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("nothing is repaired"), std::string::npos) << v.text;
  // Two of five agreeing is no majority either, however the others split.
  HashVerdict five =
      JudgeHashes(100, {S("n1", 7), S("n2", 7), S("n3", 8), Silent("n4"), Silent("n5")}, 5);
  EXPECT_FALSE(five.majority);
  EXPECT_TRUE(five.differing.empty());
}

TEST(Agreement, DV1SilentOrOtherCompactionIsUnknownNeverDiffers) {
  HashVerdict v = JudgeHashes(100, {S("n1", 7), Silent("n2"), S("n3", 7), S("n4", 9, 6)}, 4);
  EXPECT_FALSE(v.majority) << "two of four is no majority: " << v.text;
  EXPECT_EQ(v.unknown, (Names{"n2", "n4"}));
  EXPECT_TRUE(v.differing.empty());
  HashVerdict three = JudgeHashes(100, {S("n1", 7), S("n2", 7), S("n3", 9, 6)}, 3);
  EXPECT_TRUE(three.majority);
  EXPECT_TRUE(three.differing.empty()) << "hashed another compaction: not comparable";
  EXPECT_EQ(three.unknown, (Names{"n3"}));
}

TEST(Agreement, TooFewAnswersIsNoMajority) {
  HashVerdict v = JudgeHashes(100, {S("n1", 7), Silent("n2"), Silent("n3")}, 3);
  EXPECT_FALSE(v.majority);
  EXPECT_FALSE(v.split);
  EXPECT_NE(v.text.find("too few to be a majority of 3"), std::string::npos) << v.text;
}

// Mutation: without DV2 a minority's hash may be taken as the cluster's, and the correct
// members named as the ones that differ.
TEST(Agreement, WithoutDV2AMinorityJudgesTheMajority) {
  SetRulesOffForTesting({"DV2"});
  HashVerdict v = JudgeHashes(100, {S("n1", 9), S("n2", 3), S("n3", 9)}, 3);
  SetRulesOffForTesting({});
  EXPECT_EQ(v.majority_hash, 3u);
  EXPECT_EQ(v.differing, (Names{"n1", "n3"}));
}

// reconcile/divergence.h: two checks in a row name a member before it counts as diverged.
TEST(Agreement, ACountIsKeptOnlyWhileChecksInARowNameTheMember) {
  HashVerdict names_n2 = JudgeHashes(100, {S("n1", 7), S("n2", 9), S("n3", 7)}, 3);
  HashVerdict all_agree = JudgeHashes(101, {S("n1", 7), S("n2", 7), S("n3", 7)}, 3);
  HashVerdict n2_silent = JudgeHashes(102, {S("n1", 7), Silent("n2"), S("n3", 7)}, 3);
  std::map<std::string, int> streak = CountDiverged({}, names_n2);
  EXPECT_EQ(streak, (std::map<std::string, int>{{"n2", 1}}));
  // A check it missed neither confirms nor clears it.
  streak = CountDiverged(streak, n2_silent);
  EXPECT_EQ(streak, (std::map<std::string, int>{{"n2", 1}}));
  streak = CountDiverged(streak, names_n2);
  EXPECT_EQ(streak.at("n2"), kDivergedChecks);
  // One check that finds it agreeing starts it over.
  EXPECT_TRUE(CountDiverged(streak, all_agree).empty());
}

}  // namespace
}  // namespace steward
