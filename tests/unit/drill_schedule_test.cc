// When the leader's restore drills run (backup/drill_scheduler.h): the first one for a cluster
// never drilled, one interval after the last one recorded in the store, and never while one runs.
// The drills here find no backup (a real file store, empty), so they are skipped at once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "backup/drill.h"
#include "backup/drill_scheduler.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

using namespace std::chrono_literals;

class ManualClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override { return steady_; }
  std::chrono::system_clock::time_point WallNow() override { return wall_; }
  void SleepFor(std::chrono::milliseconds d) override { Advance(d); }
  void Advance(std::chrono::milliseconds d) {
    steady_ += d;
    wall_ += d;
  }

 private:
  std::chrono::steady_clock::time_point steady_ = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall_ = std::chrono::system_clock::now();
};

class DrillScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("steward-drill-schedule-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "store");
    config_.cluster.name = "demo";
    config_.node.name = "n1";
    config_.node.data_dir = (dir_ / "n1").string();
    store_ = NewFileStore((dir_ / "store").string());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Waits (bounded) for the drill started last to end.
  static bool Ended(DrillScheduler& d) {
    for (int i = 0; i < 500 && d.running(); ++i) std::this_thread::sleep_for(10ms);
    return !d.running();
  }

  std::filesystem::path dir_;
  Config config_;
  std::unique_ptr<BackupStore> store_;
  ManualClock clock_;
};

TEST_F(DrillScheduleTest, TheFirstDrillComesWithinAnHourAndThenOneEveryInterval) {
  config_.backup.drill_interval = std::chrono::hours(24);
  DrillScheduler d(config_, store_.get(), /*live=*/nullptr, &clock_);
  std::atomic<int> done{0};
  std::string failure;
  d.SetOnDone([&](const DrillResult& r) {
    failure = r.failure;
    ++done;
  });
  EXPECT_FALSE(d.MaybeStart()) << "a new leadership waits before the first drill";
  clock_.Advance(59min);
  EXPECT_FALSE(d.MaybeStart());
  clock_.Advance(1min);
  ASSERT_TRUE(d.MaybeStart()) << "never drilled: due an hour after the leadership began";
  ASSERT_TRUE(Ended(d));
  EXPECT_EQ(done.load(), 1);
  EXPECT_NE(failure.find("no complete backup"), std::string::npos) << failure;
  EXPECT_NE(d.LastSummary().find("no complete backup"), std::string::npos);
  clock_.Advance(23h);
  EXPECT_FALSE(d.MaybeStart()) << "one interval after the last drill, not before";
  clock_.Advance(1h);
  EXPECT_TRUE(d.MaybeStart());
  ASSERT_TRUE(Ended(d));
  EXPECT_EQ(done.load(), 2);
}

TEST_F(DrillScheduleTest, ADrillRecordedInTheStoreSetsTheNextOne) {
  config_.backup.drill_interval = std::chrono::hours(24);
  // An on-demand drill (stewardctl verify-backup) recorded 2 hours ago.
  // The backup it drilled is an imported file, which the leader's drills never take: this
  // drill then finds nothing to drill, and runs no etcd.
  BackupMeta meta;
  meta.name = BackupName(clock_.WallNow() - 3h, 5);
  meta.cluster = "demo";
  meta.revision = 5;
  meta.imported_from = "/tmp/some.db";
  ASSERT_TRUE(store_->Put(MetaKey("demo", meta.name), MetaToJson(meta).dump()).ok());
  ASSERT_TRUE(store_->Put(BackupsPrefix("demo") + meta.name + "/snapshot.db.zst", "x").ok());
  DrillResult earlier;
  earlier.backup = meta.name;
  earlier.passed = true;
  ASSERT_TRUE(RecordDrill(*store_, "demo", earlier, clock_.UnixSeconds() - 7200).ok());
  DrillScheduler d(config_, store_.get(), nullptr, &clock_);
  clock_.Advance(2h);
  EXPECT_FALSE(d.MaybeStart()) << "the store says the last drill was 4 h ago";
  clock_.Advance(20h);
  EXPECT_TRUE(d.MaybeStart());
  ASSERT_TRUE(Ended(d));
}

TEST_F(DrillScheduleTest, OffMeansNever) {
  config_.backup.drill_interval = std::chrono::milliseconds(0);
  DrillScheduler d(config_, store_.get(), nullptr, &clock_);
  clock_.Advance(std::chrono::hours(24 * 30));
  EXPECT_FALSE(d.MaybeStart());
}

// A scratch dir left by a drill whose process is gone is removed when the scheduler starts.
TEST_F(DrillScheduleTest, AKilledDrillsScratchDirIsRemovedAtStart) {
  config_.backup.drill_interval = std::chrono::hours(24);
  // A PID that is not running: fork a child that exits at once, and reap it.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  int status = 0;
  ASSERT_EQ(waitpid(gone, &status, 0), gone);
  const auto stale = dir_ / "n1" / "drill" / ("steward-drill-" + std::to_string(gone) + "-1");
  const auto mine = dir_ / "n1" / "drill" / ("steward-drill-" + std::to_string(getpid()) + "-1");
  std::filesystem::create_directories(stale / "member");
  std::filesystem::create_directories(mine);
  DrillScheduler d(config_, store_.get(), nullptr, &clock_);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(mine)) << "a live process's drill is left alone";
}

// The scratch etcd's revisions, translated to the live cluster's: equal until the replay
// starts, then offset by the revisions the deltas skip (the agents' own writes) and by the
// extra ones a split revision makes.
TEST(ReplayedRevisionsTest, TranslatesTheScratchRevisionsToTheLiveOnes) {
  ReplayedRevisions map;
  EXPECT_EQ(map.Live(90), 90) << "before any replay: the backup's own revisions";
  map.Add(101, 101);  // live 101 -> scratch 101
  map.Add(102, 104);  // live 102..103 were the agents' own: skipped
  map.Add(103, 105);  // same offset: no new run
  map.Add(104, 106);  // live 106 split in two transactions...
  map.Add(105, 106);
  map.Add(106, 107);  // ...so later ones are one behind again
  map.Add(106, 900);  // a scratch revision not past the last: ignored
  EXPECT_EQ(map.runs(), 3u);
  EXPECT_EQ(map.Live(100), 100);
  EXPECT_EQ(map.Live(101), 101);
  EXPECT_EQ(map.Live(102), 104);
  EXPECT_EQ(map.Live(103), 105);
  EXPECT_EQ(map.Live(104), 106);
  EXPECT_EQ(map.Live(105), 106);
  EXPECT_EQ(map.Live(106), 107);
}

// A failed drill keeps a backup from being restored automatically, unless the drill found a
// live member, not the backup, to be the odd one out; a passed or skipped drill never does.
TEST(DrillRefutes, OnlyADrillThatFailedOnTheBackupsAccount) {
  auto drill = [](bool passed, bool skipped, const std::string& failure) {
    return nlohmann::json{{"passed", passed}, {"skipped", skipped}, {"failure", failure}}.dump();
  };
  EXPECT_EQ(DrillRefutes(""), "");
  EXPECT_EQ(DrillRefutes(drill(true, false, "")), "");
  EXPECT_EQ(DrillRefutes(drill(false, true, "too little disk")), "");
  EXPECT_EQ(DrillRefutes(drill(false, false,
                               "etcd's KV hash at revision 9 differs; the backup "
                               "agrees with the majority of the live members (n1, "
                               "n3); the odd one out is live member n2, not the "
                               "backup")),
            "");
  EXPECT_NE(DrillRefutes(drill(false, false, "key /a differs")).find("key /a differs"),
            std::string::npos);
  EXPECT_NE(DrillRefutes(drill(false, false, "the backup is the odd one out: ...")), "");
}

}  // namespace
}  // namespace steward
