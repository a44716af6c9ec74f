// Pending restarts and restart rolls against real etcd (reconcile/restart_roll.h): a flag changed
// in every config shows as pending on every member, and `stewardctl restart --pending` rolls it
// out one member at a time under a writer; a roll whose steward leader is killed midway is
// finished by the next one.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "harness.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kPending = 120;
constexpr int kLeaderKilled = 121;
constexpr char kQuota[] = "4294967296";  // 4 GiB; etcd's default is 2 GiB
constexpr double kQuotaBytes = 4294967296.0;

nlohmann::json StatusJson(const TestCluster& c) {
  RunResult r = c.Ctl({"status", "-o", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// The highest raft term any member reports: it grows by one with each election.
uint64_t RaftTerm(const TestCluster& c) {
  uint64_t term = 0;
  for (int i = 0; i < c.Nodes(); ++i) {
    auto st = c.Client(c.ClientUrl(i)).Status(c.ClientUrl(i), 2000ms);
    if (st.ok()) term = std::max(term, st->raft_term);
  }
  return term;
}

// etcd's own quota gauge on node i's metrics URL (cluster.ports.metrics), or -1 if none.
double QuotaMetric(const TestCluster& c, int i) {
  httplib::Client m(c.Host(i), 2393);
  m.set_connection_timeout(3, 0);
  auto r = m.Get("/metrics");
  if (!r || r->status != 200) return -1;
  const std::string name = "\netcd_server_quota_backend_bytes ";  // the sample, not # HELP
  const size_t at = r->body.find(name);
  if (at == std::string::npos) return -1;
  return std::stod(r->body.substr(at + name.size()));
}

TEST(RestartTest, AChangedQuotaIsPendingEverywhereAndRollsOutWithoutAFailedWrite) {
  TestCluster c(kPending, 3, 3, std::string(kFastLeader) + "  ports:\n    metrics: 2393\n");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_TRUE(StatusJson(c)["pending_restart"].empty());
  const double quota_before = QuotaMetric(c, 0);
  ASSERT_GT(quota_before, 0) << "etcd reports no etcd_server_quota_backend_bytes";
  ASSERT_NE(quota_before, kQuotaBytes);

  // The operator raises the quota in every config and reloads each agent: etcd keeps running
  // with the old flags, and each member now says what it waits for.
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::ofstream(c.ConfigPath(i)) << absl::StrReplaceAll(
        text, {{"  stop_timeout: 5s\n",
                absl::StrCat("  stop_timeout: 5s\n  extra_args: [\"--quota-backend-bytes=", kQuota,
                             "\"]\n")}});
    c.SignalAgent(i, SIGHUP);
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) pids.push_back(c.EtcdPid(i).value_or(0));
  nlohmann::json pending;
  ASSERT_TRUE(WaitFor(
      [&] {
        pending = StatusJson(c)["pending_restart"];
        if (pending.size() != 3) return false;
        for (const auto& [node, flags] : pending.items()) {
          if (flags != nlohmann::json::array({"--quota-backend-bytes"})) return false;
        }
        return true;
      },
      60s))
      << pending.dump() << "\n"
      << c.Logs();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.EtcdPid(i).value_or(-1), pids[i]) << "a reload restarted etcd";
  RunResult table = c.Ctl({"status"});
  EXPECT_NE(table.output.find("pending restart: n2: --quota-backend-bytes"), std::string::npos)
      << table.output;
  const int leader = StewardLeader(c);
  ASSERT_GE(leader, 0);
  RunResult metric = c.AdminGet(leader, "/metrics");
  EXPECT_NE(metric.output.find("steward_etcd_pending_restart{node=\"n1\"} 1"), std::string::npos)
      << metric.output;

  SequentialWriter writer(c);
  std::this_thread::sleep_for(1s);
  const uint64_t term_before = RaftTerm(c);
  RunResult r = c.Ctl({"restart", "--pending"}, true, 240s);
  std::this_thread::sleep_for(1s);
  writer.Stop();
  const uint64_t term_after = RaftTerm(c);
  std::cerr << "stewardctl restart --pending:\n" << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--quota-backend-bytes on n1, n2, n3"), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  // Each member restarted once, with at most one election each (the leader's moved first).
  for (int i = 0; i < 3; ++i) EXPECT_NE(c.EtcdPid(i).value_or(0), pids[i]) << "n" << i + 1;
  EXPECT_LE(term_after - term_before, 3u) << term_before << " -> " << term_after;
  EXPECT_GT(writer.acked.load(), 50);
  EXPECT_EQ(writer.failed.load(), 0) << "writes failed during the restart roll";
  EXPECT_EQ(writer.Missing(c), 0);
  std::cerr << "restart roll: " << writer.acked << " writes acknowledged, " << writer.failed
            << " failed, raft term " << term_before << " -> " << term_after << "\n";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(QuotaMetric(c, i), kQuotaBytes) << "n" << i + 1;
  EXPECT_TRUE(WaitFor([&] { return StatusJson(c)["pending_restart"].empty(); }, 30s));
  // Nothing is pending any more: a second --pending restarts nothing.
  RunResult again = c.Ctl({"restart", "--pending"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing is pending"), std::string::npos) << again.output;
}

TEST(RestartTest, ARollWhoseStewardLeaderIsKilledMidwayIsFinishedByTheNext) {
  TestCluster c(kLeaderKilled, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) pids.push_back(c.EtcdPid(i).value_or(0));
  RunResult r = c.Ctl({"restart", "--no-wait", "--reason", "test"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The first member restarted: the steward leader dies (kill -9) with two to go.
  nlohmann::json roll;
  ASSERT_TRUE(WaitFor(
      [&] {
        roll = StatusJson(c)["restart_roll"];
        return roll.is_object() && roll["left"].size() <= 2;
      },
      90s))
      << roll.dump() << c.Logs();
  const int leader = StewardLeader(c);
  ASSERT_GE(leader, 0);
  c.SignalAgent(leader, SIGKILL);
  c.StartAgent(leader);
  ASSERT_TRUE(WaitFor(
      [&] {
        roll = StatusJson(c)["restart_roll"];
        return roll.is_object() && roll["left"].empty();
      },
      180s))
      << roll.dump() << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  for (int i = 0; i < 3; ++i) EXPECT_NE(c.EtcdPid(i).value_or(0), pids[i]) << "n" << i + 1;
  RunResult status = c.Ctl({"status"});
  EXPECT_EQ(status.output.find("restart roll:"), std::string::npos) << status.output;
}

}  // namespace
}  // namespace steward::testing
