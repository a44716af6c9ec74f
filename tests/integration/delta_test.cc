// Delta backups (issue 16) with real agents and etcd 3.4 on 127.0.X.0/24: the writes after the
// newest full backup come back after total loss, across a leader change, and a restore can
// stop at a chosen revision.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kTotalLoss = 38, kPointInTime = 39 };

constexpr char kDeltas[] =
    "backup:\n  store: file://ROOT/backups\n  interval: 1h\n  delta_interval: 500ms\n";

// A put or delete through the cluster; the revision it made (0 and a test failure if none).
int64_t Write(const TestCluster& c, const std::string& key, std::optional<std::string> value) {
  EtcdClient w = c.Client(c.ClientUrls());
  etcdserverpb::TxnRequest txn;
  if (value) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(*value);
  } else {
    txn.add_success()->mutable_request_delete_range()->set_key(key);
  }
  int64_t revision = 0;
  EXPECT_TRUE(WaitFor([&] {
    auto r = w.Txn(txn);
    if (r.ok()) revision = r->header().revision();
    return r.ok();
  }, 15s)) << key;
  return revision;
}

// list-backups' view of backup `name`'s delta chain (an empty object if not listed).
nlohmann::json Chain(const TestCluster& c, const std::string& name) {
  RunResult r = c.Ctl({"list-backups", "-o", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (!j.is_array()) return nlohmann::json::object();
  for (const auto& b : j) {
    if (b.value("name", "") == name && b.contains("deltas")) return b["deltas"];
  }
  return nlohmann::json::object();
}

bool WaitChainReaches(const TestCluster& c, const std::string& name, int64_t revision) {
  return WaitFor([&] { return Chain(c, name).value("to_revision", int64_t{0}) >= revision; },
                 30s);
}

// A cluster with fast deltas, two keys written, then a full backup: its name.
std::string StartWithABackup(TestCluster& c) {
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Write(c, "/it/gone", "here before the backup");
  Write(c, "/it/over", "old");
  return TakeBackup(c);
}

int StewardLeader(const TestCluster& c) {
  for (int i = 0; i < 3; ++i) {
    if (c.AdminGet(i, "/leader").exit_code == 200) return i;
  }
  return -1;
}

TEST(DeltaTest, TotalLossBringsBackTheWritesAfterTheFullBackupAcrossALeaderChange) {
  TestCluster c(kTotalLoss, 3, 3, kFastLeader, kDeltas);
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  for (int i = 0; i < 20; ++i) Write(c, absl::StrCat("/it/d", i), absl::StrCat("v", i));
  Write(c, "/it/over", "new");
  Write(c, "/it/gone", std::nullopt);
  int64_t last = Write(c, "/it/d19", "v19 again");
  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();

  // The steward leader dies with changes on the way: the next one goes on from the store.
  const int leader = StewardLeader(c);
  ASSERT_GE(leader, 0) << c.Logs();
  c.SignalAgent(leader, SIGKILL);
  for (int i = 20; i < 40; ++i) Write(c, absl::StrCat("/it/d", i), absl::StrCat("v", i));
  last = Write(c, "/it/over", "newer");
  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();
  c.StartAgent(leader);
  const nlohmann::json chain = Chain(c, base);
  EXPECT_EQ(chain.value("stopped", "?"), "") << "a gap or a bad delta: " << chain.dump();
  EXPECT_GE(chain.value("count", 0), 2) << chain.dump();
  size_t objects = 0;
  for (const auto& e : fs::recursive_directory_iterator(c.Root() + "/backups")) {
    if (e.path().string().find(".delta.zst") != std::string::npos) ++objects;
  }
  EXPECT_GE(objects, 2u);

  LoseEverything(c, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(Get(c, i % 3, absl::StrCat("/it/d", i)),
              i == 19 ? std::string("v19 again") : absl::StrCat("v", i))
        << i << "\n" << c.Logs();
  }
  EXPECT_EQ(Get(c, 1, "/it/over"), "newer");
  EXPECT_EQ(Get(c, 2, "/it/gone"), "<absent>") << "a delete after the backup is replayed too";
  EXPECT_NE(c.Logs().find("of deltas after backup " + base), std::string::npos) << c.Logs();
}

TEST(DeltaTest, RestoreBackupToARevisionInTheMiddleOfADelta) {
  TestCluster c(kPointInTime, 3, 3, kFastLeader, kDeltas);
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  Write(c, "/it/over", "new");
  Write(c, "/it/gone", std::nullopt);
  const int64_t mid = Write(c, "/it/mid", "here");
  Write(c, "/it/over", "after the point");
  const int64_t last = Write(c, "/it/late", "after the point");
  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();
  // The leader says how far its deltas reach on its admin port.
  const int leader = StewardLeader(c);
  ASSERT_GE(leader, 0);
  RunResult metrics = c.AdminGet(leader, "/metrics");
  EXPECT_NE(metrics.output.find("steward_delta_backup_revision "), std::string::npos)
      << metrics.output;

  // A restore needs its target named: a bare restore-backup is a usage error.
  RunResult bare = c.Ctl({"restore-backup", "--yes"});
  EXPECT_EQ(bare.exit_code, 2) << bare.output;
  EXPECT_NE(bare.output.find("--latest"), std::string::npos) << bare.output;
  // A point the deltas do not reach is refused before anything changes.
  RunResult refused = c.Ctl({"restore-backup", "--to-revision", std::to_string(last + 1000),
                             "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("refusing to restore"), std::string::npos) << refused.output;
  EXPECT_EQ(Get(c, 0, "/it/late"), "after the point");

  RunResult r = c.Ctl({"restore-backup", "--to-revision", std::to_string(mid), "--yes", "--wait",
                       "120"},
                      true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  EXPECT_NE(r.output.find("to revision " + std::to_string(mid)), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/over"), "new");
  EXPECT_EQ(Get(c, 1, "/it/gone"), "<absent>");
  EXPECT_EQ(Get(c, 2, "/it/mid"), "here");
  EXPECT_EQ(Get(c, 0, "/it/late"), "<absent>") << "written after the point asked for";
  // The restored cluster's revision is past every revision the old one served.
  auto st = c.Client(c.ClientUrl(0)).Status(c.ClientUrl(0), 2000ms);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_GT(st->revision, last);
}

}  // namespace
}  // namespace steward::testing
