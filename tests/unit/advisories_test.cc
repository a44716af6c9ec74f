// The etcd version advisory table (etcd/advisories.h): each range's boundaries, what refuses a
// roll, and that the table itself is well formed.
#include "etcd/advisories.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "etcd/version.h"

namespace steward {
namespace {

std::set<std::string> Ids(const std::string& version) {
  std::set<std::string> ids;
  for (const EtcdAdvisory* a : AdvisoriesFor(version)) ids.emplace(a->id);
  return ids;
}
bool Has(const std::string& version, const std::string& id) { return Ids(version).count(id) > 0; }

TEST(AdvisoriesTest, TheTableIsWellFormed) {
  std::set<std::string> seen;
  for (const auto& a : EtcdAdvisories()) {
    EXPECT_TRUE(seen.emplace(a.id).second) << "duplicate id " << a.id;
    auto first = ParseVersion(std::string(a.first)), last = ParseVersion(std::string(a.last));
    ASSERT_TRUE(first && last) << a.id;
    EXPECT_LE(*first, *last) << a.id;
    EXPECT_FALSE(*a.issue == 0 || *a.breaks == 0 || *a.action == 0) << a.id;
  }
}

TEST(AdvisoriesTest, Etcd33And34AreEndOfLifeAnd35IsNot) {
  EXPECT_TRUE(Has("3.3.0", "eol-3.3"));
  EXPECT_TRUE(Has("3.3.27", "eol-3.3"));
  EXPECT_FALSE(Has("3.4.0", "eol-3.3"));
  EXPECT_FALSE(Has("3.2.32", "eol-3.3")) << "outside every range: no advisory invented";
  EXPECT_TRUE(Has("3.4.0", "eol-3.4"));
  EXPECT_TRUE(Has("3.4.23", "eol-3.4"));
  EXPECT_TRUE(Has("3.4.40", "eol-3.4"));
  EXPECT_FALSE(Has("3.5.0", "eol-3.4"));
  EXPECT_EQ(AdvisoriesFor("3.4.23").front()->effect, AdvisoryEffect::kEndOfLife);
}

TEST(AdvisoriesTest, TheCrashInconsistencyRangeIs350To352AndRefusesARoll) {
  EXPECT_FALSE(Has("3.4.99", "etcd-13766"));
  EXPECT_TRUE(Has("3.5.0", "etcd-13766"));
  EXPECT_TRUE(Has("3.5.2", "etcd-13766"));
  EXPECT_FALSE(Has("3.5.3", "etcd-13766"));
  ASSERT_NE(RollRefusal("3.5.0"), nullptr);
  EXPECT_STREQ(RollRefusal("3.5.2")->id, "etcd-13766");
  EXPECT_EQ(RollRefusal("3.5.3"), nullptr);
}

TEST(AdvisoriesTest, TheLearnerPersistenceRangeIs351To3523AndOnlyWarns) {
  EXPECT_FALSE(Has("3.5.0", "etcd-19557"));
  EXPECT_TRUE(Has("3.5.1", "etcd-19557"));
  EXPECT_TRUE(Has("3.5.16", "etcd-19557"));
  EXPECT_TRUE(Has("3.5.23", "etcd-19557"));
  EXPECT_FALSE(Has("3.5.24", "etcd-19557"));
  EXPECT_FALSE(Has("3.6.0", "etcd-19557"));
  EXPECT_EQ(RollRefusal("3.5.16"), nullptr) << "a warning: the 3.5 the tests fetch rolls";
}

TEST(AdvisoriesTest, TheMemberUpdateLearnerRangeEndsAt3529) {
  EXPECT_FALSE(Has("3.3.27", "etcd-21694")) << "3.3 has no learners";
  EXPECT_TRUE(Has("3.4.0", "etcd-21694"));
  EXPECT_TRUE(Has("3.5.29", "etcd-21694"));
  EXPECT_FALSE(Has("3.5.30", "etcd-21694"));
}

TEST(AdvisoriesTest, ARollIntoThreeSixRequiresThreeFiveThirtyTwo) {
  for (const char* v : {"3.6.0", "3.6.4", "3.6.13"}) {
    const UpgradeRequirement* r = UpgradeRequirementFor(v);
    ASSERT_NE(r, nullptr) << v;
    EXPECT_STREQ(r->at_least, "3.5.32");
  }
  for (const char* v : {"3.5.32", "3.4.23", "3.7.0", "", "latest"}) {
    EXPECT_EQ(UpgradeRequirementFor(v), nullptr) << v;
  }
}

TEST(AdvisoriesTest, TheNewestDebianPatchHasNoneAndNonVersionsHaveNone) {
  EXPECT_TRUE(AdvisoriesFor("3.5.30").empty());
  EXPECT_TRUE(AdvisoriesFor("").empty());
  EXPECT_TRUE(AdvisoriesFor("3.5").empty());
  EXPECT_TRUE(AdvisoriesFor("registry.k8s.io/etcd:3.5.0-0").empty());
  EXPECT_EQ(RollRefusal("garbage"), nullptr);
}

TEST(AdvisoriesTest, ALineNamesTheRangeTheIssueAndTheEffect) {
  const std::string line = AdvisoryLine(*RollRefusal("3.5.1"));
  EXPECT_NE(line.find("etcd-13766 (3.5.0-3.5.2, etcd #13766, refuses a roll): "), std::string::npos)
      << line;
}

}  // namespace
}  // namespace steward
