// Self-healing integration tests: real agents and etcd 3.4 on 127.0.X.0/24. The leader's
// reconciler must bring back wiped nodes, drop stale entries, replace dead members with spares,
// resize, survive its own death mid-change, and never wipe anything when quorum is lost.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Short timers so the tests run in seconds; the defaults are minutes. kNudged sets its own
// idle_interval; the others pass every second once settled, so a silently lost member is seen
// within replace_after, not the default 10 s later.
const char kTimers[] =
    "  replace_after: 3s\n  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n"
    "  learner_timeout: 30s\n";
const std::string kFast = std::string(kTimers) + "  idle_interval: 1s\n";

enum Subnet {
  kWiped = 31,
  kStale = 32,
  kSpare = 33,
  kResize = 34,
  kQuorum = 35,
  kLeaderDies = 36,
  kNudged = 37,
  kLateLeader = 65
};

void WriteKeys(const TestCluster& c, int n) {
  EtcdClient w = c.Client(c.ClientUrls());
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(
        WaitFor([&] { return w.Put(absl::StrCat("/it/k", i), absl::StrCat("v", i)).ok(); }, 15s))
        << i;
  }
}

void ExpectKeysThrough(const TestCluster& c, int node, int n) {
  EtcdClient r = c.Client({c.ClientUrl(node)});
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::optional<std::string>> got = absl::UnavailableError("not read");
    // Bounded retries: right after a membership change the node may be between elections.
    WaitFor(
        [&] {
          got = r.Get(absl::StrCat("/it/k", i));
          return got.ok();
        },
        15s);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->has_value()) << "key " << i << " missing through node " << node;
    EXPECT_EQ(**got, absl::StrCat("v", i));
  }
}

TEST(HealTest, WipedNodeComesBackAsAHealthyVoterWithAllData) {
  TestCluster c(kWiped, 3, 3, kFast);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  WriteKeys(c, 200);
  const uint64_t old_id = MemberIdOf(c, "n3");
  c.SignalAgent(2, SIGTERM);
  ASSERT_FALSE(c.EtcdPid(2).has_value());
  fs::remove_all(c.DataDir(2));  // the node is re-imaged
  c.StartAgent(2);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_NE(MemberIdOf(c, "n3"), old_id) << "n3 should be a new member";
  ExpectKeysThrough(c, 2, 200);
  // The history tells the heal in order: the leader removed the old entry and added n3 as a
  // learner, n3's etcd joined on the leader's order, and the leader promoted it. (Events land a
  // moment after the step: bounded retries.)
  std::vector<std::string> seen;
  const std::vector<std::string> want = {"remove-member/", "add-learner/", "join/n3", "promote/"};
  auto in_order = [&] {
    auto r = c.Ctl({"history", "-o", "json"});
    if (r.exit_code != 0) return false;
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    if (!j.is_array()) return false;
    seen.clear();
    size_t next = 0;
    for (const auto& e : j) {
      // A join is recorded once etcd joined ("joined ..."), never "ok" (issue 32).
      const std::string result = e.value("result", std::string());
      if (result != "ok" && result.rfind("joined", 0) != 0) continue;
      const std::string action = e.value("action", std::string());
      const std::string node = e.value("node", std::string());
      seen.push_back(action + "/" + node);
      const std::string& w = want[next];
      const std::string w_action = w.substr(0, w.find('/'));
      const std::string w_node = w.substr(w.find('/') + 1);
      if (action == w_action && (w_node.empty() || w_node == node) && ++next == want.size()) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(in_order, 15s)) << "history (ok events): " << absl::StrJoin(seen, " ");
}

// A settled cluster is looked at only every cluster.idle_interval (here a minute): the wipe
// must still be noticed at once (the node's control loop wakes on the data dir's inotify
// event) and healed at once (the node nudges the leader). Without either, this takes > 60 s.
TEST(HealTest, AWipeUnderASettledClusterIsHealedWithoutWaitingForTheIdlePass) {
  TestCluster c(kNudged, 3, 3, std::string(kTimers) + "  idle_interval: 60s\n");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  WriteKeys(c, 50);
  std::this_thread::sleep_for(3s);  // every loop is in its idle sleep by now
  const uint64_t old_id = MemberIdOf(c, "n3");
  const auto wiped_at = std::chrono::steady_clock::now();
  fs::remove_all(fs::path(c.DataDir(2)) / "etcd");  // under the running agent and etcd
  ASSERT_TRUE(WaitFor(
      [&] {
        const uint64_t id = MemberIdOf(c, "n3");
        return id != 0 && id != old_id && c.WaitVoters({"n1", "n2", "n3"}, 1s);
      },
      40s))
      << c.Logs();
  const auto took = std::chrono::steady_clock::now() - wiped_at;
  EXPECT_LT(took, 40s);
  ExpectKeysThrough(c, 2, 50);
  // stewardctl nudges the leader after it changes the spec: a settled leader acts at once,
  // not at its next idle pass a minute later.
  std::this_thread::sleep_for(3s);
  RunResult shrink = c.Ctl({"configure-cluster", "--size", "2"});
  ASSERT_EQ(shrink.exit_code, 0) << shrink.output;
  EXPECT_TRUE(WaitFor([&] { return c.Status().voters == 2; }, 30s)) << c.Logs();
}

// Accepts TCP connections on host:port for `listen_for` and never answers them (a TLS
// handshake there waits out its caller's deadline), then stops listening (so etcd can bind
// the port) and holds what it accepted for `hold` more.
class Tarpit {
 public:
  Tarpit(const std::string& host, int port, std::chrono::milliseconds listen_for,
         std::chrono::milliseconds hold) {
    // Close-on-exec: an agent started meanwhile must not inherit the port.
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    listening_ =
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd_, 16) == 0;
    thread_ = std::thread([this, listen_for, hold] {
      std::vector<int> held;
      const auto until = std::chrono::steady_clock::now() + listen_for;
      while (listening_ && std::chrono::steady_clock::now() < until) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) == 1) {
          int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) held.push_back(c);
        }
      }
      ::close(fd_);
      accepted_ = held.size();
      std::this_thread::sleep_for(hold);
      for (int c : held) ::close(c);
    });
  }
  ~Tarpit() {
    if (thread_.joinable()) thread_.join();
  }
  bool listening() const { return listening_; }
  size_t accepted() {
    if (thread_.joinable()) thread_.join();
    return accepted_;
  }

 private:
  int fd_ = -1;
  bool listening_ = false;
  size_t accepted_ = 0;
  std::thread thread_;
};

// Found by bench/replace: 1 run in 10-20 healed in 2.8-4.2 s instead of ~0.45 s. A node that
// comes back empty tells the leader at its first control pass; its leadership loop may not
// know the leader by then, and the news was dropped: the leader found the node only at its
// next idle pass (here 120 s). The node's own client URL, the first its cluster client tries,
// answers TCP and never TLS here, so its first look for the leader waits out the call's
// timeout (2 s) while its first control pass already has the news.
TEST(HealTest, ANodeThatFindsTheLeaderLateStillTellsIt) {
  TestCluster c(kLateLeader, 3, 3, std::string(kTimers) + "  idle_interval: 120s\n");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  WriteKeys(c, 20);
  // n1 (the first in every node's endpoint list) comes back; it must not be the steward leader,
  // whose departure would start the next leader's passes.
  // (A restarted agent campaigns too, and may win again.)
  for (int k = 0; k < 5 && c.AdminGet(0, "/leader").exit_code == 200; ++k) {
    c.SignalAgent(0, SIGTERM);
    c.StartAgent(0);
    ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
    ASSERT_TRUE(WaitFor(
        [&] {
          for (int i = 0; i < 3; ++i) {
            if (c.AdminGet(i, "/leader").exit_code == 200) return true;
          }
          return false;
        },
        30s));
  }
  ASSERT_NE(c.AdminGet(0, "/leader").exit_code, 200) << "n1 kept winning the leadership";
  std::this_thread::sleep_for(3s);  // every loop is in its idle sleep by now
  const uint64_t old_id = MemberIdOf(c, "n1");
  c.SignalAgent(0, SIGTERM);
  ASSERT_FALSE(c.EtcdPid(0).has_value());
  fs::remove_all(c.DataDir(0));
  Tarpit tarpit(c.Host(0), 2379, 1500ms, 5s);
  ASSERT_TRUE(tarpit.listening());
  const auto back_at = std::chrono::steady_clock::now();
  c.StartAgent(0);
  ASSERT_TRUE(WaitFor(
      [&] {
        const uint64_t id = MemberIdOf(c, "n1");
        return id != 0 && id != old_id && c.WaitVoters({"n1", "n2", "n3"}, 1s);
      },
      60s))
      << c.Logs();
  EXPECT_LT(std::chrono::steady_clock::now() - back_at, 60s);
  EXPECT_GT(tarpit.accepted(), 0u) << "the node never tried its own client URL: nothing tested";
  ExpectKeysThrough(c, 0, 20);
}

TEST(HealTest, StaleEntryWithAnotherIdIsRemovedAndTheNodeJoins) {
  TestCluster c(kStale, 3, 3, kFast);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  c.SignalAgent(2, SIGTERM);
  fs::remove_all(c.DataDir(2));
  // Someone re-added n3's peer URL by hand: a never-started voter with a new ID.
  EtcdClient admin = c.Client({c.ClientUrl(0), c.ClientUrl(1)});
  ASSERT_TRUE(admin.MemberRemove(MemberIdOf(c, "n3")).ok());
  std::this_thread::sleep_for(1100ms);  // past the same-second ID collision
  uint64_t stale_id = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto added = admin.MemberAdd({absl::StrCat("https://", c.Host(2), ":2380")}, false);
        if (added.ok()) stale_id = added->id;
        return added.ok();
      },
      20s));
  c.StartAgent(2);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  uint64_t now_id = MemberIdOf(c, "n3");
  EXPECT_NE(now_id, stale_id) << "the stale entry should have been replaced";
  for (const auto& m : c.Status().members) EXPECT_NE(m.member.id, stale_id);
}

TEST(HealTest, SpareReplacesAMemberLostForGood) {
  TestCluster c(kSpare, 4, 3, kFast);
  for (int i = 0; i < 4; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  WriteKeys(c, 50);
  c.SignalAgent(1, SIGTERM);  // n2 is gone for good
  ASSERT_TRUE(c.WaitVoters({"n1", "n3", "n4"}, 90s)) << c.Logs();
  ExpectKeysThrough(c, 3, 50);
  RunResult status = c.Ctl({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("steward leader:"), std::string::npos) << status.output;
}

TEST(HealTest, ConfigureClusterResizesUpAndDown) {
  TestCluster c(kResize, 5, 3, kFast);
  for (int i = 0; i < 5; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  RunResult bad = c.Ctl({"configure-cluster", "--size", "6"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("between 1 and the number of nodes (5)"), std::string::npos)
      << bad.output;
  RunResult up = c.Ctl({"configure-cluster", "--size", "5"});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3", "n4", "n5"}, 120s)) << c.Logs();
  RunResult get = c.Ctl({"get"});
  EXPECT_NE(get.output.find("desired size:   5"), std::string::npos) << get.output;
  RunResult even = c.Ctl({"configure-cluster", "--size", "4"});
  EXPECT_EQ(even.exit_code, 0) << even.output;
  EXPECT_NE(even.output.find("warning"), std::string::npos) << even.output;
  RunResult down = c.Ctl({"configure-cluster", "--size", "3"});
  ASSERT_EQ(down.exit_code, 0) << down.output;
  ASSERT_TRUE(WaitFor(
      [&] {
        ClusterView v = c.Status();
        return v.healthy && v.members.size() == 3 && v.voters == 3;
      },
      120s))
      << c.Logs();
}

TEST(HealTest, QuorumLostWipesNothingAndRecovers) {
  TestCluster c(kQuorum, 3, 3, kFast);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  WriteKeys(c, 20);
  const uint64_t id2 = MemberIdOf(c, "n2"), id3 = MemberIdOf(c, "n3");
  c.SignalAgent(1, SIGTERM);
  c.SignalAgent(2, SIGTERM);
  std::this_thread::sleep_for(6s);  // longer than replace_after: nothing may be replaced
  // Issue 34 part 3: status read the steward state (and probed auth) through calls that need
  // the quorum, each waiting out its deadline (about 6 s at the default 3 s), and it showed the
  // agent that held the leader key as leader. With a 20 s deadline, no call may wait it out.
  const auto asked = std::chrono::steady_clock::now();
  RunResult status = c.Ctl({"status", "--timeout-ms", "20000"}, true, 60s);
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_LT(took, 15s) << "a call waited out its 20 s deadline\n" << status.output;
  std::printf(
      "status without a quorum: %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_EQ(status.exit_code, 1) << status.output;
  EXPECT_NE(status.output.find("QUORUM LOST"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("steward leader: none (the quorum is lost"), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("from before the quorum was lost"), std::string::npos)
      << status.output;
  EXPECT_TRUE(c.EtcdPid(0).has_value()) << "the surviving member must keep running";
  EXPECT_TRUE(fs::exists(c.DataDir(0) + "/etcd/member"));
  EXPECT_TRUE(fs::exists(c.DataDir(1) + "/etcd/member"));
  EXPECT_TRUE(fs::exists(c.DataDir(2) + "/etcd/member"));
  c.StartAgent(1);
  c.StartAgent(2);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(MemberIdOf(c, "n2"), id2) << "a member with data must come back as itself";
  EXPECT_EQ(MemberIdOf(c, "n3"), id3);
  ExpectKeysThrough(c, 2, 20);
}

TEST(HealTest, LeaderKilledMidJoinIsFinishedByTheNext) {
  TestCluster c(kLeaderDies, 3, 3, kFast);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient client = c.Client(c.ClientUrls());
  // Make sure the wiped node is not the steward leader.
  std::string leader;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = client.Get("/steward/it36/leader");
        if (l.ok() && l->has_value()) leader = **l;
        return !leader.empty();
      },
      20s));
  int wiped = leader == "n3" ? 1 : 2;
  int leader_idx = leader[1] - '1';
  c.SignalAgent(wiped, SIGTERM);
  fs::remove_all(c.DataDir(wiped));
  c.StartAgent(wiped);
  // Kill the leader agent as soon as the learner for the wiped node is in the list. A nudged
  // leader adds, joins and promotes within a few hundred ms: look every 5 ms (WaitFor's 200 ms
  // rounds can miss the learner altogether).
  bool learner_seen = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!learner_seen && std::chrono::steady_clock::now() < deadline) {
    if (auto ms = client.MemberList(); ms.ok()) {
      for (const auto& m : *ms) learner_seen = learner_seen || m.is_learner;
    }
    if (!learner_seen) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(learner_seen) << c.Logs();
  c.SignalAgent(leader_idx, SIGKILL);
  // The leader's etcd keeps serving; another agent takes over and finishes the join.
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  c.StartAgent(leader_idx);
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 30s)) << c.Logs();
  EXPECT_EQ(c.EtcdProcessCount(leader_idx), 1);
}

}  // namespace
}  // namespace steward::testing
