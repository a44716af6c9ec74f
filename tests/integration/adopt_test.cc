// Adopting a cluster no agent created (issue 12): agents started before that cluster answers
// wait and bootstrap nothing; the test plays the old operator and starts three plain etcd
// processes by hand (TLS from the same CA the agents are given), with data;
// three agents configured with cluster.adopt join them one learner at a time until they are
// three managed voters; `stewardctl retire-unmanaged --yes` then removes the hand-made members
// one at a time, checking quorum after each removal; every key survives and a writer that ran
// throughout lost no acknowledged write. Real etcd and agents on 127.0.95.x.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "harness.h"
#include "pki/pki.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kAdopt = 95, kAdopt35 = 246 };

std::string OldHost(int i, int subnet = kAdopt) {
  return absl::StrCat("127.0.", subnet, ".", 21 + i);
}
std::string OldClientUrl(int i, int subnet = kAdopt) {
  return absl::StrCat("https://", OldHost(i, subnet), ":2379");
}
std::string OldPeerUrl(int i, int subnet = kAdopt) {
  return absl::StrCat("https://", OldHost(i, subnet), ":2380");
}

// Three etcd members started by hand, as an operator without etcd-steward runs them: their own
// names (o1..o3), token and data dirs, TLS certificates from the CA the agents are given later.
// Stopped by PID when the test ends (by then they may have exited on their own: etcd exits
// once it learns it was removed from the cluster).
class HandMadeCluster {
 public:
  explicit HandMadeCluster(const TestCluster& c, int subnet = kAdopt,
                           std::string binary = "/usr/bin/etcd")
      : dir_(c.Root() + "/old"), subnet_(subnet), binary_(std::move(binary)) {}
  void Start(const TestCluster& c) {
    fs::create_directories(dir_);
    std::vector<std::string> initial;
    for (int i = 0; i < 3; ++i) {
      initial.push_back(absl::StrCat("o", i + 1, "=", OldPeerUrl(i, subnet_)));
    }
    for (int i = 0; i < 3; ++i) {
      const std::string name = absl::StrCat("o", i + 1);
      CertRequest req;
      req.common_name = name;
      // etcd checks a peer's certificate against its source address, 127.0.0.1 on loopback.
      req.ip_addresses = {OldHost(i, subnet_), "127.0.0.1"};
      req.server_auth = true;
      req.client_auth = true;  // the same certificate for peer connections both ways
      req.lifetime = std::chrono::hours(24);
      const std::string cert = dir_ + "/" + name + ".crt", key = dir_ + "/" + name + ".key";
      if (absl::Status s = IssueCert(c.CaCert(), c.Root() + "/pki/ca.key", req, cert, key);
          !s.ok()) {
        ADD_FAILURE() << "issuing " << name << "'s certificate: " << s;
      }
      const std::vector<std::string> argv = {binary_,
                                             "--name",
                                             name,
                                             "--data-dir",
                                             dir_ + "/" + name,
                                             "--listen-client-urls",
                                             OldClientUrl(i, subnet_),
                                             "--advertise-client-urls",
                                             OldClientUrl(i, subnet_),
                                             "--listen-peer-urls",
                                             OldPeerUrl(i, subnet_),
                                             "--initial-advertise-peer-urls",
                                             OldPeerUrl(i, subnet_),
                                             "--initial-cluster",
                                             absl::StrJoin(initial, ","),
                                             "--initial-cluster-token",
                                             "hand-made",
                                             "--initial-cluster-state",
                                             "new",
                                             "--cert-file",
                                             cert,
                                             "--key-file",
                                             key,
                                             "--trusted-ca-file",
                                             c.CaCert(),
                                             "--client-cert-auth",
                                             "--peer-cert-file",
                                             cert,
                                             "--peer-key-file",
                                             key,
                                             "--peer-trusted-ca-file",
                                             c.CaCert(),
                                             "--peer-client-cert-auth",
                                             "--heartbeat-interval",
                                             "100",
                                             "--election-timeout",
                                             "1000"};
      pids_.push_back(SpawnTo(argv, dir_ + "/" + name + ".log"));
    }
  }
  ~HandMadeCluster() {
    for (pid_t pid : pids_) {
      if (pid <= 0) continue;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  std::string Logs() const {
    std::string out;
    for (int i = 1; i <= 3; ++i) {
      // Without the handshake noise of clients that gave up (etcd logs each one).
      std::ifstream in(absl::StrCat(dir_, "/o", i, ".log"));
      std::string all, line;
      while (std::getline(in, line)) {
        if (line.find("rejected connection") == std::string::npos) all += line + "\n";
      }
      out += absl::StrCat("---- o", i, " (tail) ----\n",
                          all.size() > 3000 ? all.substr(all.size() - 3000) : all);
    }
    return out;
  }

 private:
  std::string dir_;
  int subnet_;
  std::string binary_;
  std::vector<pid_t> pids_;
};

std::vector<std::string> AllUrls(const TestCluster& c) {
  std::vector<std::string> urls = c.ClientUrls();
  for (int i = 0; i < 3; ++i) urls.push_back(OldClientUrl(i));
  return urls;
}

// Names of the healthy voting members and whether any learner is listed, over every URL.
std::vector<std::string> Voters(const TestCluster& c, bool* learner = nullptr) {
  EtcdClient client = c.Client(AllUrls(c));
  ClusterView v = CollectStatus(client, 3000ms);
  std::vector<std::string> out;
  if (learner != nullptr) *learner = false;
  for (const auto& m : v.members) {
    if (m.member.is_learner && learner != nullptr) *learner = true;
    if (!m.member.is_learner && m.healthy) out.push_back(m.member.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AdoptTest, AgentsAdoptAHandMadeClusterAndRetireItsMembersKeepingEveryKey) {
  const std::string adopt = absl::StrCat("  adopt:\n    endpoints: [", OldClientUrl(0), ", ",
                                         OldClientUrl(1), ", ", OldClientUrl(2), "]\n");
  TestCluster c(kAdopt, 3, 3, adopt + kFastLeader, kFileBackup);
  c.UseEtcd(kDebianEtcd);  // the hand-made cluster's etcd: adoption is about 3.4 here
  // The agents come up first, while the cluster they are to adopt does not answer: none may
  // take that for "no cluster yet" and bootstrap one (AD4).
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  std::this_thread::sleep_for(5s);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(c.EtcdPid(i).has_value()) << "node " << i << " started etcd";
    EXPECT_FALSE(fs::exists(c.DataDir(i) + "/etcd/member")) << "node " << i;
  }
  EXPECT_NE(c.Logs().find("never bootstraps"), std::string::npos) << c.Logs();

  HandMadeCluster old(c);
  old.Start(c);
  const std::vector<std::string> old_urls = {OldClientUrl(0), OldClientUrl(1), OldClientUrl(2)};
  // A fresh client per try: a channel that met a not-yet-serving etcd backs off for long.
  ASSERT_TRUE(WaitFor([&] { return c.Client(old_urls).Put("probe", "x").ok(); }, 30s))
      << old.Logs();
  EtcdClient old_client = c.Client(old_urls);
  // The old operator's data.
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(old_client.Put(absl::StrCat("old/", i), absl::StrCat("v", i)).ok());
  }

  // A writer through every member's URL, old and new, for the whole adoption and retirement.
  std::atomic<bool> stop{false};
  std::map<std::string, std::string> acked;
  int failed = 0;
  std::thread writer([&] {
    EtcdClient w = c.Client(AllUrls(c));
    for (int i = 0; !stop.load(); ++i) {
      const std::string k = absl::StrCat("w/", i), v = absl::StrCat("x", i);
      if (w.Put(k, v).ok()) {
        acked[k] = v;
      } else {
        ++failed;
      }
      std::this_thread::sleep_for(20ms);
    }
  });

  // The agents grow the cluster beside the hand-made members: three managed voters, the old
  // three untouched.
  bool learner = true;
  const bool grown = WaitFor(
      [&] {
        return Voters(c, &learner) ==
                   std::vector<std::string>{"n1", "n2", "n3", "o1", "o2", "o3"} &&
               !learner;
      },
      180s);
  if (!grown) {
    stop = true;
    writer.join();
    FAIL() << "not adopted: voters " << absl::StrJoin(Voters(c), ",") << "\n"
           << c.Logs() << old.Logs();
  }
  // Nothing else happens by itself: the unmanaged members stay (AD1).
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(Voters(c), (std::vector<std::string>{"n1", "n2", "n3", "o1", "o2", "o3"}));
  RunResult got = c.Ctl({"get"});
  EXPECT_NE(got.output.find("3 unmanaged"), std::string::npos) << got.output;

  RunResult r = c.Ctl({"retire-unmanaged", "--yes"}, true, 180s);
  stop = true;
  writer.join();
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs() << old.Logs();
  // One removal at a time, each followed by a check that every remaining voter is healthy.
  size_t removals = 0;
  for (size_t at = r.output.find("; quorum kept: "); at != std::string::npos;
       at = r.output.find("; quorum kept: ", at + 1)) {
    ++removals;
    const size_t from = at + std::string("; quorum kept: ").size();
    const std::string counts = r.output.substr(from, r.output.find('\n', from) - from);
    // "K of V voting members healthy": V voters left after this removal, all healthy.
    const int left = 6 - static_cast<int>(removals);
    EXPECT_EQ(counts, absl::StrCat(left, " of ", left, " voting members healthy")) << r.output;
  }
  EXPECT_EQ(removals, 3u) << r.output;
  EXPECT_NE(r.output.find("took a backup first"), std::string::npos) << r.output;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_NE(r.output.find(absl::StrCat("  o", i, " (")), std::string::npos)
        << "the members to shut down are listed: " << r.output;
  }
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();

  // Every key: the old operator's and every acknowledged one of the writer's.
  EtcdClient managed = c.Client(c.ClientUrls());
  for (int i = 0; i < 200; ++i) {
    auto v = managed.Get(absl::StrCat("old/", i));
    ASSERT_TRUE(v.ok() && v->has_value()) << "old/" << i;
    EXPECT_EQ(**v, absl::StrCat("v", i));
  }
  size_t lost = 0;
  for (const auto& [k, v] : acked) {
    auto got_v = managed.Get(k);
    if (!got_v.ok() || !got_v->has_value() || **got_v != v) ++lost;
  }
  EXPECT_EQ(lost, 0u) << "of " << acked.size() << " acknowledged writes";
  EXPECT_GT(acked.size(), 100u) << failed << " writes failed";
  std::cerr << "adopt: " << acked.size() << " writes acknowledged, " << failed << " failed\n";
  // A second run has nothing to do.
  RunResult again = c.Ctl({"retire-unmanaged", "--yes"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to retire"), std::string::npos) << again.output;
}

// A hand-made cluster on etcd 3.5, and agents whose etcd.binary is Debian's 3.4 (issue 32):
// a 3.4 etcd cannot join it ("incompatible with current running cluster"). The agents add no
// learner and launch no etcd; the leader waits and says which version a node needs, what it
// has, and which key to set.
TEST(AdoptTest, A35ClusterWithThe34BinaryWaitsNamingBothVersionsAndLaunchesNothing) {
  const std::string adopt =
      absl::StrCat("  adopt:\n    endpoints: [", OldClientUrl(0, kAdopt35), ", ",
                   OldClientUrl(1, kAdopt35), ", ", OldClientUrl(2, kAdopt35), "]\n");
  TestCluster c(kAdopt35, 3, 3, adopt + kFastLeader, kFileBackup);
  c.UseEtcd(kDebianEtcd);  // the agents have only 3.4: they cannot join a 3.5.16 cluster
  HandMadeCluster old(c, kAdopt35, ETCD35_BIN);
  old.Start(c);
  const std::vector<std::string> old_urls = {OldClientUrl(0, kAdopt35), OldClientUrl(1, kAdopt35),
                                             OldClientUrl(2, kAdopt35)};
  ASSERT_TRUE(WaitFor([&] { return c.Client(old_urls).Put("probe", "x").ok(); }, 30s))
      << old.Logs();
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  RunResult got;
  const bool said = WaitFor(
      [&] {
        got = c.Ctl({"get"});
        return got.output.find("needs etcd 3.5.16") != std::string::npos;
      },
      60s);
  ASSERT_TRUE(said) << got.output << c.Logs() << old.Logs();
  EXPECT_NE(got.output.find("3.4.23"), std::string::npos) << got.output;
  EXPECT_NE(got.output.find("etcd.versions"), std::string::npos) << got.output;
  // A while longer: still no learner, and no agent ever launched etcd.
  std::this_thread::sleep_for(5s);
  EtcdClient client = c.Client(old_urls);
  auto members = client.MemberList();
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->size(), 3u) << "only the hand-made members";
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(c.EtcdPid(i).has_value()) << "node " << i << " runs etcd";
    std::error_code ec;
    const auto size = fs::file_size(c.DataDir(i) + "/etcd.log", ec);
    EXPECT_TRUE(ec || size == 0) << "node " << i << " launched etcd:\n" << c.Logs();
  }
}

}  // namespace
}  // namespace steward::testing
