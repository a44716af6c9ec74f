// "Never make it worse" (issue 9): regression tests that replay, against real agents and etcd
// 3.4, the paths by which etcd-steward itself could destroy data. Each test is named for the
// behaviour it proves; each failed on the code before its fix.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const char kFast[] = "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n";
const char kBackup[] = "backup:\n  store: file://ROOT/backups\n  interval: 1h\n";

enum Subnet { kMinority = 71, kNoStore = 72, kSkew = 73, kLeases = 74, kRoles = 75 };

void Put(const TestCluster& c, const std::string& k, const std::string& v) {
  EtcdClient w = c.Client(c.ClientUrls());
  ASSERT_TRUE(WaitFor([&] { return w.Put(k, v).ok(); }, 15s)) << k;
}

std::optional<std::string> Get(const TestCluster& c, int node, const std::string& k) {
  EtcdClient r = c.Client({c.ClientUrl(node)});
  std::optional<std::string> out;
  WaitFor([&] {
    auto got = r.Get(k);
    if (got.ok()) out = got->value_or("<absent>");
    return got.ok();
  }, 15s);
  return out;
}

std::string TakeBackup(const TestCluster& c) {
  RunResult r = c.Ctl({"backup"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string out(absl::StripTrailingAsciiWhitespace(r.output));
  return out.substr(out.rfind('\n') + 1);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Path 1: with 5 nodes and size 3, n1 and n2 freeze (SIGSTOP: a partition or paused VMs) while
// n3 comes back wiped. n3, n4 and n5 are a majority of the configured nodes and none has
// data, but they are not a majority of the members: they must not restore, and when n1 and n2
// thaw, no write acknowledged after the last backup may be lost.
TEST(SafetyTest, AMinorityOfMembersNeverRestoresOverTheLiveCluster) {
  TestCluster c(kMinority, 5, 3, kFast, kBackup);
  for (int i = 0; i < 5; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  Put(c, "/it/before", "1");
  ASSERT_FALSE(TakeBackup(c).empty());
  Put(c, "/it/after-backup", "acknowledged");

  std::vector<pid_t> frozen;
  for (int i : {0, 1}) {
    c.SignalAgent(i, SIGSTOP);
    if (auto pid = c.EtcdPid(i)) {
      kill(*pid, SIGSTOP);
      frozen.push_back(*pid);
    }
  }
  c.SignalAgent(2, SIGKILL);
  c.KillEtcd(2);
  fs::remove_all(c.DataDir(2));
  c.StartAgent(2);

  // Long enough for the old rule to have restored several times over (it took ~2 s).
  const std::string intent = c.Root() + "/backups/it71/control/restore.json";
  bool restored = WaitFor([&] { return fs::exists(intent); }, 20s);
  EXPECT_FALSE(restored) << "a restore was started by a minority of the members:\n"
                         << ReadText(intent) << c.Logs();
  EXPECT_NE(c.Logs().find("of the last known voting members"), std::string::npos)
      << "the coordinator must say why it waits\n" << c.Logs();

  for (pid_t p : frozen) kill(p, SIGCONT);
  for (int i : {0, 1}) c.SignalAgent(i, SIGCONT);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Get(c, 2, "/it/after-backup"), "acknowledged") << c.Logs();
  EXPECT_FALSE(fs::exists(intent)) << ReadText(intent);
}

// Path 3: after total loss the store is "not mounted" (its root is gone). The agents must not
// create it, must not bootstrap an empty cluster, and must restore once it is back.
TEST(SafetyTest, AMissingStoreRootMeansWaitNeverANewCluster) {
  TestCluster c(kNoStore, 3, 3, kFast, kBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/precious", "data");
  ASSERT_FALSE(TakeBackup(c).empty());
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGKILL);
  for (int i = 0; i < 3; ++i) c.KillEtcd(i);
  for (int i = 0; i < 3; ++i) fs::remove_all(c.DataDir(i));
  const std::string root = c.Root() + "/backups";
  fs::rename(root, c.Root() + "/backups-unmounted");

  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  bool started = WaitFor([&] {
    for (int i = 0; i < 3; ++i) {
      if (c.EtcdPid(i)) return true;
    }
    return false;
  }, 15s);
  EXPECT_FALSE(started) << "an etcd was started while the store was missing\n" << c.Logs();
  EXPECT_FALSE(fs::exists(root)) << "an agent created the missing store root";
  EXPECT_NE(c.Logs().find("does not exist (not mounted?)"), std::string::npos) << c.Logs();

  fs::rename(c.Root() + "/backups-unmounted", root);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/precious"), "data") << c.Logs();
}

}  // namespace
}  // namespace steward::testing
