// The real node disk (agent/node_disk.h, FsNodeDisk) on a temporary directory: what it calls
// a data dir's state, how it sets data aside and puts it back, its markers, and a restore tool
// cancelled by a shutting-down agent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/node_disk.h"
#include "common/files.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

class FsNodeDiskTest : public ::testing::Test {
 protected:
  FsNodeDiskTest()
      : dir_(fs::temp_directory_path() / ("steward-disk-" + std::to_string(getpid()))),
        disk_(dir_.string(), (dir_ / "etcd").string(), [this] { return cancelled_.load(); }) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FsNodeDiskTest() override { fs::remove_all(dir_); }

  void MakeMember() {
    fs::create_directories(dir_ / "etcd/member/wal");
    std::ofstream(dir_ / "etcd/member/wal/0000000000000000-0000000000000000.wal") << "x";
  }

  fs::path dir_;
  std::atomic<bool> cancelled_{false};
  FsNodeDisk disk_;
};

TEST_F(FsNodeDiskTest, AWalSegmentIsWhatMakesMemberData) {
  EXPECT_EQ(disk_.State(), DataDirState::kEmpty);
  fs::create_directories(dir_ / "etcd/member/snap");
  EXPECT_EQ(disk_.State(), DataDirState::kPartial);
  MakeMember();
  EXPECT_EQ(disk_.State(), DataDirState::kMember);
}

TEST_F(FsNodeDiskTest, SettingAsideKeepsOneCopyAndARetryKeepsTheFirst) {
  MakeMember();
  std::string moved;
  ASSERT_TRUE(disk_.SetAside("etcd-member-1", &moved).ok());
  EXPECT_EQ(moved, (dir_ / "removed/etcd-member-1").string());
  EXPECT_EQ(disk_.State(), DataDirState::kEmpty);
  // A retried order finds its copy: only what is left in the data dir goes.
  fs::create_directories(dir_ / "etcd/member/snap");
  ASSERT_TRUE(disk_.SetAside("etcd-member-1", &moved).ok());
  EXPECT_TRUE(fs::exists(dir_ / "removed/etcd-member-1/member/wal"));
  EXPECT_FALSE(fs::exists(dir_ / "etcd"));
  // A newer set-aside replaces the older copy.
  MakeMember();
  ASSERT_TRUE(disk_.SetAside("etcd-member-2", &moved).ok());
  EXPECT_FALSE(fs::exists(dir_ / "removed/etcd-member-1"));
  ASSERT_TRUE(disk_.PutBack(moved).ok());
  EXPECT_EQ(disk_.State(), DataDirState::kMember);
  // Nothing to move is not an error.
  ASSERT_TRUE(disk_.RemoveData().ok());
  ASSERT_TRUE(disk_.SetAside("etcd-member-3", &moved).ok());
  EXPECT_TRUE(moved.empty());
}

TEST_F(FsNodeDiskTest, APartialDirGoesToItsOwnPlace) {
  MakeMember();
  std::string moved;
  ASSERT_TRUE(disk_.SetAside("etcd-member-1", &moved).ok());
  fs::create_directories(dir_ / "etcd/member/snap");
  ASSERT_TRUE(disk_.SetPartialAside(&moved).ok());
  EXPECT_EQ(moved, (dir_ / "partial-aside").string());
  EXPECT_TRUE(fs::exists(dir_ / "removed/etcd-member-1")) << "a member's copy stays";
}

TEST_F(FsNodeDiskTest, MarkersAreSmallFilesBesideTheDataDir) {
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  EXPECT_EQ(disk_.Read(Marker::kFenced), "");
  ASSERT_TRUE(disk_.Write(Marker::kFenced, "r1").ok());
  EXPECT_EQ(disk_.Read(Marker::kFenced), "r1");
  EXPECT_TRUE(fs::exists(dir_ / "fenced"));
  ASSERT_TRUE(disk_.Remove(Marker::kFenced).ok());
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  ASSERT_TRUE(disk_.Remove(Marker::kFenced).ok()) << "removing an absent marker is fine";
}

TEST_F(FsNodeDiskTest, InstallingARestoreNeverReplacesAnExistingDataDir) {
  MakeMember();
  fs::create_directories(dir_ / "restore/etcd/member");
  EXPECT_TRUE(absl::IsFailedPrecondition(disk_.InstallStaged()));
  EXPECT_EQ(disk_.State(), DataDirState::kMember);
}

TEST_F(FsNodeDiskTest, AShutdownCancelsARunningRestoreTool) {
  // A stand-in restore tool that would run for a minute.
  const fs::path tool = dir_ / "slow-restore";
  std::ofstream(tool) << "#!/bin/sh\nsleep 60\n";
  fs::permissions(tool, fs::perms::owner_all);
  fs::create_directories(dir_ / "restore");
  SnapshotRestore r;
  r.tool = tool.string();
  r.name = "n1";
  std::thread stopper([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancelled_ = true;
  });
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = disk_.RestoreStaged(r);
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_LT(took, std::chrono::seconds(30));
}

// A store that streams an endless object, as a slow download of a large backup looks.
class EndlessStore : public BackupStore {
 public:
  std::string Describe() const override { return "endless"; }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Put(const std::string&, const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::string> Get(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Read(const std::string&,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    for (int i = 0; i < 100000; ++i) {  // bounded: 100,000 chunks, 1 ms apart
      if (absl::Status s = sink(std::string_view("\0\0\0\0", 4)); !s.ok()) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Delete(const std::string&) override { return absl::UnimplementedError(""); }
};

TEST_F(FsNodeDiskTest, AShutdownEndsABackupDownload) {
  EndlessStore store;
  BackupMeta meta;
  meta.name = "b1";
  cancelled_ = true;
  absl::Status s = disk_.StageBackup(store, "c", meta);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_FALSE(fs::exists(dir_ / "restore/snapshot.db"));
}

}  // namespace
}  // namespace steward
