// Rolling upgrades with real etcd: three members on Debian's 3.4.23 go to 3.5.16 (trixie's,
// fetched by scripts/install-deps.sh) one at a time, followers first, while a writer runs;
// no acknowledged write is lost and every member ends on 3.5.16. Real agents on 127.0.89.x.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kRoll = 89 };

// Adds etcd.versions to every node's config.
void AddVersions(const TestCluster& c, int nodes, const std::string& versions_yaml) {
  for (int i = 0; i < nodes; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text = absl::StrReplaceAll(text, {{"  restart_backoff_max: 2s\n",
                                       "  restart_backoff_max: 2s\n" + versions_yaml}});
    std::ofstream(c.ConfigPath(i)) << text;
  }
}

std::vector<std::string> Versions(const TestCluster& c) {
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    auto st = c.Client(c.ClientUrl(i)).Status(c.ClientUrl(i), 2000ms);
    out.push_back(st.ok() ? st->version : "?");
  }
  return out;
}

TEST(UpgradeTest, ARollFrom34To35KeepsEveryAcknowledgedWrite) {
  if (!fs::exists(ETCD35_BIN)) GTEST_SKIP() << "no etcd 3.5 at " << ETCD35_BIN;
  TestCluster c(kRoll, 3, 3, kFastLeader, kFileBackup);
  AddVersions(c, 3, absl::StrCat("  versions:\n    3.4.23: /usr/bin/etcd\n    3.5.16: ",
                                 ETCD35_BIN, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{"3.4.23", "3.4.23", "3.4.23"}));

  // A writer: sequential keys, each one acknowledged or not.
  std::atomic<bool> stop{false};
  std::atomic<int> acked{0}, failed{0};
  std::set<int> ledger;
  std::mutex mu;
  std::thread writer([&] {
    EtcdClient client = c.Client(c.ClientUrls());
    for (int k = 1; !stop && k < 100000; ++k) {
      if (client.Put(absl::StrCat("/roll/", k), "v").ok()) {
        std::lock_guard<std::mutex> lock(mu);
        ledger.insert(k);
        ++acked;
      } else {
        ++failed;
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", "3.5.16"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const bool done = WaitFor([&] {
    return Versions(c) == std::vector<std::string>{"3.5.16", "3.5.16", "3.5.16"};
  }, 180s);
  std::this_thread::sleep_for(1s);
  stop = true;
  writer.join();
  ASSERT_TRUE(done) << "versions: " << Versions(c)[0] << " " << Versions(c)[1] << " "
                    << Versions(c)[2] << "\n" << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_GT(acked.load(), 50);
  // Every acknowledged write is there.
  EtcdClient reader = c.Client(c.ClientUrls());
  int missing = 0;
  for (int k : ledger) {
    auto got = reader.Get(absl::StrCat("/roll/", k));
    if (!got.ok() || !got->has_value()) ++missing;
  }
  EXPECT_EQ(missing, 0) << "of " << ledger.size() << " acknowledged writes";
  std::cerr << "writes: " << acked << " acknowledged, " << failed << " failed during the roll\n";
  // The agents remember the version: a restarted agent keeps running 3.5.16.
  c.SignalAgent(0, SIGTERM);
  c.StartAgent(0);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Versions(c)[0], "3.5.16");
  // The leader backed the cluster up before the first switch.
  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find("3.4.23"), std::string::npos) << list.output;
}

}  // namespace
}  // namespace steward::testing
