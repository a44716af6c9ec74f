// Rolling upgrades with real etcd: three members on Debian's 3.4.23 go to 3.5.16 (trixie's,
// fetched by scripts/install-deps.sh) one at a time, followers first, while a writer runs;
// no acknowledged write is lost and every member ends on 3.5.16. Real agents on 127.0.89.x.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
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

enum Subnet { kRoll = 89, kJump = 90, kBroken = 92 };

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

// "3.5.16" from `binary --version` ("etcd Version: 3.5.16"), "" if it does not run.
std::string VersionOf(const std::string& binary) {
  RunResult r = RunCommand({binary, "--version"}, 10s);
  const std::string tag = "etcd Version: ";
  const size_t at = r.output.find(tag);
  if (r.exit_code != 0 || at == std::string::npos) return "";
  const size_t from = at + tag.size();
  return r.output.substr(from, r.output.find('\n', from) - from);
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
  const std::string v34 = VersionOf("/usr/bin/etcd"), v35 = VersionOf(ETCD35_BIN);
  // scripts/install-deps.sh --test (the README's test command) fetches it.
  ASSERT_FALSE(v35.empty()) << "no etcd 3.5 at " << ETCD35_BIN;
  TestCluster c(kRoll, 3, 3, kFastLeader, kFileBackup);
  AddVersions(c, 3, absl::StrCat("  versions:\n    ", v34, ": /usr/bin/etcd\n    ", v35, ": ",
                                 ETCD35_BIN, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v34, v34, v34}));

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
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", v35});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const bool done = WaitFor([&] {
    return Versions(c) == std::vector<std::string>{v35, v35, v35};
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
  EXPECT_EQ(Versions(c)[0], v35);
  // The leader backed the cluster up before the first switch.
  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find(v34), std::string::npos) << list.output;
}

// 3.3 -> 3.5 is asked for in one go: the leader goes through 3.4 (every member reaches 3.4
// before any goes to 3.5), and the cluster keeps its data.
TEST(UpgradeTest, AJumpFrom33To35GoesThrough34) {
  const std::string v33 = VersionOf(ETCD33_BIN), v34 = VersionOf("/usr/bin/etcd"),
                    v35 = VersionOf(ETCD35_BIN);
  ASSERT_FALSE(v33.empty() || v35.empty()) << "etcd 3.3 or 3.5 is missing (.deps/, install-deps --test)";
  TestCluster c(kJump, 3, 3, kFastLeader);
  AddVersions(c, 3, absl::StrCat("  versions:\n    ", v33, ": ", ETCD33_BIN, "\n    ", v34,
                                 ": /usr/bin/etcd\n    ", v35, ": ", ETCD35_BIN, "\n"));
  // The cluster starts on 3.3: etcd.binary is the 3.3 one.
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::ofstream(c.ConfigPath(i)) << absl::StrReplaceAll(
        text, {{"  binary: /usr/bin/etcd\n", absl::StrCat("  binary: ", ETCD33_BIN, "\n")}});
  }
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 90s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v33, v33, v33}));
  Put(c, "/jump/k", "v");
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", v35});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Seen along the way: never a 3.5 member beside a 3.3 one.
  bool mixed_33_35 = false;
  const bool done = WaitFor([&] {
    auto v = Versions(c);
    const bool has33 = std::count(v.begin(), v.end(), v33) > 0;
    const bool has35 = std::count(v.begin(), v.end(), v35) > 0;
    mixed_33_35 |= has33 && has35;
    return v == std::vector<std::string>{v35, v35, v35};
  }, 240s);
  ASSERT_TRUE(done) << c.Logs();
  EXPECT_FALSE(mixed_33_35) << "a member went to 3.5 while another was still on 3.3";
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  auto got = c.Client(c.ClientUrls()).Get("/jump/k");
  ASSERT_TRUE(got.ok() && got->has_value()) << "the data survived both rounds";
}

// A member whose new binary does not start stops the roll: the others stay on the old version
// and healthy, and the status says which member waits. Asking for the old version again
// brings it back.
TEST(UpgradeTest, AMemberThatFailsOnTheNewVersionStopsTheRoll) {
  const std::string v34 = VersionOf("/usr/bin/etcd");
  TestCluster c(kBroken, 3, 3, kFastLeader);
  const std::string broken = c.Root() + "/etcd-broken";
  std::ofstream(broken) << "#!/bin/sh\necho 'this etcd does not start' >&2\nexit 1\n";
  fs::permissions(broken, fs::perms::owner_all);
  AddVersions(c, 3, absl::StrCat("  versions:\n    ", v34, ": /usr/bin/etcd\n    3.5.99: ",
                                 broken, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", "3.5.99"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // One member is switched and does not come back; the roll goes no further.
  ASSERT_TRUE(WaitFor([&] { return c.HealthyVoters().size() == 2; }, 60s)) << c.Logs();
  std::this_thread::sleep_for(10s);
  EXPECT_EQ(c.HealthyVoters().size(), 2u) << "the roll stopped at the failed member";
  const auto v = Versions(c);
  EXPECT_EQ(std::count(v.begin(), v.end(), v34), 2) << "the others stay on " << v34;
  RunResult status = c.Ctl({"get"});
  EXPECT_NE(status.output.find("unhealthy"), std::string::npos) << status.output;
  // The operator goes back: the failed member returns to the version the others run.
  r = c.Ctl({"configure-cluster", "--etcd-version", v34});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v34, v34, v34}));
}

}  // namespace
}  // namespace steward::testing
