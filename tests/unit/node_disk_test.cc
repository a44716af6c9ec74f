// The real node disk (node/node_disk.h, FsNodeDisk) on a temporary directory: what it calls
// a data dir's state, how it sets data aside and puts it back, its markers, a restore tool
// cancelled by a shutting-down agent, and the tool as the fallback of a restore in place (which
// itself is tested on real etcd DBs in tests/integration/restore_in_place_test.cc).
#include "node/node_disk.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

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

  // What StageBackup leaves: the backup's DB where the restored member keeps it.
  void StageFile(const std::string& content) {
    fs::create_directories(dir_ / "restore/etcd/member/snap");
    std::ofstream(dir_ / "restore/etcd/member/snap/db") << content;
  }
  // A stand-in restore tool: it insists on etcdctl's conditions (the snapshot is a file, the
  // data dir does not exist yet), then leaves a WAL there; exits `code` at the end.
  fs::path FakeTool(int code) {
    const fs::path tool = dir_ / "fake-restore";
    std::ofstream(tool)
        << "#!/bin/sh\nsnap=\"$3\"; shift 3\n[ -f \"$snap\" ] || exit 3\n"
           "while [ $# -gt 0 ]; do [ \"$1\" = --data-dir ] && dd=\"$2\"; shift; done\n"
           "[ -e \"$dd\" ] && exit 4\nmkdir -p \"$dd/member/wal\" && "
           "echo ok > \"$dd/member/wal/0.wal\"\nexit "
        << code << "\n";
    fs::permissions(tool, fs::perms::owner_all);
    return tool;
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
  StageFile("staged");
  SnapshotRestore r;
  r.tool = tool.string();
  r.name = "n1";
  r.in_place = false;
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

namespace steward {
namespace {

TEST_F(FsNodeDiskTest, ADbTheInPlaceRestoreRefusesGoesToTheToolAsItWasStaged) {
  StageFile("not a bbolt file");
  SnapshotRestore r;
  r.tool = FakeTool(0).string();
  r.name = "n1";
  r.token = "t";
  r.peer_url = "http://127.0.0.1:2380";
  r.initial_cluster = {{"n1", "http://127.0.0.1:2380"}};
  ASSERT_TRUE(r.in_place);
  absl::Status s = disk_.RestoreStaged(r);
  ASSERT_TRUE(s.ok()) << s;
  // The tool had the staged bytes, untouched, outside the data dir it built.
  auto staged = ReadFile((dir_ / "restore/snapshot.db").string());
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(*staged, "not a bbolt file");
  EXPECT_TRUE(fs::exists(dir_ / "restore/etcd/member/wal/0.wal"));
  EXPECT_FALSE(fs::exists(dir_ / "restore/etcd/member/snap/db"));
  ASSERT_TRUE(disk_.InstallStaged().ok());
  disk_.ClearStaging();
  EXPECT_FALSE(fs::exists(dir_ / "restore/snapshot.db"));
  EXPECT_TRUE(fs::exists(dir_ / "etcd/member/wal/0.wal"));
}

// A restore only the in-place edit can make (a bump without etcdutl: no tool is named) fails
// on a DB the edit refuses, instead of running a tool that would restore it without the bump.
TEST_F(FsNodeDiskTest, WithNoToolARefusedDbFailsTheRestoreAndNoToolRuns) {
  StageFile("not a bbolt file");
  SnapshotRestore r;
  r.tool = "";
  r.name = "n1";
  r.token = "t";
  r.peer_url = "http://127.0.0.1:2380";
  r.initial_cluster = {{"n1", "http://127.0.0.1:2380"}};
  r.bump_revision = 1000;
  EXPECT_TRUE(absl::IsDataLoss(disk_.CheckStagedInPlace(r)));
  absl::Status s = disk_.RestoreStaged(r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("etcd.etcdutl"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(dir_ / "restore/snapshot.db"));
  EXPECT_FALSE(fs::exists(dir_ / "restore/etcd/member/wal"));
  auto staged = ReadFile((dir_ / "restore/etcd/member/snap/db").string());
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(*staged, "not a bbolt file");
  // And with nothing staged the check says so.
  disk_.ClearStaging();
  EXPECT_TRUE(absl::IsFailedPrecondition(disk_.CheckStagedInPlace(r)));
}

TEST_F(FsNodeDiskTest, WithoutInPlaceRestoresTheToolRunsAndItsFailureIsReported) {
  StageFile("staged");
  SnapshotRestore r;
  r.tool = FakeTool(5).string();
  r.name = "n1";
  r.in_place = false;
  absl::Status s = disk_.RestoreStaged(r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("snapshot restore failed"), std::string::npos) << s;
  // Nothing is staged any more: a retry stages afresh.
  EXPECT_FALSE(disk_.RestoreStaged(r).ok());
}

}  // namespace
}  // namespace steward
