// A slow disk (etcd/disk_latency.h, reconcile/leader_move.h): real agents and real etcd on
// 127.0.114.x. The etcd leader's data dir is an ext4 file system on a loop device, and its etcd
// is put in a cgroup v1 blkio group that lets it write 60 times a second to that device. Its
// agent names the disk as slow on /metrics and in `stewardctl status`, and the steward leader
// moves etcd leadership to a member with a fast disk. Root only (loop devices, cgroups).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

enum Subnet { kSlowLeader = 114 };

constexpr char kTimers[] =
    "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n  idle_interval: 1s\n";

// An ext4 file system on a loop device mounted on `dir`, and a blkio cgroup that throttles
// writes to it; both undone by the destructor, whatever the test did.
class ThrottledDisk {
 public:
  ThrottledDisk(const std::string& image, const std::string& dir, const std::string& cgroup)
      : dir_(dir), cgroup_(cgroup) {
    std::filesystem::create_directories(dir);
    auto mk =
        RunCommand({"/bin/sh", "-c",
                    absl::StrCat("truncate -s 256M ", image, " && mkfs.ext4 -q -F ", image,
                                 " && mount -o loop ", image, " ", dir, " && chmod 700 ", dir)},
                   60s);
    if (mk.exit_code != 0) {
      error_ = mk.output;
      return;
    }
    mounted_ = true;
    auto dev = RunCommand({"/bin/sh", "-c", "findmnt -n -o MAJ:MIN --target " + dir}, 10s);
    device_ = std::string(absl::StripAsciiWhitespace(dev.output));
    std::error_code ec;
    if (!std::filesystem::create_directory(cgroup_, ec) && ec) {
      error_ = "cannot make the blkio cgroup " + cgroup_ + ": " + ec.message();
    }
  }
  ~ThrottledDisk() {
    // Every task back to the root group, then the group goes.
    std::ifstream procs(cgroup_ + "/cgroup.procs");
    std::string pid;
    while (std::getline(procs, pid)) {
      std::ofstream("/sys/fs/cgroup/blkio/cgroup.procs") << pid << "\n";
    }
    ::rmdir(cgroup_.c_str());
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  // Moves `pid` into the group and limits its writes to the device to `iops` a second.
  bool Throttle(pid_t pid, int iops) {
    std::ofstream(cgroup_ + "/blkio.throttle.write_iops_device") << device_ << " " << iops << "\n";
    std::ofstream procs(cgroup_ + "/cgroup.procs");
    procs << pid << "\n";
    return procs.good();
  }

 private:
  std::string dir_, cgroup_, device_, error_;
  bool mounted_ = false;
};

TEST(SlowDiskTest, ASlowLeaderDiskIsNamedAndLeadershipMovesOffIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "a loop device and a blkio cgroup need root";
  if (!std::filesystem::exists("/sys/fs/cgroup/blkio/cgroup.procs")) {
    GTEST_SKIP() << "no cgroup v1 blkio hierarchy here";
  }
  TestCluster c(kSlowLeader, 3, 3, kTimers);
  const int victim = 0;
  ThrottledDisk disk(c.Root() + "/n1.img", c.DataDir(victim),
                     absl::StrCat("/sys/fs/cgroup/blkio/steward-it-", ::getpid()));
  if (!disk.error().empty()) GTEST_SKIP() << "cannot throttle a loop device here: " << disk.error();
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  // check-disk refuses where this node's etcd serves, and measures with --force.
  RunResult refused = c.Ctl({"check-disk"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("refusing: etcd on n1 serves"), std::string::npos)
      << refused.output;
  RunResult forced = c.Ctl({"check-disk", "--force", "--size-mib", "2"});
  EXPECT_NE(forced.output.find("each followed by fdatasync: p50"), std::string::npos)
      << forced.output;
  if (EtcdLeader(c) != victim) {
    RunResult moved = c.Ctl({"move-leader", "n1"});
    ASSERT_EQ(moved.exit_code, 0) << moved.output;
  }
  ASSERT_TRUE(WaitFor([&] { return EtcdLeader(c) == victim; }, 20s));
  // A writer, so that every member fsyncs its WAL several times a second.
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    EtcdClient w = c.Client(c.ClientUrls());
    for (int i = 0; writing.load(); ++i) {
      (void)w.Put(absl::StrCat("/slow/k", i % 50), absl::StrCat("v", i));
      std::this_thread::sleep_for(50ms);
    }
  });
  struct Join {
    std::atomic<bool>& writing;
    std::thread& t;
    ~Join() {
      writing = false;
      if (t.joinable()) t.join();
    }
  } join{writing, writer};
  const auto pid = c.EtcdPid(victim);
  ASSERT_TRUE(pid.has_value());
  ASSERT_TRUE(disk.Throttle(*pid, 60));
  const auto slowed = std::chrono::steady_clock::now();
  RunResult metrics;
  EXPECT_TRUE(WaitFor(
      [&] {
        metrics = c.AdminGet(victim, "/metrics");
        return metrics.output.find("\nsteward_etcd_disk_slow 1\n") != std::string::npos;
      },
      60s))
      << metrics.output.substr(0, 3000) << c.Logs();
  std::cerr << "named slow "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - slowed)
                   .count()
            << " ms after the throttle\n";
  EXPECT_NE(metrics.output.find("steward_etcd_disk_p99_seconds{op=\"wal_fsync\"}"),
            std::string::npos);
  RunResult status;
  EXPECT_TRUE(WaitFor(
      [&] {
        status = c.Ctl({"status"});
        return status.output.find("n1: slow disk: WAL fsync p99") != std::string::npos;
      },
      30s))
      << status.output << c.Logs();
  // Slow for a minute without a break: leadership goes to a member with a fast disk.
  EXPECT_TRUE(WaitFor([&] { return EtcdLeader(c) >= 0 && EtcdLeader(c) != victim; }, 150s))
      << c.Ctl({"status"}).output << c.Logs();
  std::cerr << "leadership moved "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - slowed)
                   .count()
            << " ms after the throttle\n";
  // Recorded once etcd's MoveLeader returned.
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto actions = HistoryActions(c);
        return std::find(actions.begin(), actions.end(), "move-leader") != actions.end();
      },
      20s))
      << c.Ctl({"history"}).output;
  // It does not move back while n1 stays slow.
  std::this_thread::sleep_for(20s);
  EXPECT_NE(EtcdLeader(c), victim);
}

}  // namespace
}  // namespace steward::testing
