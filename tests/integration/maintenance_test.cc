// Maintenance against real agents and real etcd (subnets 127.0.47.x and 127.0.50.x): a paused
// node is not replaced however long it is down, and is once resumed; move-leader moves etcd's
// leadership; remove-node keeps a node out until readd-node brings it back as a voter.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <optional>
#include <thread>

#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kPauseSubnet = 47;
constexpr int kRemoveSubnet = 50;
constexpr int kAddSubnet = 56;
// idle_interval: a settled leader must pass several times within the 12 s a paused node is
// watched, or "not replaced" would hold without having been tested.
const char kFast[] =
    "  replace_after: 3s\n  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n"
    "  learner_timeout: 30s\n  idle_interval: 1s\n";

std::string AgentLog(const TestCluster& c, int i) {
  std::ifstream in(c.Root() + "/agent-n" + std::to_string(i + 1) + ".log");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool HasMember(const TestCluster& c, uint64_t id) {
  for (const auto& m : c.Status().members) {
    if (m.member.id == id) return true;
  }
  return false;
}

TEST(MaintenanceTest, PausedNodeIsNotReplacedUntilResumedAndMoveLeaderMovesLeadership) {
  TestCluster c(kPauseSubnet, 4, 3, kFast);
  for (int i = 0; i < 4; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();

  // move-leader: to n3 unless it leads already, then to n2; status shows the new leader.
  const std::string target = c.Status().leader_id == MemberIdOf(c, "n3") ? "n2" : "n3";
  RunResult moved = c.Ctl({"move-leader", target});
  ASSERT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_NE(moved.output.find("etcd leadership moved"), std::string::npos) << moved.output;
  EXPECT_EQ(c.Status().leader_id, MemberIdOf(c, target));
  RunResult again = c.Ctl({"move-leader", target, "-o", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto j = nlohmann::json::parse(again.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << again.output;
  EXPECT_EQ(j.value("moved", true), false);

  // -o json: the lines for people on stderr, one document on stdout (printed last).
  RunResult paused =
      c.Ctl({"pause", "--node", "n2", "--for", "10m", "--reason", "kernel upgrade", "-o", "json"});
  ASSERT_EQ(paused.exit_code, 0) << paused.output;
  const size_t doc = paused.output.find("{\n  \"command\"");
  ASSERT_NE(doc, std::string::npos) << paused.output;
  auto pj = nlohmann::json::parse(paused.output.substr(doc), nullptr, false);
  ASSERT_FALSE(pj.is_discarded()) << paused.output;
  EXPECT_EQ(pj["command"], "pause");
  EXPECT_EQ(pj["ok"], true);
  ASSERT_FALSE(pj["messages"].empty()) << paused.output;
  EXPECT_NE(pj["messages"][0].get<std::string>().find("paused node n2"), std::string::npos);
  ASSERT_EQ(pj["maintenance"]["pauses"].size(), 1u) << paused.output;
  EXPECT_EQ(pj["maintenance"]["pauses"][0]["node"], "n2");
  const uint64_t n2 = MemberIdOf(c, "n2");
  ASSERT_NE(n2, 0u);
  c.SignalAgent(1, SIGTERM);
  c.KillEtcd(1);
  // Well past replace_after (3s) with spare n4 ready: still a member.
  std::this_thread::sleep_for(12s);
  EXPECT_TRUE(HasMember(c, n2)) << c.Logs();
  RunResult status = c.Ctl({"status"});
  EXPECT_NE(status.output.find("node n2 is paused until"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("paused:         n2 until"), std::string::npos) << status.output;
  RunResult json = c.Ctl({"status", "-o", "json"});
  auto sj = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(sj.is_discarded()) << json.output;
  ASSERT_EQ(sj["steward"]["maintenance"]["pauses"].size(), 1u) << json.output;
  EXPECT_EQ(sj["steward"]["maintenance"]["pauses"][0]["reason"], "kernel upgrade");
  EXPECT_EQ(sj["steward"]["maintenance"]["pauses"][0]["active"], true);

  RunResult resumed = c.Ctl({"resume", "--node", "n2"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(c.WaitVoters({"n1", "n3", "n4"}, 40s)) << c.Logs();
  EXPECT_FALSE(HasMember(c, n2));
}

TEST(MaintenanceTest, RemovedNodeStaysOutUntilReadded) {
  TestCluster c(kRemoveSubnet, 3, 3, kFast);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  const uint64_t n3 = MemberIdOf(c, "n3");
  // No backup store in this config: refused without --force.
  RunResult refused = c.Ctl({"remove-node", "n3", "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_TRUE(HasMember(c, n3));
  const size_t starts_before = Count(AgentLog(c, 2), "started etcd pid");
  RunResult removed = c.Ctl({"remove-node", "n3", "--yes", "--force", "--reason", "decommission"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_NE(removed.output.find("clamped"), std::string::npos) << removed.output;
  EXPECT_FALSE(HasMember(c, n3));
  // n3's agent keeps running: the leader must not add it back.
  std::this_thread::sleep_for(8s);
  EXPECT_EQ(c.Status().members.size(), 2u) << c.Logs();
  // Its removed member's etcd exits by itself, and is not restarted over and over (RM3): the
  // agent sees the member is out of its cluster and says so. One restart may slip through
  // when the removed member was the etcd leader: until the others elect a new one, no
  // linearizable member list can prove the removal, and an unproven removal is not acted on
  // (CI run of 2026-11-26: one restart, then RM3). Before RM3 it was 7 restarts in 8 s.
  EXPECT_EQ(c.EtcdProcessCount(2), 0) << c.Logs();
  EXPECT_LE(Count(AgentLog(c, 2), "started etcd pid"), starts_before + 1) << c.Logs();
  EXPECT_NE(AgentLog(c, 2).find("is no longer in cluster"), std::string::npos) << c.Logs();
  RunResult status = c.Ctl({"status"});
  EXPECT_NE(status.output.find("removed:        n3"), std::string::npos) << status.output;
  RunResult readd = c.Ctl({"readd-node", "n3"});
  ASSERT_EQ(readd.exit_code, 0) << readd.output;
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 40s)) << c.Logs();
  EXPECT_NE(MemberIdOf(c, "n3"), n3);
}

// The "add a node" runbook (docs/operations.md): a machine is added to cluster.nodes in every
// config, the running agents reload (SIGHUP, as `systemctl reload steward`; their etcd keeps
// running), the new agent starts as a spare, and a larger size makes it a voter.
TEST(MaintenanceTest, ANodeAddedToEveryConfigJoinsAfterAReload) {
  TestCluster c(kAddSubnet, 4, 3, kFast);
  const std::string n3_line = "    - {name: n3, host: " + c.Host(2) + "}\n";
  const std::string n4_line = "    - {name: n4, host: " + c.Host(3) + "}\n";
  c.ReplaceInConfigs(n4_line, "");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  std::vector<std::optional<pid_t>> etcd_before;
  for (int i = 0; i < 3; ++i) etcd_before.push_back(c.EtcdPid(i));

  c.ReplaceInConfigs(n3_line, n3_line + n4_line);
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGHUP);
  c.StartAgent(3);
  // The reloaded agents see n4; their etcd kept running.
  ASSERT_TRUE(
      WaitFor([&] { return c.Ctl({"status"}).output.find("n4") != std::string::npos; }, 30s))
      << c.Logs();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdPid(i), etcd_before[static_cast<size_t>(i)]) << i;
  RunResult up = c.Ctl({"configure-cluster", "--size", "4"});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3", "n4"}, 120s)) << c.Logs();
}

}  // namespace
}  // namespace steward::testing
