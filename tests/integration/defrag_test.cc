// Defragmentation by rule (reconcile/defrag_rule.h) against real etcd: a cluster whose backend
// files are mostly free pages after a compaction is defragmented by the steward leader, one
// member at a time, followers first, the etcd leader after leadership moved off it; not while
// a member is down; and a member without room for the copy is passed over, its shortfall named.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

// One subnet per test, used by no other test file (127.0.116-117.x).
enum Subnet { kByRule = 116, kNoRoom = 117 };

// Small enough for a test: files of 10 MiB and more count, 2 s between members.
constexpr char kRule[] =
    "  defrag_min_size: 10MiB\n  defrag_pause: 2s\n  leader_lease_ttl: 2s\n"
    "  reconcile_interval: 300ms\n  idle_interval: 1s\n";

// Writes about 24 MiB of values (8 keys of 100 KB, each overwritten 30 times), then compacts
// physically to the last revision: the backend files stay at their size, most of it free.
void Fragment(const TestCluster& c) {
  EtcdClient e = c.Client(c.ClientUrls());
  const std::string value(100 * 1024, 'v');
  for (int round = 0; round < 30; ++round) {
    for (int k = 0; k < 8; ++k) {
      ASSERT_TRUE(e.Put(absl::StrCat("/defrag/k", k), value).ok());
    }
  }
  auto st = e.Status(c.ClientUrl(0), 5s);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(e.Compact(st->revision, true, 30s).ok());
}

// Each member's backend file size by name.
std::map<std::string, int64_t> DbSizes(const TestCluster& c) {
  std::map<std::string, int64_t> out;
  EtcdClient e = c.Client(c.ClientUrls());
  for (int i = 0; i < c.Nodes(); ++i) {
    if (auto st = e.Status(c.ClientUrl(i), 5s); st.ok())
      out[absl::StrCat("n", i + 1)] = st->db_size;
  }
  return out;
}

// The history's records with `action`, oldest first.
std::vector<nlohmann::json> Records(const TestCluster& c, const std::string& action) {
  std::vector<nlohmann::json> out;
  auto r = c.Ctl({"history", "-o", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (e.value("action", std::string()) == action) out.push_back(e);
  }
  return out;
}

// The member a defrag record names: its reason starts "defragmenting n2 (...".
std::string Defragmented(const nlohmann::json& record) {
  const std::string reason = record.value("reason", std::string());
  const std::string head = "defragmenting ";
  if (reason.rfind(head, 0) != 0) return "";
  return reason.substr(head.size(), reason.find(' ', head.size()) - head.size());
}

// While a member is down, a due defrag waits and says so; once it is back, every member is
// defragmented in turn, the etcd leader last and after leadership moved off it, and each file
// shrinks to a fraction of its size.
TEST(DefragTest, AFragmentedClusterIsDefragmentedOneMemberAtATimeLeaderLastAfterAMove) {
  TestCluster c(kByRule, 3, 3, kRule);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  const int down = EtcdLeader(c) == 2 ? 1 : 2;  // a follower
  c.SignalAgent(down, SIGTERM);                 // the agent stops its etcd too
  ASSERT_FALSE(c.AgentRunning(down));
  Fragment(c);
  const std::string down_name = absl::StrCat("n", down + 1);
  RunResult status;
  EXPECT_TRUE(WaitFor(
      [&] {
        status = c.Ctl({"status"});
        return status.output.find(absl::StrCat("defragmentation due")) != std::string::npos &&
               status.output.find(absl::StrCat("member ", down_name)) != std::string::npos;
      },
      30s))
      << status.output;
  EXPECT_TRUE(Records(c, "defrag").empty()) << "defragmented while " << down_name << " was down";

  c.StartAgent(down);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  const auto before = DbSizes(c);
  const int leader_before = EtcdLeader(c);
  ASSERT_GE(leader_before, 0);
  std::vector<nlohmann::json> done;
  EXPECT_TRUE(WaitFor([&] { return (done = Records(c, "defrag")).size() >= 3; }, 120s))
      << c.Ctl({"history"}).output << c.Logs();
  ASSERT_EQ(done.size(), 3u) << c.Ctl({"history"}).output;
  std::set<std::string> names;
  for (const auto& r : done) {
    names.insert(Defragmented(r));
    EXPECT_EQ(r.value("result", std::string()).rfind("ok: ", 0), 0u) << r.dump();
  }
  EXPECT_EQ(names, (std::set<std::string>{"n1", "n2", "n3"}));
  const std::string leader_name = absl::StrCat("n", leader_before + 1);
  EXPECT_EQ(Defragmented(done.back()), leader_name) << "the etcd leader goes last";
  // Leadership moved off it before its turn: a move-leader record between the second defrag
  // and the last, and it was not the leader while it was defragmented.
  const std::vector<std::string> actions = HistoryActions(c);
  int defrags = 0;
  bool moved_before_last = false;
  for (const auto& a : actions) {
    if (a == "defrag") ++defrags;
    if (a == "move-leader" && defrags == 2) moved_before_last = true;
  }
  EXPECT_TRUE(moved_before_last) << c.Ctl({"history"}).output;
  const auto after = DbSizes(c);
  for (const auto& [name, size] : before) {
    ASSERT_TRUE(after.count(name));
    EXPECT_LT(after.at(name) * 2, size) << name << ": " << size << " -> " << after.at(name);
  }
  // Below the threshold now: nothing more is done.
  std::this_thread::sleep_for(5s);
  EXPECT_EQ(Records(c, "defrag").size(), 3u) << c.Ctl({"history"}).output;
  const RunResult metrics = c.AdminGet(StewardLeader(c), "/metrics");
  EXPECT_NE(metrics.output.find("steward_member_db_free_percent{member=\"n1\"}"),
            std::string::npos);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Get(c, i, "/defrag/k0").has_value()) << "n" << i + 1;
  }
}

// A loop-mounted file system of its own for a node's data dir, filled with `fallocate` so that
// little is free.
class SmallDisk {
 public:
  SmallDisk(const std::string& image, const std::string& dir) : dir_(dir) {
    std::filesystem::create_directories(dir);
    auto mk =
        RunCommand({"/bin/sh", "-c",
                    absl::StrCat("truncate -s 512M ", image, " && mkfs.ext4 -q -F ", image,
                                 " && mount -o loop ", image, " ", dir, " && chmod 700 ", dir)},
                   60s);
    error_ = mk.exit_code == 0 ? "" : mk.output;
    mounted_ = error_.empty();
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  // Leaves about `free_mib` MiB free.
  bool LeaveFree(int free_mib) {
    auto r = RunCommand({"/bin/sh", "-c",
                         absl::StrCat("avail=$(df --output=avail -B1M ", dir_,
                                      " | tail -1); fallocate -l "
                                      "$(( (avail - ",
                                      free_mib, ") ))M ", dir_, "/filler")},
                        30s);
    return r.exit_code == 0;
  }

 private:
  std::string dir_, error_;
  bool mounted_ = false;
};

// A member whose data dir has too little room for the copy a defrag writes is passed over: the
// others are defragmented, and the leader then waits, naming the shortfall in bytes in status
// and /metrics and touching nothing on that member.
TEST(DefragTest, AMemberWithoutRoomForTheCopyIsPassedOverAndItsShortfallNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "a loop-mounted file system needs root";
  TestCluster c(kNoRoom, 3, 3, kRule);
  const int small = 2;
  SmallDisk disk(c.Root() + "/n3.img", c.DataDir(small));
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a loop device here: " << disk.error();
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  Fragment(c);
  const auto before = DbSizes(c);
  // Less than the data in use plus 128 MiB.
  ASSERT_TRUE(disk.LeaveFree(60));
  // The others are defragmented (each once its compaction is applied), then only n3 is left.
  RunResult status;
  std::set<std::string> names;
  EXPECT_TRUE(WaitFor(
      [&] {
        names.clear();
        for (const auto& r : Records(c, "defrag")) names.insert(Defragmented(r));
        status = c.Ctl({"status"});
        return names.size() >= 2 && status.output.find("n3's data dir has") != std::string::npos &&
               status.output.find("short by") != std::string::npos;
      },
      120s))
      << status.output << c.Ctl({"history"}).output;
  EXPECT_EQ(names, (std::set<std::string>{"n1", "n2"})) << c.Ctl({"history"}).output;
  EXPECT_TRUE(Has(HistoryActions(c), "defrag-wait")) << c.Ctl({"history"}).output;
  const RunResult metrics = c.AdminGet(StewardLeader(c), "/metrics");
  EXPECT_NE(metrics.output.find("steward_defrag_shortfall_bytes{member=\"n3\"}"),
            std::string::npos);
  const auto after = DbSizes(c);
  EXPECT_GE(after.at("n3"), before.at("n3")) << "n3 was defragmented without room";
}

}  // namespace
}  // namespace steward::testing
