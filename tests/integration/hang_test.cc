// A member that runs but does not answer (node/hang_decision.h): real agents and real etcd on
// 127.0.X.0/24, etcd frozen with SIGSTOP past etcd.hang_restart_after. Its own agent restarts
// it in place: same member, same data, no wipe, no resync, no spare; the leader waits for that
// (HG1). While the quorum is lost nothing is restarted (H3).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

// One subnet per test, used by no other test file (127.0.102-105.x).
enum Subnet { kFollower = 102, kLeader = 103, kQuorum = 104, kFrozen = 105 };

// The watchdog's bound at its minimum (10 s); the leader's replace_after above it, so that
// without HG1 the spare would replace the member before the watchdog acts.
constexpr char kHangEtcd[] = "  stop_timeout: 5s\n  hang_restart_after: 10s\n";
constexpr char kTimers[] =
    "  replace_after: 15s\n  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n"
    "  idle_interval: 1s\n";

void HangAfter(TestCluster& c) { c.ReplaceInConfigs("  stop_timeout: 5s\n", kHangEtcd); }

// Waits (bounded) until node i runs an etcd other than `old`; returns how long that took.
std::optional<std::chrono::milliseconds> WaitNewPid(const TestCluster& c, int i, pid_t old,
                                                    std::chrono::seconds bound) {
  const auto start = std::chrono::steady_clock::now();
  if (!WaitFor(
          [&] {
            auto p = c.EtcdPid(i);
            return p.has_value() && *p != old;
          },
          bound)) {
    return std::nullopt;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(HangTest, AStoppedFollowerIsRestartedInPlaceWithItsDataNotReplaced) {
  TestCluster c(kFollower, 4, 3, kTimers);  // n4 is a ready spare
  HangAfter(c);
  for (int i = 0; i < 4; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  for (int i = 0; i < 50; ++i) Put(c, absl::StrCat("/hang/k", i), absl::StrCat("v", i));
  int victim = 2;
  if (EtcdLeader(c) == victim) victim = 1;
  const std::string name = absl::StrCat("n", victim + 1);
  const uint64_t id = MemberIdOf(c, name);
  ASSERT_NE(id, 0u);
  const auto pid = c.EtcdPid(victim);
  ASSERT_TRUE(pid.has_value());
  ASSERT_EQ(::kill(*pid, SIGSTOP), 0);
  // The bound (10 s) plus the probes' deadlines and the grace: well within 40 s.
  const auto took = WaitNewPid(c, victim, *pid, 40s);
  ::kill(*pid, SIGCONT);  // in case it was not restarted (it is then still ours)
  ASSERT_TRUE(took.has_value()) << "etcd on " << name << " was not restarted\n" << c.Logs();
  EXPECT_GE(*took, 9s) << "restarted before the bound";
  std::cerr << "restarted in place " << took->count() << " ms after SIGSTOP\n";
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(MemberIdOf(c, name), id) << "the same member, not a new one";
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(Get(c, victim, absl::StrCat("/hang/k", i)), absl::StrCat("v", i));
  }
  std::vector<std::string> actions;
  EXPECT_TRUE(WaitFor(
      [&] {
        actions = HistoryActions(c);
        return Has(actions, "hang-restart");
      },
      15s));
  EXPECT_FALSE(Has(actions, "remove-member")) << "the leader replaced the member";
  EXPECT_FALSE(Has(actions, "add-learner"));
  EXPECT_EQ(c.EtcdProcessCount(victim), 1);
}

TEST(HangTest, AStoppedEtcdLeaderIsRestartedAndWritesGoOnThroughTheOthers) {
  TestCluster c(kLeader, 3, 3, kTimers);
  HangAfter(c);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  const int leader = EtcdLeader(c);
  ASSERT_GE(leader, 0);
  const auto pid = c.EtcdPid(leader);
  ASSERT_TRUE(pid.has_value());
  std::vector<std::string> others;
  for (int i = 0; i < 3; ++i) {
    if (i != leader) others.push_back(c.ClientUrl(i));
  }
  EtcdClient w = c.Client(others);
  ASSERT_EQ(::kill(*pid, SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  // The others elect a leader of their own after etcd's election timeout (1 s by default).
  ASSERT_TRUE(WaitFor([&] { return w.Put("/hang/after", "yes").ok(); }, 20s)) << c.Logs();
  const auto resumed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - stopped);
  std::cerr << "writes resumed through the others " << resumed.count() << " ms after SIGSTOP\n";
  EXPECT_LT(resumed, 10s);
  const auto took = WaitNewPid(c, leader, *pid, 40s);
  ::kill(*pid, SIGCONT);
  ASSERT_TRUE(took.has_value()) << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, leader, "/hang/after"), "yes");
}

TEST(HangTest, NothingIsRestartedWhileTheQuorumIsLost) {
  TestCluster c(kQuorum, 3, 3, kTimers);
  HangAfter(c);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  pid_t pids[3];
  for (int i = 0; i < 3; ++i) {
    auto p = c.EtcdPid(i);
    ASSERT_TRUE(p.has_value());
    pids[i] = *p;
  }
  // Two of three members frozen for twice the bound: no member answers a linearizable read,
  // the running one included. That is a lost quorum, not a hung member (H3).
  ::kill(pids[0], SIGSTOP);
  ::kill(pids[1], SIGSTOP);
  std::this_thread::sleep_for(25s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdPid(i), pids[i]) << "n" << i + 1 << " restarted";
  ::kill(pids[0], SIGCONT);
  ::kill(pids[1], SIGCONT);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdPid(i), pids[i]) << "n" << i + 1 << " restarted";
  EXPECT_FALSE(Has(HistoryActions(c), "hang-restart"));
}

// An ext4 file system on a loop device, mounted on `dir` for the test's lifetime; frozen with
// fsfreeze on demand. The destructor thaws it before it unmounts it, whatever the test did.
class LoopDisk {
 public:
  LoopDisk(const std::string& image, const std::string& dir) : dir_(dir) {
    std::filesystem::create_directories(dir);
    auto mk =
        RunCommand({"/bin/sh", "-c",
                    absl::StrCat("truncate -s 256M ", image, " && mkfs.ext4 -q -F ", image,
                                 " && mount -o loop ", image, " ", dir, " && chmod 700 ", dir)},
                   60s);
    error_ = mk.exit_code == 0 ? "" : mk.output;
    mounted_ = error_.empty();
  }
  ~LoopDisk() {
    Thaw();
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  bool Freeze() {
    frozen_ = RunCommand({"/bin/sh", "-c", "fsfreeze -f " + dir_}, 30s).exit_code == 0;
    return frozen_;
  }
  void Thaw() {
    if (frozen_) frozen_ = RunCommand({"/bin/sh", "-c", "fsfreeze -u " + dir_}, 30s).exit_code != 0;
  }

 private:
  std::string dir_, error_;
  bool mounted_ = false, frozen_ = false;
};

// A member's data dir frozen (fsfreeze of its own file system): etcd waits in uninterruptible
// I/O, which no signal ends. Its agent names it (H6), restarts nothing, and once the file
// system thaws the member serves again with every key, the same process.
TEST(HangTest, AFrozenDataDirIsNamedAndTheMemberRecoversAfterTheThaw) {
  if (::geteuid() != 0) GTEST_SKIP() << "a loop-mounted file system needs root";
  TestCluster c(kFrozen, 3, 3, kTimers);
  HangAfter(c);
  const int victim = 2;
  LoopDisk disk(c.Root() + "/n3.img", c.DataDir(victim));
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a loop device here: " << disk.error();
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  for (int i = 0; i < 30; ++i) Put(c, absl::StrCat("/frozen/k", i), absl::StrCat("v", i));
  const auto pid = c.EtcdPid(victim);
  ASSERT_TRUE(pid.has_value());
  ASSERT_TRUE(disk.Freeze());
  const auto frozen_at = std::chrono::steady_clock::now();
  // Writes go on through the others meanwhile.
  for (int i = 30; i < 40; ++i) Put(c, absl::StrCat("/frozen/k", i), absl::StrCat("v", i));
  // Named on the node's /metrics (H6) and in the leader's reason in `stewardctl status`.
  RunResult metrics;
  EXPECT_TRUE(WaitFor(
      [&] {
        metrics = c.AdminGet(victim, "/metrics");
        return metrics.output.find("steward_etcd_hung{rule=\"H6\"} 1") != std::string::npos;
      },
      45s))
      << metrics.output.substr(0, 2000);
  std::cerr << "named H6 "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - frozen_at)
                   .count()
            << " ms after the freeze\n";
  RunResult status;
  EXPECT_TRUE(WaitFor(
      [&] {
        status = c.Ctl({"status"});
        return status.output.find("does not complete writes") != std::string::npos;
      },
      20s))
      << status.output;
  EXPECT_EQ(c.EtcdPid(victim), pid) << "a frozen member was signalled";
  disk.Thaw();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(c.EtcdPid(victim), pid) << "restarted, though nothing was wrong once thawed\n"
                                    << c.Logs();
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(Get(c, victim, absl::StrCat("/frozen/k", i)), absl::StrCat("v", i));
  }
}

}  // namespace
}  // namespace steward::testing
