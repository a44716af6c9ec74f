// Rolling upgrades with real etcd: three members on Debian's 3.4.23 go to 3.5.16 (trixie's,
// fetched by scripts/install-deps.sh) one at a time, followers first, while a writer runs;
// no acknowledged write is lost and every member ends on 3.5.16. Real agents on 127.0.89.x.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "etcd/version.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet {
  kRoll = 89,
  kJump = 90,
  kBroken = 92,
  kRejoin = 245,
  kStartsNot = 247,
  kRefused = 248,
  kPatch = 119,
};

// Adds etcd.versions to every node's config.
void AddVersions(const TestCluster& c, int nodes, const std::string& versions_yaml) {
  for (int i = 0; i < nodes; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text = absl::StrReplaceAll(
        text, {{"  restart_backoff_max: 2s\n", "  restart_backoff_max: 2s\n" + versions_yaml}});
    std::ofstream(c.ConfigPath(i)) << text;
  }
}

std::string VersionOf(const std::string& binary) { return EtcdVersionOf(binary); }

std::vector<std::string> Versions(const TestCluster& c) {
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    auto st = c.Client(c.ClientUrl(i)).Status(c.ClientUrl(i), 2000ms);
    out.push_back(st.ok() ? st->version : "?");
  }
  return out;
}

// Three agents listing Debian's etcd 3.4 (`v34`, also etcd.binary) and 3.5 (`v35`) in
// etcd.versions, started; true once the three are healthy voters.
bool StartWith34And35(TestCluster& c, const std::string& v34, const std::string& v35) {
  c.UseEtcd(kDebianEtcd);
  AddVersions(
      c, 3,
      absl::StrCat("  versions:\n    ", v34, ": /usr/bin/etcd\n    ", v35, ": ", ETCD35_BIN, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  return c.WaitVoters({"n1", "n2", "n3"}, 90s);
}

TEST(UpgradeTest, ARollFrom34To35KeepsEveryAcknowledgedWrite) {
  const std::string v34 = VersionOf("/usr/bin/etcd"), v35 = VersionOf(ETCD35_BIN);
  // scripts/install-deps.sh --test (the README's test command) fetches it.
  ASSERT_FALSE(v35.empty()) << "no etcd 3.5 at " << ETCD35_BIN;
  TestCluster c(kRoll, 3, 3, kFastLeader, kFileBackup);
  ASSERT_TRUE(StartWith34And35(c, v34, v35)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v34, v34, v34}));

  SequentialWriter writer(c);
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", v35});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const bool done = WaitFor(
      [&] {
        return Versions(c) == std::vector<std::string>{v35, v35, v35};
      },
      180s);
  std::this_thread::sleep_for(1s);
  writer.Stop();
  ASSERT_TRUE(done) << "versions: " << Versions(c)[0] << " " << Versions(c)[1] << " "
                    << Versions(c)[2] << "\n"
                    << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_GT(writer.acked.load(), 50);
  EXPECT_EQ(writer.Missing(c), 0) << "of " << writer.acked << " acknowledged writes";
  std::cerr << "writes: " << writer.acked << " acknowledged, " << writer.failed
            << " failed during the roll\n";
  // The agents remember the version: a restarted agent keeps running 3.5.16.
  c.SignalAgent(0, SIGTERM);
  c.StartAgent(0);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Versions(c)[0], v35);
  // The leader backed the cluster up before the first switch.
  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find(v34), std::string::npos) << list.output;
}

// A patch roll, as users do it: a cluster on the 3.5.16 the tests fetch (etcd #19557's range) to
// Debian's newest 3.5 (sid's 3.5.30), with a writer: every member switches, no write fails.
TEST(UpgradeTest, APatchRollFrom3516ToDebiansNewest35FailsNoWrite) {
  const std::string v35 = VersionOf(ETCD35_BIN), vnew = VersionOf(ETCD35NEW_BIN);
  ASSERT_FALSE(v35.empty() || vnew.empty()) << "etcd 3.5 is missing (.deps/, install-deps)";
  ASSERT_TRUE(SameMinor(v35, vnew) && v35 != vnew) << v35 << " -> " << vnew << ": not a patch roll";
  TestCluster c(kPatch, 3, 3, kFastLeader, kFileBackup);
  c.UseEtcd(ETCD35_BIN);
  AddVersions(c, 3,
              absl::StrCat("  versions:\n    ", v35, ": ", ETCD35_BIN, "\n    ", vnew, ": ",
                           ETCD35NEW_BIN, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  ASSERT_EQ(Versions(c), (std::vector<std::string>{v35, v35, v35}));
  SequentialWriter writer(c);
  std::this_thread::sleep_for(1s);
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", vnew});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const bool done = WaitFor(
      [&] {
        return Versions(c) == std::vector<std::string>{vnew, vnew, vnew};
      },
      180s);
  std::this_thread::sleep_for(1s);
  writer.Stop();
  ASSERT_TRUE(done) << Versions(c)[0] << " " << Versions(c)[1] << " " << Versions(c)[2] << "\n"
                    << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_GT(writer.acked.load(), 50);
  EXPECT_EQ(writer.failed.load(), 0) << "writes failed during the patch roll";
  EXPECT_EQ(writer.Missing(c), 0);
  std::cerr << "patch roll " << v35 << " -> " << vnew << ": " << writer.acked
            << " writes acknowledged, " << writer.failed << " failed\n";
  RunResult status = c.Ctl({"status"});
  EXPECT_EQ(status.output.find("ADVISORY"), std::string::npos)
      << "the newest 3.5 has no advisory:\n"
      << status.output;
}

// 3.3 -> 3.5 is asked for in one go: the leader goes through 3.4 (every member reaches 3.4
// before any goes to 3.5), and the cluster keeps its data.
TEST(UpgradeTest, AJumpFrom33To35GoesThrough34) {
  const std::string v33 = VersionOf(ETCD33_BIN), v34 = VersionOf("/usr/bin/etcd"),
                    v35 = VersionOf(ETCD35_BIN);
  ASSERT_FALSE(v33.empty() || v35.empty())
      << "etcd 3.3 or 3.5 is missing (.deps/, install-deps --test)";
  TestCluster c(kJump, 3, 3, kFastLeader);
  AddVersions(c, 3,
              absl::StrCat("  versions:\n    ", v33, ": ", ETCD33_BIN, "\n    ", v34,
                           ": /usr/bin/etcd\n    ", v35, ": ", ETCD35_BIN, "\n"));
  c.UseEtcd(ETCD33_BIN);  // the cluster starts on 3.3
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 90s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v33, v33, v33}));
  Put(c, "/jump/k", "v");
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", v35});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Seen along the way: never a 3.5 member beside a 3.3 one.
  bool mixed_33_35 = false;
  const bool done = WaitFor(
      [&] {
        auto v = Versions(c);
        const bool has33 = std::count(v.begin(), v.end(), v33) > 0;
        const bool has35 = std::count(v.begin(), v.end(), v35) > 0;
        mixed_33_35 |= has33 && has35;
        return v == std::vector<std::string>{v35, v35, v35};
      },
      240s);
  ASSERT_TRUE(done) << c.Logs();
  EXPECT_FALSE(mixed_33_35) << "a member went to 3.5 while another was still on 3.3";
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  auto got = c.Client(c.ClientUrls()).Get("/jump/k");
  ASSERT_TRUE(got.ok() && got->has_value()) << "the data survived both rounds";
}

// Writes an executable script at `path`.
void Script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all);
}

// How many times etcd was launched: the runner's banner before each start in etcd's log (the
// same for every etcd version and logger).
size_t Launches(const std::string& log_path) {
  std::ifstream log(log_path);
  std::string all((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  size_t n = 0;
  const std::string mark = "=== steward: starting ";
  for (size_t at = all.find(mark); at != std::string::npos; at = all.find(mark, at + 1)) ++n;
  return n;
}

// The events of `stewardctl history -o json`.
std::vector<nlohmann::json> History(const TestCluster& c) {
  RunResult r = c.Ctl({"history", "-o", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  std::vector<nlohmann::json> out;
  if (j.is_array()) out.assign(j.begin(), j.end());
  return out;
}

// A version mapped to something that is not etcd is refused before any member switches: the
// leader waits, naming the node and what the binary said; every member stays on 3.4 and
// healthy. (Before issue 32 the first member was switched and left down.)
TEST(UpgradeTest, AVersionMappedToSomethingThatIsNotEtcdIsRefusedBeforeAnySwitch) {
  const std::string v34 = VersionOf("/usr/bin/etcd");
  TestCluster c(kBroken, 3, 3, kFastLeader);
  c.UseEtcd(kDebianEtcd);
  const std::string broken = c.Root() + "/etcd-broken";
  Script(broken, "echo 'this etcd does not start' >&2\nexit 1\n");
  AddVersions(
      c, 3, absl::StrCat("  versions:\n    ", v34, ": /usr/bin/etcd\n    3.5.99: ", broken, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", "3.5.99"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RunResult got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = c.Ctl({"get"});
        return got.output.find("rolling upgrade to etcd 3.5.99 waits: on node n") !=
               std::string::npos;
      },
      30s))
      << got.output << c.Logs();
  EXPECT_NE(got.output.find("this etcd does not start"), std::string::npos) << got.output;
  EXPECT_NE(got.output.find("desired etcd:   3.5.99"), std::string::npos) << got.output;
  std::this_thread::sleep_for(5s);
  EXPECT_EQ(c.HealthyVoters().size(), 3u) << "no member was switched";
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v34, v34, v34}));
}

// A binary that answers --version as etcd but does not start stops the roll at the first
// member; the leader says so, with etcd's last words and the way back, and going back heals
// it.
TEST(UpgradeTest, ABinaryThatDoesNotStartStopsTheRollWithTheWayBack) {
  const std::string v34 = VersionOf("/usr/bin/etcd");
  TestCluster c(kStartsNot, 3, 3, kFastLeader);
  c.UseEtcd(kDebianEtcd);
  const std::string bad = c.Root() + "/etcd-3.5.99";
  Script(bad,
         "if [ \"$1\" = --version ]; then echo 'etcd Version: 3.5.99'; exit 0; fi\n"
         "echo 'panic: this build cannot start' >&2\nexit 3\n");
  AddVersions(c, 3,
              absl::StrCat("  versions:\n    ", v34, ": /usr/bin/etcd\n    3.5.99: ", bad, "\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", "3.5.99"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(WaitFor([&] { return c.HealthyVoters().size() == 2; }, 60s)) << c.Logs();
  RunResult got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = c.Ctl({"get"});
        return got.output.find("rolling upgrade to etcd 3.5.99 stopped: n") != std::string::npos;
      },
      60s))
      << got.output << c.Logs();
  EXPECT_NE(got.output.find("panic: this build cannot start"), std::string::npos) << got.output;
  EXPECT_NE(got.output.find(absl::StrCat("configure-cluster --etcd-version ", v34)),
            std::string::npos)
      << got.output;
  EXPECT_EQ(c.HealthyVoters().size(), 2u) << "the roll went no further";
  r = c.Ctl({"configure-cluster", "--etcd-version", v34});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v34, v34, v34}));
}

// Issue 32: after a roll from 3.4 to 3.5, a node that comes back with an empty disk rejoins on
// 3.5 although its etcd.binary still names 3.4 (which etcd would refuse: "incompatible with
// current running cluster"), and keeps running 3.5 when its agent restarts.
TEST(UpgradeTest, AfterARollAWipedNodeRejoinsOnTheClustersVersion) {
  const std::string v34 = VersionOf("/usr/bin/etcd"), v35 = VersionOf(ETCD35_BIN);
  ASSERT_FALSE(v35.empty()) << "no etcd 3.5 at " << ETCD35_BIN;
  TestCluster c(kRejoin, 3, 3, kFastLeader, kFileBackup);
  ASSERT_TRUE(StartWith34And35(c, v34, v35)) << c.Logs();
  RunResult r = c.Ctl({"configure-cluster", "--etcd-version", v35});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(WaitFor(
      [&] {
        return Versions(c) == std::vector<std::string>{v35, v35, v35};
      },
      180s))
      << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/rejoin/k", "v");
  // The node dies with its disk and comes back empty.
  c.SignalAgent(1, SIGTERM);
  fs::remove_all(c.DataDir(1));
  c.StartAgent(1);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Versions(c), (std::vector<std::string>{v35, v35, v35}));
  auto got = Get(c, 1, "/rejoin/k");
  EXPECT_EQ(got.value_or("?"), "v");
  // One launch, not hundreds.
  EXPECT_LE(Launches(c.DataDir(1) + "/etcd.log"), 2u);
  // History: the join is recorded once it joined, on 3.5; never "ok" before it joined.
  bool joined = false;
  WaitFor(
      [&] {
        for (const auto& e : History(c)) {
          if (e.value("action", "") != "join") continue;
          EXPECT_NE(e.value("result", ""), "ok") << e.dump();
          joined = joined || e.value("result", "").rfind("joined", 0) == 0;
        }
        return joined;
      },
      20s);
  EXPECT_TRUE(joined);
  // Its agent restarted keeps running 3.5.
  c.SignalAgent(1, SIGTERM);
  c.StartAgent(1);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Versions(c)[1], v35);
}

// A join etcd refuses (here its peer port is taken) is recorded once in the history, as
// failed, with etcd's own reason; the node backs off rather than launch etcd several times a
// second, status says why, and once the port is free the node joins.
TEST(UpgradeTest, ARefusedJoinIsRecordedOnceWithEtcdsReasonAndBacksOff) {
  TestCluster c(kRefused, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  c.SignalAgent(2, SIGTERM);
  fs::remove_all(c.DataDir(2));
  // Someone else holds n3's peer port.
  // CLOEXEC: the agent started below must not inherit it (it would hold the port for good).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(2380);
  ::inet_pton(AF_INET, c.Host(2).c_str(), &addr.sin_addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << c.Host(2);
  ASSERT_EQ(::listen(fd, 4), 0);
  c.StartAgent(2);
  RunResult got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = c.Ctl({"get"});
        return got.output.find("etcd refused its join") != std::string::npos;
      },
      60s))
      << got.output << c.Logs();
  EXPECT_NE(got.output.find("address already in use"), std::string::npos) << got.output;
  std::this_thread::sleep_for(20s);
  size_t node_failures = 0;
  for (const auto& e : History(c)) {
    if (e.value("action", "") != "join") continue;
    EXPECT_NE(e.value("result", ""), "ok") << e.dump();
    const std::string result = e.value("result", "");
    if (e.value("node", "") == "n3" && result.find("failed") == 0) {
      ++node_failures;
      EXPECT_NE(result.find("address already in use"), std::string::npos) << e.dump();
    }
  }
  EXPECT_EQ(node_failures, 1u) << "recorded once";
  const size_t launches = Launches(c.DataDir(2) + "/etcd.log");
  EXPECT_GE(launches, 1u);
  EXPECT_LE(launches, 8u) << "backed off: not several launches a second";
  ::close(fd);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 150s)) << c.Logs();
}

}  // namespace
}  // namespace steward::testing
