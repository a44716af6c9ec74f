// Table tests of stewardctl destroy's plan (src/control/destroy.h), one per rule, and the
// store's destroy mark.
#include "control/destroy.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "backup/layout.h"

namespace steward {
namespace {

// A healthy cluster: a readable store, every agent answers, a quorum, a backup.
DestroyView Healthy() {
  DestroyView v;
  v.quorum = true;
  v.newest_backup = "20261126T170000Z-00000000000000000042";
  return v;
}

TEST(DestroyPlanTest, X7_AHealthyClusterGetsAFinalBackupFirst) {
  DestroyPlan p = PlanDestroy(Healthy());
  EXPECT_EQ(p.step, DestroyStep::kFinalBackupFirst);
  EXPECT_EQ(p.rule, "X7");
}

TEST(DestroyPlanTest, X1_X2_NoStoreOrAnUnreadableOneRefuses) {
  DestroyView v = Healthy();
  v.has_store = false;
  EXPECT_EQ(PlanDestroy(v).rule, "X1");
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kRefuse);
  v = Healthy();
  v.store_ok = false;
  v.store_error = "503";
  DestroyPlan p = PlanDestroy(v);
  EXPECT_EQ(p.step, DestroyStep::kRefuse);
  EXPECT_NE(p.reason.find("503"), std::string::npos) << p.reason;
}

TEST(DestroyPlanTest, X3_AlreadyDestroyedIsNothingNew) {
  DestroyView v = Healthy();
  v.mark = DestroyMark{"1-0001", "a@h", 1, "b", 1, ""};
  v.silent_agents = {"n2"};  // a retry must not be refused for it
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kAlready);
}

TEST(DestroyPlanTest, X4_X5_ARestoreUnderWayOrAdoptionRefuses) {
  DestroyView v = Healthy();
  v.restore_may_be_under_way = true;
  EXPECT_EQ(PlanDestroy(v).rule, "X4");
  v = Healthy();
  v.adopting = true;
  EXPECT_EQ(PlanDestroy(v).rule, "X5");
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kRefuse);
}

TEST(DestroyPlanTest, X6_ASilentAgentRefusesUnlessForced) {
  DestroyView v = Healthy();
  v.silent_agents = {"n3"};
  DestroyPlan p = PlanDestroy(v);
  EXPECT_EQ(p.step, DestroyStep::kRefuse);
  EXPECT_EQ(p.rule, "X6");
  EXPECT_NE(p.reason.find("n3"), std::string::npos) << p.reason;
  v.force = true;
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kFinalBackupFirst);
}

TEST(DestroyPlanTest, X8_WithoutQuorumOnlyForceKeepsTheNewestBackup) {
  DestroyView v = Healthy();
  v.quorum = false;
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kRefuse);
  EXPECT_EQ(PlanDestroy(v).rule, "X8");
  v.force = true;
  EXPECT_EQ(PlanDestroy(v).step, DestroyStep::kKeepNewestBackup);
  v.newest_backup.reset();
  DestroyPlan p = PlanDestroy(v);
  EXPECT_EQ(p.step, DestroyStep::kRefuse);
  EXPECT_NE(p.reason.find("no valid backup"), std::string::npos) << p.reason;
}

TEST(DestroyMarkTest, RoundTripsAndADamagedMarkIsNotNone) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("destroy-mark-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  auto store = NewFileStore(root.string());
  auto none = ReadDestroyMark(*store, "demo");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  DestroyMark m{"1764176400-beef", "alice@h1", 1764176400, "20261126T170000Z-1", 42, "retired"};
  ASSERT_TRUE(WriteDestroyMark(*store, "demo", m).ok());
  auto read = ReadDestroyMark(*store, "demo");
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->id, m.id);
  EXPECT_EQ((*read)->final_backup, m.final_backup);
  EXPECT_EQ((*read)->revision, 42);
  const std::string text = DescribeDestroyMark("demo", **read);
  EXPECT_NE(text.find("alice@h1"), std::string::npos) << text;
  EXPECT_NE(text.find("undestroy"), std::string::npos) << text;
  ASSERT_TRUE(store->Put(DestroyMarkKey("demo"), "{not json").ok());
  auto damaged = ReadDestroyMark(*store, "demo");
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(ClearDestroyMark(*store, "demo").ok());
  auto cleared = ReadDestroyMark(*store, "demo");
  ASSERT_TRUE(cleared.ok());
  EXPECT_FALSE(cleared->has_value());
  fs::remove_all(root);
}

}  // namespace
}  // namespace steward
