// stewardctl destroy / undestroy (issue 15): the cluster is retired with a final backup, and
// nothing brings it back — not a restart, not empty disks — until undestroy, which restores it.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kDestroy = 55 };

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Also: an agent that missed the destroy (stopped during it, --force) stops its etcd when it
// comes back; the data stays in place and restarted agents keep etcd stopped on it.
TEST(DestroyTest, NothingComesBackUntilUndestroyWhichRestoresTheFinalState) {
  TestCluster c(kDestroy, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  ASSERT_FALSE(TakeBackup(c).empty());
  // Written after the last backup: only the final backup holds these.
  for (int i = 0; i < 20; ++i) Put(c, absl::StrCat("/ds/k", i), absl::StrCat("v", i));

  // With an agent silent, destroy refuses (X6) and changes nothing.
  c.SignalAgent(2, SIGSTOP);
  RunResult refused = c.Ctl({"destroy", "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("X6"), std::string::npos) << refused.output;
  EXPECT_EQ(Get(c, 0, "/ds/k19"), "v19");

  // --force: n1 and n2 stop; n3's agent missed the order and its etcd runs on.
  RunResult destroyed = c.Ctl({"destroy", "--yes", "--force", "--reason", "retired by the test"});
  EXPECT_EQ(destroyed.exit_code, 1) << destroyed.output;  // one node did not stop
  EXPECT_NE(destroyed.output.find("final backup:"), std::string::npos) << destroyed.output;
  EXPECT_NE(destroyed.output.find("Run destroy again"), std::string::npos) << destroyed.output;
  const std::string mark = ReadAll(c.Root() + "/backups/it55/control/destroyed.json");
  EXPECT_NE(mark.find("retired by the test"), std::string::npos) << mark;
  for (int i : {0, 1}) {
    EXPECT_TRUE(WaitFor([&] { return c.EtcdProcessCount(i) == 0; }, 15s)) << i << c.Logs();
  }
  EXPECT_EQ(c.EtcdProcessCount(2), 1);
  // Its agent comes back: it finds the mark and stops the etcd it would have adopted.
  c.SignalAgent(2, SIGKILL);
  c.StartAgent(2);
  EXPECT_TRUE(WaitFor([&] { return c.EtcdProcessCount(2) == 0; }, 20s)) << c.Logs();
  // Run again: already destroyed, every agent confirms.
  RunResult again = c.Ctl({"destroy", "--yes"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("was destroyed"), std::string::npos) << again.output;
  // The data stays in place, and restarted agents keep etcd stopped on it.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(fs::exists(c.DataDir(i) + "/etcd/member/wal")) << i;
    c.SignalAgent(i, SIGKILL);
    c.StartAgent(i);
  }
  std::this_thread::sleep_for(4s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdProcessCount(i), 0) << i << c.Logs();
  // A restore is refused while the cluster is destroyed.
  RunResult restore = c.Ctl({"restore-backup", "--yes", "--force", "x"});
  EXPECT_EQ(restore.exit_code, 1) << restore.output;
  RunResult recover = c.Ctl({"recover-quorum", "--yes"});
  EXPECT_EQ(recover.exit_code, 1) << recover.output;
  EXPECT_NE(recover.output.find("undestroy"), std::string::npos) << recover.output;

  // Undestroyed with the data in place, the members start on it: nothing is lost, not even what
  // came after the final backup. Then destroyed again (every agent answers: no --force).
  RunResult resumed = c.Ctl({"undestroy", "--yes", "--wait", "60"}, true, 90s);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output << c.Logs();
  EXPECT_NE(resumed.output.find("holds its member's data"), std::string::npos) << resumed.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 2, "/ds/k19"), "v19");
  Put(c, "/ds/after-resume", "r");
  RunResult destroyed2 = c.Ctl({"destroy", "--yes"});
  ASSERT_EQ(destroyed2.exit_code, 0) << destroyed2.output << c.Logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitFor([&] { return c.EtcdProcessCount(i) == 0; }, 15s)) << i << c.Logs();
  }

  // Every machine is replaced by an empty one: no agent bootstraps or restores.
  LoseEverything(c, 3);
  for (int i = 0; i < 3; ++i) fs::remove(absl::StrCat(c.Root(), "/agent-n", i + 1, ".log"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (ReadAll(absl::StrCat(c.Root(), "/agent-n", i + 1, ".log")).find("was destroyed") ==
              std::string::npos) {
            return false;
          }
        }
        return true;
      },
      30s))
      << c.Logs();
  std::this_thread::sleep_for(4s);  // several start and restore passes (reconcile 300 ms)
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.EtcdProcessCount(i), 0) << i << c.Logs();
    EXPECT_FALSE(fs::exists(c.DataDir(i) + "/etcd/member")) << i;
  }
  EXPECT_TRUE(c.HealthyVoters().empty());
  RunResult status = c.Ctl({"status"});
  EXPECT_EQ(status.exit_code, 1) << status.output;
  EXPECT_NE(status.output.find("was destroyed by"), std::string::npos) << status.output;

  RunResult undestroyed = c.Ctl({"undestroy", "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(undestroyed.exit_code, 0) << undestroyed.output << c.Logs();
  EXPECT_FALSE(fs::exists(c.Root() + "/backups/it55/control/destroyed.json"));
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  for (int node = 0; node < 3; ++node) {
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(Get(c, node, absl::StrCat("/ds/k", i)), absl::StrCat("v", i)) << node;
    }
    EXPECT_EQ(Get(c, node, "/ds/after-resume"), "r") << node;
  }
}

}  // namespace
}  // namespace steward::testing
