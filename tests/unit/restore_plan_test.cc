// The node's restore decision (node/restore_plan.h): one table test per rule NR1-NR4, and for
// the refusals, what switching the rule off lets through (a mutation check).
#include "node/restore_plan.h"

#include <gtest/gtest.h>

#include "common/rules.h"

namespace steward {
namespace {

NodeRestoreFacts Facts() {
  NodeRestoreFacts f;
  f.etcdctl = "/usr/bin/etcdctl";
  f.backup = "b1";
  f.backup_version = "3.4.23";
  f.node_version = "3.4.23";
  return f;
}

TEST(NodeRestorePlanTest, NR1_ABumpWithoutEtcdutlOrTheInPlaceEditIsRefused) {
  NodeRestoreFacts f = Facts();
  f.bump_revision = 1000;
  f.restore_in_place = false;
  NodeRestorePlan p = PlanNodeRestore(f);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.refusal)) << p.refusal;
  EXPECT_NE(p.refusal.message().find("etcd.restore_in_place"), std::string::npos);
  f.member = false;  // a node outside the restored cluster restores nothing
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok());
  f.member = true;
  f.etcdutl = "/usr/bin/etcdutl";
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok());
  f.etcdutl.clear();
  SetRulesOffForTesting({"NR1"});
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok()) << "NR1 off: the order would go ahead";
  SetRulesOffForTesting({});
}

TEST(NodeRestorePlanTest, NR2_NeverABackupOfANewerMinorVersion) {
  NodeRestoreFacts f = Facts();
  f.backup_version = "3.5.16";
  NodeRestorePlan p = PlanNodeRestore(f);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.refusal)) << p.refusal;
  EXPECT_NE(p.refusal.message().find("switch the nodes to 3.5"), std::string::npos) << p.refusal;
  f.backup_version = "3.3.25";  // an older backup: etcd upgrades it
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok());
  f.backup_version = "3.4.1";  // another patch
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok());
  f.backup_version = "3.5.16";
  f.node_version = "";  // unknown: not refused, but said
  p = PlanNodeRestore(f);
  EXPECT_TRUE(p.refusal.ok());
  EXPECT_TRUE(p.unknown_version);
  f.node_version = "3.4.23";
  SetRulesOffForTesting({"NR2"});
  EXPECT_TRUE(PlanNodeRestore(f).refusal.ok()) << "NR2 off: a downgrade would go ahead";
  SetRulesOffForTesting({});
}

TEST(NodeRestorePlanTest, NR3_TheTool) {
  NodeRestoreFacts f = Facts();
  EXPECT_EQ(PlanNodeRestore(f).tool, "/usr/bin/etcdctl") << "3.4 without a bump";
  f.etcdutl = "/usr/bin/etcdutl";
  EXPECT_EQ(PlanNodeRestore(f).tool, "/usr/bin/etcdctl") << "3.4: etcdctl restores";
  f.node_version = "3.5.16";
  f.backup_version = "3.5.16";
  EXPECT_EQ(PlanNodeRestore(f).tool, "/usr/bin/etcdutl") << "3.5 moved it to etcdutl";
  f.node_version = "3.4.23";
  f.backup_version = "3.4.23";
  f.bump_revision = 10;
  EXPECT_EQ(PlanNodeRestore(f).tool, "/usr/bin/etcdutl") << "only etcdutl bumps";
  f.etcdutl.clear();
  EXPECT_EQ(PlanNodeRestore(f).tool, "") << "without etcdutl only the in-place edit bumps";
}

TEST(NodeRestorePlanTest, NR4_OnlyTheInPlaceEditMeansTheStagedDbIsCheckedFirst) {
  NodeRestoreFacts f = Facts();
  f.bump_revision = 10;
  EXPECT_TRUE(PlanNodeRestore(f).check_in_place_first);
  f.etcdutl = "/usr/bin/etcdutl";  // a fallback exists
  EXPECT_FALSE(PlanNodeRestore(f).check_in_place_first);
  f.etcdutl.clear();
  f.bump_revision = 0;
  EXPECT_FALSE(PlanNodeRestore(f).check_in_place_first);
}

}  // namespace
}  // namespace steward
