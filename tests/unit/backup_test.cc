// Pure backup logic: naming, meta.json, retention, and the file store + verification path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "backup/layout.h"
#include "backup/retention.h"
#include "backup/store.h"
#include "control/records.h"

namespace steward {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

TEST(LayoutTest, NamesSortByTimeThenRevisionAndParseBack) {
  auto t = std::chrono::system_clock::time_point(seconds(1764110096));  // 2025-11-25T22:34:56Z
  std::string a = BackupName(t, 42);
  EXPECT_EQ(a, "20251125T223456Z-00000000000000000042");
  std::string b = BackupName(t + seconds(1), 7);
  EXPECT_LT(a, b);
  auto parsed = ParseBackupName(a);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->first, 1764110096);
  EXPECT_EQ(parsed->second, 42);
  EXPECT_FALSE(ParseBackupName("20251125T223456Z-42").has_value());
  EXPECT_FALSE(ParseBackupName("20251325T223456Z-00000000000000000042").has_value());
  EXPECT_FALSE(ParseBackupName("meta.json").has_value());
  EXPECT_EQ(SnapshotKey("demo", a), "demo/backups/" + a + "/snapshot.db.zst");
  EXPECT_EQ(MetaKey("demo", a), "demo/backups/" + a + "/meta.json");
}

TEST(LayoutTest, MetaRoundTripsKeepingUint64Ids) {
  BackupMeta m;
  m.name = "20251125T223456Z-00000000000000000042";
  m.cluster = "demo";
  m.cluster_id = 0xfedcba9876543210ULL;  // above 2^53: must not pass through a double
  m.revision = 42;
  m.db_size = 100;
  m.compressed_size = 50;
  m.sha256 = std::string(64, 'a');
  m.unix_time = 1764110096;
  auto back = MetaFromJson(MetaToJson(m).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cluster_id, m.cluster_id);
  EXPECT_EQ(back->revision, 42);
  EXPECT_EQ(back->sha256, m.sha256);
  EXPECT_FALSE(MetaFromJson("{not json").ok());
  EXPECT_FALSE(MetaFromJson(R"({"name": "x"})").ok());
}

RetentionItem At(int64_t now, std::chrono::seconds age, const std::string& name,
                 bool valid = true) {
  return {name, now - age.count(), valid};
}

TEST(RetentionTest, KeepsRecentThenHourlyThenDailyAndNeverTheNewest) {
  const int64_t now = 1764110096;
  RetentionConfig p;  // 1h all, 24h hourly, 30d daily
  std::vector<RetentionItem> items;
  // Every 10 minutes for the last 3 hours.
  for (int i = 0; i < 18; ++i)
    items.push_back(At(now, seconds(i * 600 + 60), "r" + std::to_string(i)));
  // Two in the same day, 5 days ago, and one 40 days ago.
  items.push_back(At(now, hours(5 * 24), "d5a"));
  items.push_back(At(now, hours(5 * 24) + seconds(600), "d5b"));
  items.push_back(At(now, hours(40 * 24), "old"));
  auto doomed = PlanRetention(items, now, p);
  auto gone = [&](const std::string& n) {
    return std::find(doomed.begin(), doomed.end(), n) != doomed.end();
  };
  for (int i = 0; i < 6; ++i)
    EXPECT_FALSE(gone("r" + std::to_string(i))) << "within the hour: r" << i;
  // Beyond the first hour, one per clock hour survives.
  int kept_hourly = 0;
  for (int i = 6; i < 18; ++i) kept_hourly += gone("r" + std::to_string(i)) ? 0 : 1;
  EXPECT_GE(kept_hourly, 2);
  EXPECT_LE(kept_hourly, 3);
  EXPECT_NE(gone("d5a"), gone("d5b")) << "exactly one of the same day is kept";
  EXPECT_FALSE(gone("d5a")) << "the newer of the day is kept";
  EXPECT_TRUE(gone("old"));
}

TEST(RetentionTest, NeverDeletesTheNewestValidBackupAndDropsOldIncompleteOnes) {
  const int64_t now = 1764110096;
  RetentionConfig p;
  std::vector<RetentionItem> items = {
      At(now, hours(24 * 90), "ancient"), At(now, hours(24 * 91), "older"),
      At(now, hours(2), "partial", false), At(now, seconds(10), "fresh-partial", false)};
  auto doomed = PlanRetention(items, now, p);
  EXPECT_EQ(std::count(doomed.begin(), doomed.end(), "ancient"), 0);
  EXPECT_EQ(std::count(doomed.begin(), doomed.end(), "older"), 1);
  EXPECT_EQ(std::count(doomed.begin(), doomed.end(), "partial"), 1);
  EXPECT_EQ(std::count(doomed.begin(), doomed.end(), "fresh-partial"), 0)
      << "a backup may still be in flight";
}

TEST(FileStoreTest, WritesAtomicallyListsAndDeletes) {
  auto root = std::filesystem::temp_directory_path() / ("steward-fs-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  auto store = NewFileStore(root.string());
  EXPECT_FALSE(store->List("c/").ok()) << "a missing root must be an error, not an empty list";
  std::filesystem::create_directories(root);
  auto w = store->Create("c/backups/x/snapshot.db.zst");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write("hello ").ok());
  ASSERT_TRUE((*w)->Write("world").ok());
  auto before = store->List("c/");
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->empty()) << "an uncommitted object must not be listed";
  ASSERT_TRUE((*w)->Commit().ok());
  ASSERT_TRUE(store->Put("c/backups/x/meta.json", "{}").ok());
  auto listed = store->List("c/backups/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "c/backups/x/meta.json");
  EXPECT_EQ((*listed)[1].size, 11u);
  EXPECT_EQ(*store->Get("c/backups/x/snapshot.db.zst"), "hello world");
  EXPECT_TRUE(absl::IsNotFound(store->Get("c/nope").status()));
  ASSERT_TRUE(store->Delete("c/backups/x/meta.json").ok());
  ASSERT_TRUE(store->Delete("c/backups/x/snapshot.db.zst").ok());
  EXPECT_TRUE(store->Delete("c/backups/x/snapshot.db.zst").ok()) << "deleting twice is fine";
  EXPECT_TRUE(store->List("c/")->empty());
  {
    auto abandoned = store->Create("c/y");
    ASSERT_TRUE((*abandoned)->Write("partial").ok());
  }
  EXPECT_TRUE(store->List("c/")->empty()) << "an abandoned writer leaves nothing";
  std::filesystem::remove_all(root);
}

// Issue 9, path 2: "newest" is a point of history, never a clock reading.
TEST(LayoutTest, BackupsAreOrderedByGenerationThenRevisionNotByTime) {
  BackupMeta early_clock_high_rev, late_clock_low_rev, restored;
  early_clock_high_rev.name = "20251125T100000Z-00000000000000000200";
  early_clock_high_rev.revision = 200;
  late_clock_low_rev.name = "20251125T120000Z-00000000000000000150";  // clock 2 h ahead
  late_clock_low_rev.revision = 150;
  restored.name = "20251125T110000Z-00000000000000000120";
  restored.revision = 120;
  restored.generation = 1;  // taken after a restore to an older backup
  EXPECT_TRUE(BackupNewer(early_clock_high_rev, late_clock_low_rev));
  EXPECT_FALSE(BackupNewer(late_clock_low_rev, early_clock_high_rev));
  EXPECT_TRUE(BackupNewer(restored, early_clock_high_rev));
  late_clock_low_rev.unix_time = 1764110096 + 7200;
  EXPECT_TRUE(BackupTimeInFuture(late_clock_low_rev, 1764110096));
  EXPECT_FALSE(BackupTimeInFuture(late_clock_low_rev, 1764110096 + 7000));
}

RetentionItem Rev(int64_t now, std::chrono::seconds age, const std::string& name, int64_t rev,
                  int64_t generation = 0) {
  RetentionItem r{name, now - age.count(), true};
  r.revision = rev;
  r.generation = generation;
  return r;
}

TEST(RetentionTest, TheNewestRevisionIsKeptHoweverOldItsTime) {
  const int64_t now = 1764110096;
  RetentionConfig p;
  // The newest point of history was taken by a clock 90 days behind.
  std::vector<RetentionItem> items = {Rev(now, hours(24 * 90), "slow-clock", 500),
                                      Rev(now, hours(24 * 91), "older", 400)};
  std::string skew;
  auto doomed = PlanRetention(items, now, p, &skew);
  EXPECT_EQ(std::count(doomed.begin(), doomed.end(), "slow-clock"), 0) << skew;
}

TEST(RetentionTest, ClocksThatDisagreeWithHistoryStopPruning) {
  const int64_t now = 1764110096;
  RetentionConfig p;
  // "ahead" holds an older revision than "normal" yet is dated two hours later.
  std::vector<RetentionItem> items = {Rev(now, -hours(2), "ahead", 100),
                                      Rev(now, seconds(60), "normal", 300),
                                      Rev(now, hours(24 * 60), "ancient", 50)};
  std::string skew;
  auto doomed = PlanRetention(items, now, p, &skew);
  EXPECT_TRUE(doomed.empty());
  EXPECT_NE(skew.find("ahead"), std::string::npos) << skew;
  // Without the disagreement, the ancient one goes and the future-dated one stays.
  items = {Rev(now, -hours(2), "ahead", 400), Rev(now, seconds(60), "normal", 300),
           Rev(now, hours(24 * 60), "ancient", 50)};
  skew.clear();
  doomed = PlanRetention(items, now, p, &skew);
  EXPECT_EQ(doomed, std::vector<std::string>{"ancient"}) << skew;
}

TEST(FileStoreTest, AMissingRootIsAnErrorAndIsNeverCreated) {
  auto root = std::filesystem::temp_directory_path() / ("steward-nofs-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  auto store = NewFileStore(root.string());
  // Not NotFound: "no object" read off an unmounted share would mean "no cluster existed".
  auto got = store->Get("c/control/created.json");
  EXPECT_TRUE(absl::IsFailedPrecondition(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("not mounted?"), std::string::npos);
  EXPECT_TRUE(absl::IsFailedPrecondition(store->Put("c/x", "y")));
  EXPECT_TRUE(absl::IsFailedPrecondition(store->Create("c/x").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store->Delete("c/x")));
  EXPECT_FALSE(std::filesystem::exists(root)) << "the store root must never be created";
}

// Issue 9, path 11: the restored revision must clear every revision the lost cluster served.
TEST(RevisionBumpTest, ClearsTheRecordedRevisionByTheMargin) {
  EXPECT_EQ(RevisionBump(5000, 1200), 3800 + kRevisionBumpMargin);
  EXPECT_EQ(RevisionBump(0, 1200), kRevisionBumpMargin) << "nothing recorded: the margin alone";
  EXPECT_EQ(RevisionBump(100, 1200), kRevisionBumpMargin) << "a record older than the backup";
  EXPECT_GT(1200 + RevisionBump(5000, 1200), 5000 + kRevisionBumpMargin - 1);
}

// A restore records where it starts its cluster; the record is only ever raised.
TEST(RevisionBumpTest, TheRecordIsRaisedNeverLowered) {
  auto root = std::filesystem::temp_directory_path() / ("steward-rev-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  auto store = NewFileStore(root.string());
  EXPECT_EQ(*ReadHighestRevision(*store, "c"), 0) << "no record yet";
  ASSERT_TRUE(RaiseHighestRevision(*store, "c", 10000522, 1).ok());
  EXPECT_EQ(*ReadHighestRevision(*store, "c"), 10000522);
  ASSERT_TRUE(RaiseHighestRevision(*store, "c", 700, 2).ok());
  EXPECT_EQ(*ReadHighestRevision(*store, "c"), 10000522);
  EXPECT_EQ(RestoredStartRevision(522, 0, 10000000), 10000522);
  EXPECT_EQ(RestoredStartRevision(522, 600, 10000000), 10000600) << "replayed deltas count";
  // The next restore of the same backup (revision 522) starts past the first one's start.
  EXPECT_GT(522 + RevisionBump(*ReadHighestRevision(*store, "c"), 522),
            10000522 + kRevisionBumpMargin - 1);
  ASSERT_TRUE(store->Put(RevisionRecordKey("c"), "{").ok());
  EXPECT_TRUE(absl::IsDataLoss(RaiseHighestRevision(*store, "c", 10000600, 3)))
      << "a malformed record is an error, not overwritten";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace steward
