// stewardctl recover-quorum (issue 15): a majority lost for good, rebuilt from the survivor.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kRecover = 54 };

// Two of three members are lost with their disks after the last backup. The survivor holds
// writes the backup does not: recover-quorum brings back every one of them, on 3 voters.
TEST(RecoverQuorumTest, TheSurvivorsWritesAfterTheLastBackupAllComeBack) {
  TestCluster c(kRecover, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  for (int i = 0; i < 20; ++i) Put(c, absl::StrCat("/rq/before", i), absl::StrCat("b", i));
  ASSERT_FALSE(TakeBackup(c).empty());
  for (int i = 0; i < 20; ++i) Put(c, absl::StrCat("/rq/after", i), absl::StrCat("a", i));

  // While a quorum answers, it refuses and changes nothing.
  RunResult refused = c.Ctl({"recover-quorum", "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("a quorum"), std::string::npos) << refused.output;
  EXPECT_EQ(Get(c, 0, "/rq/after19"), "a19");

  // n2 and n3 die with their disks; their replacements start empty and wait: with one member
  // of three, nobody may change the membership, and n1's data rules out an automatic restore.
  for (int i : {1, 2}) {
    c.SignalAgent(i, SIGKILL);
    c.KillEtcd(i);
    fs::remove_all(c.DataDir(i) + "/etcd");
  }
  for (int i : {1, 2}) c.StartAgent(i);
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(c.HealthyVoters().empty());

  RunResult recovered =
      c.Ctl({"recover-quorum", "--yes", "--wait", "150"}, /*with_config=*/true, 200s);
  ASSERT_EQ(recovered.exit_code, 0) << recovered.output << c.Logs();
  EXPECT_NE(recovered.output.find("<- recover from this one"), std::string::npos)
      << recovered.output;
  EXPECT_NE(recovered.output.find("recovered cluster"), std::string::npos) << recovered.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  for (int node = 0; node < 3; ++node) {
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(Get(c, node, absl::StrCat("/rq/before", i)), absl::StrCat("b", i)) << node;
      EXPECT_EQ(Get(c, node, absl::StrCat("/rq/after", i)), absl::StrCat("a", i)) << node;
    }
  }
}

}  // namespace
}  // namespace steward::testing
