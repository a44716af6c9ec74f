// DecideDefrag (reconcile/defrag_rule.h): a table per rule, and what switching one off allows.
#include "reconcile/defrag_rule.h"

#include <gtest/gtest.h>

#include "common/duration.h"
#include "common/rules.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
constexpr int64_t kMiB = int64_t{1} << 20;

// One rule off for the scope.
struct ScopedRuleOff {
  explicit ScopedRuleOff(const char* rule) { SetRulesOffForTesting({rule}); }
  ~ScopedRuleOff() { SetRulesOffForTesting({}); }
};

// Three healthy voters, n1 the etcd leader; n2 and n3 mostly free pages (500 MiB files, 100
// MiB in use: 80 %); n1 at 60 %. Every node has 10 GiB free.
DefragRuleView Fragmented() {
  DefragRuleView v;
  for (int i = 1; i <= 3; ++i) {
    MemberView m;
    m.id = static_cast<uint64_t>(i);
    m.name = "n" + std::to_string(i);
    m.peer_url = "https://10.0.0." + std::to_string(i) + ":2380";
    m.started = m.healthy = true;
    m.raft_index = 5000;
    m.is_etcd_leader = i == 1;
    m.db_size = 500 * kMiB;
    m.db_size_in_use = i == 1 ? 200 * kMiB : 100 * kMiB;
    v.members.push_back(m);
    NodeView n;
    n.name = m.name;
    n.peer_url = m.peer_url;
    n.data_free_bytes = 10240 * kMiB;
    n.wal_fsync_p99_ms = i == 3 ? 1.0 : 4.0;
    n.backend_commit_p99_ms = 2.0;
    v.nodes.push_back(n);
  }
  v.leader_raft_index = 5000;
  return v;
}

TEST(DefragRule, DR1_OffOrNothingFragmentedDoesNothing) {
  DefragRuleView v = Fragmented();
  v.above_percent = 0;
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kNothing);
  v = Fragmented();
  v.above_percent = 85;  // none is 85 % free
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kNothing);
  v = Fragmented();
  v.min_size = 600 * kMiB;  // every file is smaller than that
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kNothing);
  EXPECT_EQ(FragmentedPercent(v.members[1]), 80);
  MemberView unknown;
  EXPECT_EQ(FragmentedPercent(unknown), 0);
}

TEST(DefragRule, DR2_WaitsWhileAnyMemberIsNotWholeAndNamesIt) {
  struct Case {
    const char* what;
    void (*spoil)(MemberView&);
    const char* says;
  } cases[] = {
      {"unhealthy", [](MemberView& m) { m.healthy = false; }, "n2 is unhealthy"},
      {"not started", [](MemberView& m) { m.started = false; }, "n2 has not started"},
      {"learner", [](MemberView& m) { m.is_learner = true; }, "n2 is a learner"},
      {"diverged", [](MemberView& m) { m.diverged = "hash 1 != 2"; }, "n2 holds data that differs"},
      {"behind", [](MemberView& m) { m.raft_index = 1000; }, "n2 is 4000 entries behind"},
  };
  for (const Case& c : cases) {
    DefragRuleView v = Fragmented();
    c.spoil(v.members[1]);
    const DefragRuleDecision d = DecideDefrag(v);
    EXPECT_EQ(d.kind, DefragRuleDecision::kWait) << c.what;
    EXPECT_EQ(d.rule, "DR2") << c.what;
    EXPECT_NE(d.reason.find(c.says), std::string::npos) << c.what << ": " << d.reason;
  }
  // A member a few entries behind (writes in flight) is whole.
  DefragRuleView v = Fragmented();
  v.members[2].raft_index = 4990;
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kDefrag);
}

TEST(DefragRule, DR2_OffDefragmentsBesideAnUnhealthyMember) {
  DefragRuleView v = Fragmented();
  v.members[2].healthy = false;
  ScopedRuleOff off("DR2");
  const DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag) << "the rule prevents this";
}

TEST(DefragRule, DR3_WaitsForOtherWork) {
  DefragRuleView v = Fragmented();
  v.busy = "another step first (adding n4)";
  const DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kWait);
  EXPECT_EQ(d.rule, "DR3");
  EXPECT_NE(d.reason.find("adding n4"), std::string::npos);
}

TEST(DefragRule, DR4_WaitsOutsideTheWindow) {
  DefragRuleView v = Fragmented();
  v.outside_window = OutsideWindow("02:00-05:00", 12 * 3600);  // noon UTC
  ASSERT_FALSE(v.outside_window.empty());
  const DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.rule, "DR4");
  EXPECT_NE(d.reason.find("opens in 14h0m"), std::string::npos) << d.reason;
  // Inside, and a window across midnight.
  EXPECT_EQ(OutsideWindow("02:00-05:00", 3 * 3600), "");
  EXPECT_EQ(OutsideWindow("22:00-04:00", 23 * 3600), "");
  EXPECT_EQ(OutsideWindow("22:00-04:00", 1 * 3600), "");
  EXPECT_NE(OutsideWindow("22:00-04:00", 5 * 3600), "");
  EXPECT_EQ(OutsideWindow("", 5 * 3600), "");
  for (const char* bad : {"2:00-05:00", "02:00", "25:00-01:00", "02:00-02:00", "ab:cd-01:00"}) {
    EXPECT_FALSE(ParseDailyWindow(bad).has_value()) << bad;
  }
}

TEST(DefragRule, DR5_PausesBetweenMembers) {
  DefragRuleView v = Fragmented();
  v.pause = milliseconds(30000);
  v.since_last = milliseconds(10000);
  DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.rule, "DR5");
  EXPECT_NE(d.reason.find("waits 21s"), std::string::npos) << d.reason;
  v.since_last = milliseconds(30000);
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kDefrag);
}

TEST(DefragRule, DR6_FollowersFirstMostFragmentedFirstThenTheLeaderAfterAMove) {
  DefragRuleView v = Fragmented();
  v.members[2].db_size_in_use = 50 * kMiB;  // n3 90 %, n2 80 %
  DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag);
  EXPECT_EQ(d.name, "n3");
  // n2 and n3 done: the leader is next, and leadership moves first, to the fastest disk (n3).
  v.members[1].db_size_in_use = v.members[2].db_size_in_use = 490 * kMiB;
  d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kMoveLeader);
  EXPECT_EQ(d.name, "n1");
  EXPECT_EQ(d.move_to_name, "n3");
  // Once it is a follower it is defragmented.
  v.members[0].is_etcd_leader = false;
  v.members[2].is_etcd_leader = true;
  d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag);
  EXPECT_EQ(d.name, "n1");
}

TEST(DefragRule, DR6_TheOnlyMemberIsDefragmentedAndSaidSo) {
  DefragRuleView v = Fragmented();
  v.members.resize(1);
  const DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag);
  EXPECT_NE(d.reason.find("the only member"), std::string::npos);
}

TEST(DefragRule, DR6_OffDefragmentsTheLeaderWhileItLeads) {
  DefragRuleView v = Fragmented();
  v.members[1].db_size_in_use = v.members[2].db_size_in_use = 490 * kMiB;
  ScopedRuleOff off("DR6");
  const DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag) << "the rule prevents this";
  EXPECT_EQ(d.name, "n1");
}

TEST(DefragRule, DR7_NoRoomForTheCopyPassesTheMemberOverAndWaitsNamingTheShortfall) {
  DefragRuleView v = Fragmented();
  v.members[2].db_size_in_use = 50 * kMiB;  // n3 is next
  v.nodes[2].data_free_bytes = 100 * kMiB;  // needs 50 + 128 MiB
  DefragRuleDecision d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kDefrag);
  EXPECT_EQ(d.name, "n2") << "n3 has no room: the next one goes first";
  v.nodes[0].data_free_bytes = v.nodes[1].data_free_bytes = 0;
  d = DecideDefrag(v);
  EXPECT_EQ(d.kind, DefragRuleDecision::kWait);
  EXPECT_EQ(d.rule, "DR7");
  EXPECT_EQ(d.shortfall, 78 * kMiB);
  EXPECT_EQ(d.name, "n3");
  EXPECT_NE(d.reason.find("short by 81788928 bytes"), std::string::npos) << d.reason;
  // Unknown: not assumed.
  for (auto& n : v.nodes) n.data_free_bytes = -1;
  d = DecideDefrag(v);
  EXPECT_EQ(d.rule, "DR7");
  EXPECT_NE(d.reason.find("reports no free space"), std::string::npos);
  ScopedRuleOff off("DR7");
  EXPECT_EQ(DecideDefrag(v).kind, DefragRuleDecision::kDefrag) << "the rule prevents this";
}

}  // namespace
}  // namespace steward
