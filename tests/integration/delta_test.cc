// Delta backups (issue 16) with real agents and etcd 3.4 on 127.0.X.0/24: the writes after the
// newest full backup come back after total loss, across a leader change; a restore can stop
// at a chosen revision or time, and never goes past a damaged or missing delta.
#include "backup/delta.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backup/pipeline.h"
#include "backup/store.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet {
  kTotalLoss = 38,
  kPointInTime = 39,
  kTamperedAndTime = 40,
  kBurst = 58,
  kDrillWithDeltas = 253,
};

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
  EXPECT_TRUE(WaitFor(
      [&] {
        auto r = w.Txn(txn);
        if (r.ok()) revision = r->header().revision();
        return r.ok();
      },
      15s))
      << key;
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
  return WaitFor([&] { return Chain(c, name).value("to_revision", int64_t{0}) >= revision; }, 30s);
}

// A cluster with fast deltas, two keys written, then a full backup: its name.
std::string StartWithABackup(TestCluster& c) {
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Write(c, "/it/gone", "here before the backup");
  Write(c, "/it/over", "old");
  // The steward leader backs up a cluster with no backup at once ("no backup of this cluster
  // yet"). Taken after ours, that one would be the newest, and the deltas would follow it, not
  // ours (seen in CI): wait for it first, so ours is the newest.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto j =
            nlohmann::json::parse(c.Ctl({"list-backups", "-o", "json"}).output, nullptr, false);
        return j.is_array() && !j.empty();
      },
      30s))
      << c.Logs();
  return TakeBackup(c);
}

TEST(DeltaTest, TotalLossBringsBackTheWritesAfterTheFullBackupAcrossALeaderChange) {
  TestCluster c(kTotalLoss, 3, 3, kFastLeader, kDeltas);
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  // More writes than kBusy (delta_writer.cc): the leader reads them in catch-ups, closing and
  // reopening its watch, which must neither skip nor repeat a revision.
  for (int i = 0; i < 150; ++i) Write(c, absl::StrCat("/it/d", i), absl::StrCat("v", i));
  Write(c, "/it/over", "new");
  Write(c, "/it/gone", std::nullopt);
  int64_t last = Write(c, "/it/d19", "v19 again");
  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();

  // The steward leader dies with changes on the way: the next one goes on from the store.
  const int leader = StewardLeader(c);
  ASSERT_GE(leader, 0) << c.Logs();
  c.SignalAgent(leader, SIGKILL);
  for (int i = 150; i < 300; ++i) Write(c, absl::StrCat("/it/d", i), absl::StrCat("v", i));
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
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(Get(c, i % 3, absl::StrCat("/it/d", i)),
              i == 19 ? std::string("v19 again") : absl::StrCat("v", i))
        << i << "\n"
        << c.Logs();
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
  RunResult refused =
      c.Ctl({"restore-backup", "--to-revision", std::to_string(last + 1000), "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("refusing to restore"), std::string::npos) << refused.output;
  EXPECT_EQ(Get(c, 0, "/it/late"), "after the point");

  RunResult r =
      c.Ctl({"restore-backup", "--to-revision", std::to_string(mid), "--yes", "--wait", "120"},
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

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A whole second that every revision received so far is before and every later one after:
// what `--to-time` (whole seconds) can name between two writes.
int64_t SecondBetweenWrites() {
  std::this_thread::sleep_for(1100ms);
  const int64_t second = NowMs() / 1000;
  while (NowMs() < (second + 1) * 1000 + 100) std::this_thread::sleep_for(50ms);
  return second;
}

// The stored delta of `base` (file store, cluster it<subnet>) that holds `revision`:
// <from>-<to>-<node>.delta.zst.
std::string DeltaHolding(const TestCluster& c, int subnet, const std::string& base,
                         int64_t revision) {
  const fs::path dir =
      fs::path(c.Root()) / "backups" / absl::StrCat("it", subnet) / "deltas" / base;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".delta.zst")) continue;
    std::vector<std::string> parts = absl::StrSplit(name, '-');
    int64_t from = 0, to = 0;
    if (parts.size() >= 3 && absl::SimpleAtoi(parts[0], &from) && absl::SimpleAtoi(parts[1], &to) &&
        from < revision && revision <= to) {
      return e.path().string();
    }
  }
  return "";
}

TEST(DeltaTest, ToTimeAndATamperedDeltaInTheMiddleOfTheChain) {
  TestCluster c(kTamperedAndTime, 3, 3, kFastLeader, kDeltas);
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  // Three writes, each in a delta of its own (the chain reaches one before the next is made),
  // with a whole second between the first two and after the third.
  const int64_t r1 = Write(c, "/it/t1", "one");
  ASSERT_TRUE(WaitChainReaches(c, base, r1)) << Chain(c, base).dump() << c.Logs();
  const int64_t between = SecondBetweenWrites();
  const int64_t r2 = Write(c, "/it/t2", "two");
  ASSERT_TRUE(WaitChainReaches(c, base, r2)) << Chain(c, base).dump() << c.Logs();
  const int64_t r3 = Write(c, "/it/t3", "three");
  ASSERT_TRUE(WaitChainReaches(c, base, r3)) << Chain(c, base).dump() << c.Logs();
  const int64_t after_all = SecondBetweenWrites();

  // --to-time: the state as of a second between the first and the second write.
  RunResult r =
      c.Ctl({"restore-backup", "--to-time", std::to_string(between), "--yes", "--wait", "120"},
            true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  EXPECT_NE(r.output.find(base), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/t1"), "one");
  EXPECT_EQ(Get(c, 1, "/it/t2"), "<absent>") << "written after the time asked for";
  EXPECT_EQ(Get(c, 2, "/it/t3"), "<absent>");
  Write(c, "/it/t4", "after the first restore");

  // The delta holding the second write is damaged in the store: the chain stops before it.
  const std::string damaged = DeltaHolding(c, kTamperedAndTime, base, r2);
  ASSERT_FALSE(damaged.empty()) << "no delta of " << base << " holds revision " << r2;
  ASSERT_NE(DeltaHolding(c, kTamperedAndTime, base, r3), damaged)
      << "the third write must be in a later delta";
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 8);
    f.seekg(size / 2);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x5a);
    f.seekp(size / 2);
    f.write(&b, 1);
  }
  // Asked for a point past the damage: refused, nothing changed.
  RunResult refused = c.Ctl({"restore-backup", base, "--to-revision", std::to_string(r3), "--yes"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("refusing to restore"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("sha256 mismatch"), std::string::npos) << refused.output;
  EXPECT_EQ(Get(c, 0, "/it/t4"), "after the first restore") << "a refused restore changes nothing";

  // Asked for a time past the damage: the restore stops at the last good delta and says so.
  r = c.Ctl(
      {"restore-backup", base, "--to-time", std::to_string(after_all), "--yes", "--wait", "120"},
      true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  EXPECT_NE(r.output.find("stop at revision"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sha256 mismatch"), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/t1"), "one");
  EXPECT_EQ(Get(c, 1, "/it/t2"), "<absent>") << "in the damaged delta";
  EXPECT_EQ(Get(c, 2, "/it/t3"), "<absent>") << "after the damaged delta";
  EXPECT_EQ(Get(c, 0, "/it/t4"), "<absent>") << "written after that backup's chain";

  // The damaged delta's object lost, its record kept: the same stop, not "cannot read" (the
  // record is written after the object and deleted before it, so the object was lost).
  Write(c, "/it/t5", "after the second restore");
  std::error_code gone;
  ASSERT_TRUE(fs::remove(damaged, gone)) << damaged << ": " << gone.message();
  r = c.Ctl(
      {"restore-backup", base, "--to-time", std::to_string(after_all), "--yes", "--wait", "120"},
      true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  EXPECT_NE(r.output.find("stop at revision"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("its object is missing"), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/t1"), "one");
  EXPECT_EQ(Get(c, 1, "/it/t2"), "<absent>") << "in the lost delta";
  EXPECT_EQ(Get(c, 2, "/it/t5"), "<absent>") << "written after that backup's chain";

  // list-backups reads only the deltas' records (reading every delta would cost a download
  // each): a missing delta shows there as where the chain stops.
  std::error_code ec;
  fs::remove(damaged, ec);
  fs::remove(damaged.substr(0, damaged.size() - std::string(".delta.zst").size()) + ".json", ec);
  const nlohmann::json chain = Chain(c, base);
  EXPECT_NE(chain.value("stopped", ""), "") << chain.dump();
  EXPECT_GE(chain.value("to_revision", int64_t{0}), r1) << chain.dump();
  EXPECT_LT(chain.value("to_revision", int64_t{0}), r2) << chain.dump();
}

// A process's peak resident set (VmHWM in /proc/<pid>/status), in bytes; 0 if unknown.
uint64_t PeakRss(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("VmHWM:")) continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t kib = 0;
    if (f.size() >= 2 && absl::SimpleAtoi(f[1], &kib)) return kib * 1024;
  }
  return 0;
}

// Issue 35: a burst of large writes, faster than the leader stores deltas, took its agent to
// 459 MiB. Its memory stays bounded, and every write of the burst is in the chain, each
// revision whole (some are transactions of several large puts: more than etcd's 1.5 MiB
// message bound, so etcd splits them across watch messages).
TEST(DeltaTest, ABurstOfLargeWritesKeepsTheLeadersMemoryBoundedAndEveryWriteInTheChain) {
  constexpr uint64_t kMiB = 1u << 20;
  constexpr uint64_t kPeakBound = 96 * kMiB;
  constexpr size_t kValueBytes = 100 * 1024;
  constexpr int kPutsPerTxn = 12;  // 1.2 MiB: under etcd's request bound, over half of it
  constexpr auto kBurstFor = 15s;
  TestCluster c(kBurst, 3, 3, kFastLeader,
                "backup:\n  store: file://ROOT/backups\n  interval: 1h\n  delta_interval: 2s\n");
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = StewardLeader(c)) >= 0; }, 30s)) << c.Logs();

  // What each revision of the burst put: key -> hash of the value, in the txn's order.
  std::mutex mu;
  std::map<int64_t, std::vector<std::pair<std::string, size_t>>> written;
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  const auto until = std::chrono::steady_clock::now() + kBurstFor;
  auto writer = [&](int seed) {
    EtcdClient w = c.Client(c.ClientUrls());
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    std::string value(kValueBytes, '\0');
    while (std::chrono::steady_clock::now() < until && !failed.load()) {
      const int op = next.fetch_add(1);
      const int puts = op % 8 == 0 ? kPutsPerTxn : 1;
      etcdserverpb::TxnRequest txn;
      std::vector<std::pair<std::string, size_t>> these;
      for (int p = 0; p < puts; ++p) {
        // Random bytes: zstd cannot make them smaller, as it cannot make real traffic much so.
        for (size_t i = 0; i + 8 <= value.size(); i += 8) {
          const uint64_t r = rng();
          std::memcpy(&value[i], &r, 8);
        }
        const std::string key = absl::StrCat("/burst/k", (op * kPutsPerTxn + p) % 400);
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(key);
        put->set_value(value);
        these.emplace_back(key, std::hash<std::string>{}(value));
      }
      auto r = w.Txn(txn);
      if (!r.ok()) {
        ADD_FAILURE() << "txn " << op << ": " << r.status();
        failed.store(true);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      written[r->header().revision()] = std::move(these);
    }
  };
  std::vector<std::thread> writers;
  for (int i = 0; i < 3; ++i) writers.emplace_back(writer, i + 1);
  for (auto& t : writers) t.join();
  ASSERT_FALSE(failed.load()) << c.Logs();
  ASSERT_FALSE(written.empty());
  const int64_t last = written.rbegin()->first;
  uint64_t bytes = 0;
  for (const auto& [rev, puts] : written) bytes += puts.size() * kValueBytes;
  std::cerr << "burst: " << written.size() << " revisions, " << bytes / kMiB << " MiB in "
            << std::chrono::duration_cast<std::chrono::seconds>(kBurstFor).count() << "s\n";

  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();
  EXPECT_EQ(Chain(c, base).value("stopped", "?"), "") << Chain(c, base).dump();
  ASSERT_EQ(StewardLeader(c), leader) << "the measured leader must have led throughout";

  // The leader's peak: the other agents read no watch and stay small.
  for (int i = 0; i < 3; ++i) {
    std::cerr << "agent n" << i + 1 << (i == leader ? " (leader)" : "") << ": peak RSS "
              << PeakRss(c.AgentPid(i)) / kMiB << " MiB\n";
  }
  const uint64_t peak = PeakRss(c.AgentPid(leader));
  ASSERT_GT(peak, 0u);
  EXPECT_LT(peak, kPeakBound) << "the leader's agent peaked at " << peak / kMiB << " MiB";
  // The leader says how far its deltas reach (and whether they fall behind) on /leader.
  const RunResult page = c.AdminGet(leader, "/leader");
  std::cerr << "/leader: " << page.output;
  EXPECT_NE(page.output.find("delta backups: backup " + base + " + "), std::string::npos)
      << page.output;
  const RunResult metrics = c.AdminGet(leader, "/metrics");
  EXPECT_NE(metrics.output.find("\nsteward_delta_backup_behind_revisions "), std::string::npos)
      << metrics.output;

  // Every revision of the burst is in the chain, whole and in order, and nothing else of it.
  auto store = NewFileStore(c.Root() + "/backups");
  auto listed = ListBackups(*store, absl::StrCat("it", kBurst));
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::optional<BackupMeta> meta;
  for (const auto& b : *listed) {
    if (b.name == base && b.meta) meta = b.meta;
  }
  ASSERT_TRUE(meta.has_value()) << base;
  std::map<int64_t, std::vector<std::pair<std::string, size_t>>> stored;
  absl::Status s = ForEachDeltaRevision(*store, *meta, last, [&](const backup::DeltaRevision& r) {
    for (const auto& e : r.events()) {
      if (!e.kv().key().starts_with("/burst/")) continue;
      stored[r.revision()].emplace_back(e.kv().key(), std::hash<std::string>{}(e.kv().value()));
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(stored.size(), written.size());
  size_t wrong = 0;
  for (const auto& [rev, puts] : written) {
    auto it = stored.find(rev);
    if (it == stored.end() || it->second != puts) {
      if (++wrong <= 5) {
        ADD_FAILURE() << "revision " << rev << ": " << puts.size() << " puts written, "
                      << (it == stored.end() ? 0 : it->second.size()) << " in the chain";
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// Issue 34, part 1: a drill replays the backup's deltas and compares at the revision they reach,
// not at the full backup's: the writes after it (a put under a lease, a revision of 120 puts, a
// delete) are proven too, across the revisions the deltas skip (the agents' own writes). A
// delta damaged in the store fails the drill and says so.
TEST(DeltaTest, ADrillReplaysTheDeltasAndComparesAtTheRevisionTheyReach) {
  TestCluster c(kDrillWithDeltas, 3, 3, kFastLeader, kDeltas);
  const std::string base = StartWithABackup(c);
  ASSERT_FALSE(base.empty()) << c.Logs();
  EtcdClient w = c.Client(c.ClientUrls());
  auto lease = w.LeaseGrant(600s);
  ASSERT_TRUE(lease.ok()) << lease.status();
  etcdserverpb::TxnRequest leased;
  auto* put = leased.add_success()->mutable_request_put();
  put->set_key("/it/leased");
  put->set_value("under a lease");
  put->set_lease(*lease);
  ASSERT_TRUE(w.Txn(leased).ok());
  etcdserverpb::TxnRequest many;
  for (int i = 0; i < 120; ++i) {
    auto* p = many.add_success()->mutable_request_put();
    p->set_key(absl::StrCat("/it/many/", i));
    p->set_value(std::string(100, 'a' + i % 26));
  }
  ASSERT_TRUE(w.Txn(many).ok());
  Write(c, "/it/gone", std::nullopt);
  const int64_t first = Write(c, "/it/over", "new");
  ASSERT_TRUE(WaitChainReaches(c, base, first)) << Chain(c, base).dump() << c.Logs();
  std::this_thread::sleep_for(1500ms);  // the agents write their own status meanwhile
  const int64_t last = Write(c, "/it/last", "the last write");
  ASSERT_TRUE(WaitChainReaches(c, base, last)) << Chain(c, base).dump() << c.Logs();

  const std::string scratch = c.Root() + "/scratch";
  RunResult ok =
      c.Ctl({"verify-backup", "--latest", "--scratch", scratch, "-o", "json"}, true, 120s);
  ASSERT_EQ(ok.exit_code, 0) << ok.output << c.Logs();
  // The JSON after the line the drill starts with (on stderr).
  auto j = nlohmann::json::parse(
      ok.output.substr(std::min(ok.output.find("\n{"), ok.output.size())), nullptr, false);
  ASSERT_TRUE(j.is_object()) << ok.output;
  EXPECT_EQ(j.value("backup", ""), base);
  EXPECT_GE(j.value("deltas", 0), 1) << ok.output;
  EXPECT_GE(j.value("to_revision", int64_t{0}), last) << "compared at the deltas' end\n"
                                                      << ok.output;
  EXPECT_GT(j.value("to_revision", int64_t{0}), j.value("revision", int64_t{0})) << ok.output;
  EXPECT_NE(j.value("compared", "").find("every key"), std::string::npos) << ok.output;
  EXPECT_NE(j.value("compared", "").find("delta(s))"), std::string::npos) << ok.output;
  EXPECT_NE(j.value("compared", "").find("and the values changed since"), std::string::npos)
      << "the base by etcd's hash, the deltas' changes value by value\n"
      << ok.output;
  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find("deltas to rev"), std::string::npos) << list.output;

  // One delta damaged in the store: the drill fails and names it.
  const std::string damaged = DeltaHolding(c, kDrillWithDeltas, base, last);
  ASSERT_FALSE(damaged.empty()) << "no delta of " << base << " holds revision " << last;
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 8);
    f.seekp(size / 2);
    f.write("\x5a\x5a", 2);
  }
  RunResult failed = c.Ctl({"verify-backup", base, "--scratch", scratch}, true, 120s);
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("FAILED: the backup's deltas do not check out"), std::string::npos)
      << failed.output;
  EXPECT_NE(failed.output.find("sha256 mismatch"), std::string::npos) << failed.output;

  // The delta before it gone from the store (its meta): the chain has a gap, and a restore now
  // would stop before it, so the drill fails even though what is there matches.
  const std::string earlier = DeltaHolding(c, kDrillWithDeltas, base, first);
  ASSERT_FALSE(earlier.empty());
  ASSERT_NE(earlier, damaged) << "the first and the last write must be in different deltas";
  const std::string earlier_meta =
      earlier.substr(0, earlier.size() - std::string(".delta.zst").size()) + ".json";
  ASSERT_TRUE(fs::remove(earlier_meta)) << earlier_meta;
  RunResult gap = c.Ctl({"verify-backup", base, "--scratch", scratch}, true, 120s);
  EXPECT_EQ(gap.exit_code, 1) << gap.output;
  EXPECT_NE(gap.output.find("but the backup's deltas stop at revision"), std::string::npos)
      << gap.output;
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(scratch)) {
    left += e.path().filename().string().rfind("steward-drill-", 0) == 0;
  }
  EXPECT_EQ(left, 0u) << "the scratch dir is removed";
}

}  // namespace
}  // namespace steward::testing
