// Space (issue 15 part 3) against real agents and etcd 3.4 on 127.0.45.x and 127.0.48.x:
// `stewardctl defrag` (table and json, leader last, sizes), `alarm list` / `alarm disarm` with
// an alarm raised by hand, and the steward leader's own NOSPACE recovery on a cluster with a
// small backend quota.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "etcd/client.h"
#include "etcd/keys.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

enum Subnet { kDefragAndAlarms = 45, kNospace = 48, kNospaceNoLeader = 59 };

// The JSON document in a command's output (stderr's progress lines come first).
nlohmann::json JsonIn(const std::string& out) {
  const size_t from = out.find_first_of("[{");
  if (from == std::string::npos) return nlohmann::json();
  return nlohmann::json::parse(out.substr(from), nullptr, false);
}

// Adds etcd flags to every node's config (the harness writes the etcd section itself).
void AddEtcdArgs(const TestCluster& c, int nodes, const std::string& args) {
  for (int i = 0; i < nodes; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::stringstream text;
    text << in.rdbuf();
    in.close();
    const std::string yaml = absl::StrReplaceAll(
        text.str(), {{"  stop_timeout: 5s\n",
                      absl::StrCat("  stop_timeout: 5s\n  extra_args: [", args, "]\n")}});
    ASSERT_NE(yaml, text.str()) << "no etcd section to extend in " << c.ConfigPath(i);
    std::ofstream(c.ConfigPath(i), std::ios::trunc) << yaml;
  }
}

TEST(SpaceTest, DefragEveryMemberLeaderLastAndAlarmsByHand) {
  // The leader's own NOSPACE recovery is off here: the alarm raised by hand must stay until
  // `alarm disarm` clears it.
  TestCluster c(kDefragAndAlarms, 3, 3, absl::StrCat(kFastLeader, "  recover_nospace: false\n"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  // Garbage to defragment away: one key rewritten many times, then compacted by etcd's own
  // history (the sizes only have to be reported, not shrink).
  for (int i = 0; i < 200; ++i)
    Put(c, "/it/space/k" + std::to_string(i % 5), std::string(4096, 'x'));

  RunResult table = c.Ctl({"defrag"});
  ASSERT_EQ(table.exit_code, 0) << table.output << c.Logs();
  std::cerr << "$ stewardctl defrag\n" << table.output;  // quoted in docs/operations.md
  EXPECT_NE(table.output.find("BEFORE"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("AFTER"), std::string::npos) << table.output;
  for (const char* n : {"n1 ", "n2 ", "n3 "}) {
    EXPECT_NE(table.output.find(n), std::string::npos) << n << "\n" << table.output;
  }

  RunResult json = c.Ctl({"defrag", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  nlohmann::json rows = JsonIn(json.output);
  ASSERT_TRUE(rows.is_array()) << json.output;
  ASSERT_EQ(rows.size(), 3u) << json.output;
  for (const auto& r : rows) {
    EXPECT_EQ(r.value("result", ""), "ok") << r.dump();
    EXPECT_TRUE(r["db_size_before"].is_number_integer()) << r.dump();
    EXPECT_TRUE(r["db_size_after"].is_number_integer()) << r.dump();
    EXPECT_GT(r["db_size_before"].get<int64_t>(), 0) << r.dump();
    EXPECT_GT(r["db_size_after"].get<int64_t>(), 0) << r.dump();
  }
  // The etcd leader goes last, and is the one etcd names.
  ClusterView view = c.Status();
  EXPECT_EQ(rows[2].value("role", ""), "leader") << json.output;
  EXPECT_EQ(rows[2].value("id", ""), HexId(view.leader_id)) << json.output;
  EXPECT_EQ(rows[0].value("role", ""), "follower") << json.output;

  // An alarm raised by hand on n2: listed with the member's name, then disarmed.
  EtcdClient client = c.Client(c.ClientUrls());
  auto st = client.Status(c.ClientUrl(1), 2000ms);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_TRUE(WaitFor([&] { return client.AlarmActivate(st->member_id, "NOSPACE").ok(); }, 15s));
  RunResult list = c.Ctl({"alarm", "list"});
  std::cerr << "$ stewardctl alarm list\n" << list.output;
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("n2"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("NOSPACE"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find(HexId(st->member_id)), std::string::npos) << list.output;
  RunResult list_json = c.Ctl({"alarm", "list", "-o", "json"});
  nlohmann::json alarms = JsonIn(list_json.output);
  ASSERT_TRUE(alarms.is_array() && alarms.size() == 1) << list_json.output;
  EXPECT_EQ(alarms[0].value("member", ""), "n2");
  EXPECT_EQ(alarms[0].value("alarm", ""), "NOSPACE");
  EXPECT_EQ(alarms[0].value("member_id", ""), HexId(st->member_id));
  // Writes are refused while it is active.
  EXPECT_FALSE(client.Put("/it/space/refused", "x").ok());

  RunResult disarm = c.Ctl({"alarm", "disarm"});
  std::cerr << "$ stewardctl alarm disarm\n" << disarm.output;
  EXPECT_EQ(disarm.exit_code, 0) << disarm.output;
  EXPECT_NE(disarm.output.find("disarmed"), std::string::npos) << disarm.output;
  EXPECT_NE(disarm.output.find("n2"), std::string::npos) << disarm.output;
  EXPECT_NE(disarm.output.find("NOSPACE"), std::string::npos) << disarm.output;
  RunResult after = c.Ctl({"alarm", "list"});
  EXPECT_EQ(after.exit_code, 0) << after.output;
  EXPECT_NE(after.output.find("no active alarms"), std::string::npos) << after.output;
  EXPECT_TRUE(client.Put("/it/space/accepted", "x").ok());
  RunResult again = c.Ctl({"alarm", "disarm", "-o", "json"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(JsonIn(again.output), nlohmann::json::array()) << again.output;

  // A member that does not answer is skipped, said so, and the exit status is 1.
  c.SignalAgent(2, SIGKILL);  // (its etcd would otherwise be restarted at once)
  c.KillEtcd(2);
  RunResult skipped = c.Ctl({"defrag"});
  std::cerr << "$ stewardctl defrag   # n3 down\n" << skipped.output;
  EXPECT_EQ(skipped.exit_code, 1) << skipped.output;
  EXPECT_NE(skipped.output.find("skipping n3"), std::string::npos) << skipped.output;
  // And with one of three down, blocking another would stall the cluster: refused, named.
  EXPECT_NE(skipped.output.find("would stall the cluster"), std::string::npos) << skipped.output;
}

TEST(SpaceTest, TheLeaderClearsNospaceByItself) {
  TestCluster c(kNospace, 3, 3, kFastLeader);
  // 3 MiB: a few dozen 64 KiB writes fill it.
  AddEtcdArgs(c, 3, "\"--quota-backend-bytes=3145728\"");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient client = c.Client(c.ClientUrls());
  // A steward leader first: under NOSPACE etcd refuses the lease and the leader key, so no
  // agent could become leader (README: the recovery needs a leader elected before the alarm).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto leader = client.Get(LeaderKey("it48"));
        return leader.ok() && leader->has_value();
      },
      30s))
      << c.Logs();
  // Four keys rewritten until etcd refuses: the history fills the backend, the live data stays
  // small, so compaction and defragmentation free nearly all of it.
  const std::string value(64 * 1024, 'v');
  absl::Status refused;
  const auto start = std::chrono::steady_clock::now();
  int writes = 0;
  for (; writes < 2000 && std::chrono::steady_clock::now() - start < 30s; ++writes) {
    refused = client.Put("/it/nospace/k" + std::to_string(writes % 4), value);
    if (!refused.ok() && refused.message().find("space") != std::string::npos) break;
  }
  ASSERT_FALSE(refused.ok()) << "no NOSPACE after " << writes << " writes";
  ASSERT_NE(refused.message().find("database space exceeded"), std::string::npos) << refused;
  // Deletes are allowed under NOSPACE: the keys go too.
  etcdserverpb::TxnRequest del;
  auto* d = del.add_success()->mutable_request_delete_range();
  d->set_key("/it/nospace/");
  d->set_range_end("/it/nospace0");  // the prefix's end
  EXPECT_TRUE(client.Txn(del).ok());

  // The leader compacts, defragments and disarms by itself: writes work again.
  const auto full = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return client.Put("/it/nospace/after", "ok").ok(); }, 30s)) << c.Logs();
  std::cerr << "NOSPACE after " << writes << " writes of 64 KiB; writes accepted again "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - full)
                   .count()
            << " ms after the first refusal\n";
  auto alarms = client.AlarmList();
  ASSERT_TRUE(alarms.ok()) << alarms.status();
  EXPECT_TRUE(alarms->empty());
  for (int i = 0; i < 3; ++i) {
    auto st = client.Status(c.ClientUrl(i), 2000ms);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_LT(st->db_size, 3145728 / 2) << "n" << i + 1 << " was not defragmented";
  }
  // The history says what the leader did.
  RunResult history;
  ASSERT_TRUE(WaitFor(
      [&] {
        history = c.Ctl({"history", "-o", "json"});
        return history.output.find("nospace-recover") != std::string::npos;
      },
      15s))
      << history.output;
  nlohmann::json events = JsonIn(history.output);
  ASSERT_TRUE(events.is_array()) << history.output;
  bool recovered = false;
  for (const auto& e : events) {
    if (e.value("action", "") != "nospace-recover") continue;
    EXPECT_EQ(e.value("result", ""), "ok") << e.dump();
    EXPECT_NE(e.value("reason", "").find("compacted to revision"), std::string::npos) << e.dump();
    EXPECT_NE(e.value("reason", "").find("disarmed"), std::string::npos) << e.dump();
    recovered = true;
  }
  EXPECT_TRUE(recovered) << history.output;
  std::cerr << "$ stewardctl history\n" << c.Ctl({"history"}).output;
  EXPECT_NE(c.Logs().find("NOSPACE cleared"), std::string::npos) << c.Logs();
}

// S6: NOSPACE raised while no steward leader holds the key. etcd refuses the lease a new
// leader needs, so no agent can become leader; the lowest-named agent that answers clears it.
TEST(SpaceTest, NospaceWithoutAStewardLeaderIsClearedByTheLowestAgent) {
  TestCluster c(kNospaceNoLeader, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient client = c.Client(c.ClientUrls());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto leader = client.Get(LeaderKey("it59"));
        return leader.ok() && leader->has_value();
      },
      30s))
      << c.Logs();
  // Every agent stops (etcd keeps serving) until the leader key's lease is gone.
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGSTOP);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto leader = client.Get(LeaderKey("it59"));
        return leader.ok() && !leader->has_value();
      },
      30s));
  auto st = client.Status(c.ClientUrl(0), 2000ms);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_TRUE(WaitFor([&] { return client.AlarmActivate(st->member_id, "NOSPACE").ok(); }, 15s));
  EXPECT_FALSE(client.LeaseGrant(std::chrono::seconds(10)).ok()) << "NOSPACE refuses leases";
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGCONT);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto alarms = client.AlarmList();
        return alarms.ok() && alarms->empty();
      },
      90s))
      << c.Logs();
  EXPECT_TRUE(WaitFor([&] { return client.Put("/it/nospace/after", "ok").ok(); }, 15s));
  // Leadership can be taken again.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto leader = client.Get(LeaderKey("it59"));
        return leader.ok() && leader->has_value();
      },
      30s))
      << c.Logs();
  EXPECT_NE(c.Logs().find("NOSPACE cleared"), std::string::npos) << c.Logs();
}

}  // namespace
}  // namespace steward::testing
