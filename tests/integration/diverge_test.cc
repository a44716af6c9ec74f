// A member whose data silently differs (etcd/agreement.h, reconcile rules DV4-DV5): real agents
// and real etcd on 127.0.110-113.x. One byte of a stored value is changed in a stopped
// follower's bbolt file (its page structure stays valid, so etcd serves the wrong value, even to
// linearizable reads). The steward leader's HashKV check names it, sets its data aside and
// rejoins it learner-first; a backup meanwhile comes from a member that agrees.
#include <gtest/gtest.h>
#include <signal.h>
#include <zstd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "etcd/agreement.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

// One subnet per test, used by no other test file.
enum Subnet { kRepair = 110, kBackupSource = 111, kSplit = 112 };

constexpr char kChecks[] =
    "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n  idle_interval: 1s\n"
    "  hash_check_interval: 3s\n";
constexpr char kValue[] = R"({"balance":1000})";
constexpr char kFlipped[] = R"({"balance":9000})";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Changes every copy of `from` in node i's bbolt file to `to` (same length): a value's bytes,
// so the pages stay valid. The node must be stopped. Returns how many copies were changed.
int FlipInDb(const TestCluster& c, int i, const std::string& from, const std::string& to) {
  const std::string path = c.DataDir(i) + "/etcd/member/snap/db";
  std::string db = ReadFile(path);
  int n = 0;
  for (size_t at = db.find(from); at != std::string::npos; at = db.find(from, at + 1)) {
    db.replace(at, from.size(), to);
    ++n;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << db;
  return out.good() ? n : -1;
}

// A serializable read of `key` from node i's own etcd (what that member itself holds).
std::string LocalValue(const TestCluster& c, int i, const std::string& key) {
  EtcdClient e = c.Client(c.ClientUrl(i));
  auto got = e.GetLocal(key);
  if (!got.ok()) return "<error: " + std::string(got.status().message()) + ">";
  return got->value_or("<absent>");
}

// A node that is neither etcd's leader nor the steward leader, so that the member repaired
// is not the one deciding (any member may be; the test only keeps its own view simple).
int PickVictim(const TestCluster& c) {
  const int etcd_leader = EtcdLeader(c), steward_leader = StewardLeader(c);
  for (int i = 0; i < 3; ++i) {
    if (i != etcd_leader && i != steward_leader) return i;
  }
  return -1;
}

// Stops node i (agent and etcd), flips the value in its DB, starts it again.
void Diverge(TestCluster& c, int i) {
  c.SignalAgent(i, SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return !c.EtcdPid(i).has_value(); }, 20s)) << c.Logs();
  ASSERT_GE(FlipInDb(c, i, kValue, kFlipped), 1) << "the value is not in the DB file";
  c.StartAgent(i);
  ASSERT_TRUE(WaitFor([&] { return LocalValue(c, i, "/it/balance") == kFlipped; }, 30s))
      << LocalValue(c, i, "/it/balance") << c.Logs();
}

TEST(DivergeTest, AFlippedValueIsFoundAndTheMemberRepairedFromTheMajority) {
  TestCluster c(kRepair, 3, 3, kChecks, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/it/balance", kValue);
  const int victim = PickVictim(c);
  ASSERT_GE(victim, 0) << c.Logs();
  const std::string name = absl::StrCat("n", victim + 1);
  const uint64_t old_id = MemberIdOf(c, name);
  Diverge(c, victim);
  // What the issue saw: the member serves its own wrong value, even linearizably.
  EXPECT_EQ(Get(c, victim, "/it/balance"), kFlipped);

  // The leader names it, sets its data aside and rejoins it: a new member ID on the same node.
  ASSERT_TRUE(WaitFor(
      [&] {
        const uint64_t id = MemberIdOf(c, name);
        return id != 0 && id != old_id;
      },
      120s))
      << c.Ctl({"status"}).output << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitFor([&] { return LocalValue(c, i, "/it/balance") == kValue; }, 30s))
        << "n" << i + 1 << ": " << LocalValue(c, i, "/it/balance");
  }
  EtcdClient all = c.Client(c.ClientUrls());
  auto verdict = CompareMembers(all, 5000ms);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_TRUE(verdict->majority) << verdict->text;
  EXPECT_EQ(verdict->agreeing.size(), 3u) << verdict->text;
  EXPECT_TRUE(verdict->differing.empty()) << verdict->text;
  // The wrong data is kept for the operator, never deleted.
  bool kept = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(c.DataDir(victim) + "/removed", ec)) {
    kept = kept || std::filesystem::exists(e.path() / "member/snap/db");
  }
  EXPECT_TRUE(kept) << "the diverged member's data is not under " << c.DataDir(victim)
                    << "/removed";
  const auto actions = HistoryActions(c);
  EXPECT_TRUE(Has(actions, "diverged")) << c.Ctl({"history"}).output;
  EXPECT_TRUE(Has(actions, "remove-member")) << c.Ctl({"history"}).output;
  // Counted by the agent that led when it was found (leadership may have moved since).
  bool counted = false;
  for (int i = 0; i < 3; ++i) {
    counted =
        counted ||
        c.AdminGet(i, "/metrics").output.find("steward_hash_checks_total{result=\"differs\"}") !=
            std::string::npos;
  }
  EXPECT_TRUE(counted) << "no agent counted a hash check that found a member that differs";
}

// The snapshot's bytes, decompressed (a file store, no encryption).
std::string BackupDb(const TestCluster& c, const std::string& name) {
  const std::string z = ReadFile(
      absl::StrCat(c.Root(), "/backups/it", kBackupSource, "/backups/", name, "/snapshot.db.zst"));
  std::string out;
  ZSTD_DStream* d = ZSTD_createDStream();
  ZSTD_initDStream(d);
  ZSTD_inBuffer in{z.data(), z.size(), 0};
  std::string buf(1 << 16, '\0');
  while (in.pos < in.size) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    if (ZSTD_isError(ZSTD_decompressStream(d, &o, &in))) break;
    out.append(buf.data(), o.pos);
  }
  ZSTD_freeDStream(d);
  return out;
}

TEST(DivergeTest, ABackupComesFromAMemberThatAgrees) {
  // Repair off, so the diverged member stays while backups are taken.
  TestCluster c(kBackupSource, 3, 3, std::string(kChecks) + "  repair_diverged: false\n",
                kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/it/balance", kValue);
  // The member a backup prefers: a follower (PickBackupSource); both followers in turn.
  const int etcd_leader = EtcdLeader(c);
  ASSERT_GE(etcd_leader, 0);
  int victim = etcd_leader == 0 ? 1 : 0;
  Diverge(c, victim);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  for (int round = 0; round < 2; ++round) {
    const std::string backup = TakeBackup(c);
    ASSERT_FALSE(backup.empty()) << c.Logs();
    auto meta = nlohmann::json::parse(ReadFile(absl::StrCat(c.Root(), "/backups/it", kBackupSource,
                                                            "/backups/", backup, "/meta.json")),
                                      nullptr, false);
    EXPECT_NE(meta.value("member", std::string()), absl::StrCat("n", victim + 1)) << meta.dump();
    const std::string db = BackupDb(c, backup);
    EXPECT_NE(db.find(kValue), std::string::npos) << "the backup lacks the right value";
    EXPECT_EQ(db.find(kFlipped), std::string::npos) << "the backup holds the wrong value";
  }
  // Not repaired, but named: status says which member differs.
  ASSERT_TRUE(WaitFor(
      [&] {
        return c.Ctl({"status"}).output.find(absl::StrCat("n", victim + 1, " hold")) !=
               std::string::npos;
      },
      30s))
      << c.Ctl({"status"}).output;
  EXPECT_EQ(MemberIdOf(c, absl::StrCat("n", victim + 1)) != 0, true);
}

TEST(DivergeTest, WithNoMajorityThatAgreesNothingIsRepaired) {
  TestCluster c(kSplit, 3, 3, kChecks, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/it/balance", kValue);
  const int etcd_leader = EtcdLeader(c);
  ASSERT_GE(etcd_leader, 0);
  std::vector<int> followers;
  for (int i = 0; i < 3; ++i) {
    if (i != etcd_leader) followers.push_back(i);
  }
  std::map<std::string, uint64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids[absl::StrCat("n", i + 1)] = MemberIdOf(c, absl::StrCat("n", i + 1));
  // Both followers changed, each differently: three hashes, no majority.
  c.SignalAgent(followers[0], SIGTERM);
  c.SignalAgent(followers[1], SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return !c.EtcdPid(followers[0]) && !c.EtcdPid(followers[1]); }, 20s));
  ASSERT_GE(FlipInDb(c, followers[0], kValue, kFlipped), 1);
  ASSERT_GE(FlipInDb(c, followers[1], kValue, R"({"balance":7000})"), 1);
  c.StartAgent(followers[0]);
  c.StartAgent(followers[1]);
  ASSERT_TRUE(WaitFor(
      [&] {
        return c.Ctl({"status"}).output.find("no majority of the 3 voting members agrees") !=
               std::string::npos;
      },
      60s))
      << c.Ctl({"status"}).output << c.Logs();
  // Several checks later nothing was removed or wiped.
  std::this_thread::sleep_for(10s);
  for (const auto& [name, id] : ids) EXPECT_EQ(MemberIdOf(c, name), id) << name;
  EXPECT_FALSE(Has(HistoryActions(c), "remove-member")) << c.Ctl({"history"}).output;
}

}  // namespace
}  // namespace steward::testing
