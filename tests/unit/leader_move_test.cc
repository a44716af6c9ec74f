// reconcile/leader_move.h: etcd leadership off a slow disk, one case per rule.
#include "reconcile/leader_move.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string PeerUrl(int i) { return absl::StrCat("http://10.0.0.", i, ":2380"); }

// Three healthy voters n1..n3 (n1 etcd's leader), every disk fast (1 ms); n1's slow for 90 s.
LeaderMoveView Base() {
  LeaderMoveView v;
  for (int i = 1; i <= 3; ++i) {
    NodeView n;
    n.name = absl::StrCat("n", i);
    n.peer_url = PeerUrl(i);
    n.wal_fsync_p99_ms = 1;
    n.backend_commit_p99_ms = 2;
    v.nodes.push_back(n);
    MemberView m;
    m.id = 0x100 + static_cast<uint64_t>(i);
    m.name = n.name;
    m.peer_url = n.peer_url;
    m.started = m.healthy = true;
    m.is_etcd_leader = i == 1;
    v.members.push_back(m);
  }
  v.nodes[0].wal_fsync_p99_ms = 149;
  v.nodes[0].disk_slow = "WAL fsync p99 149 ms (etcd's guidance: under 10 ms)";
  v.leader_slow_for = seconds(90);
  return v;
}

TEST(LeaderMove, AFastLeaderStays) {
  LeaderMoveView v = Base();
  v.nodes[0].disk_slow.clear();
  v.nodes[0].wal_fsync_p99_ms = 1;
  const LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.to, 0u);
  EXPECT_EQ(m.reason, "");
}

TEST(LeaderMove, LM2ToTheFastestHealthyVoter) {
  LeaderMoveView v = Base();
  v.nodes[1].wal_fsync_p99_ms = 4;  // n3 is faster
  const LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.from, 0x101u);
  EXPECT_EQ(m.to, 0x103u);
  EXPECT_NE(m.reason.find("moving etcd leadership to n3"), std::string::npos) << m.reason;
  // Not to an unhealthy one, nor a learner.
  v.members[2].healthy = false;
  EXPECT_EQ(DecideLeaderMove(v).to, 0x102u);
  v.members[1].is_learner = true;
  EXPECT_EQ(DecideLeaderMove(v).to, 0u);
}

TEST(LeaderMove, LM1OnlyOnceSlowForTheSustainTime) {
  LeaderMoveView v = Base();
  v.leader_slow_for = seconds(59);
  const LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.to, 0u);
  EXPECT_NE(m.reason.find("moves if it stays slow for 60s"), std::string::npos) << m.reason;
}

TEST(LeaderMove, LM3EveryDiskSlowOrNoneMuchFasterNothingMoves) {
  LeaderMoveView v = Base();
  for (auto& n : v.nodes) {
    n.wal_fsync_p99_ms = 140;
    n.disk_slow = "WAL fsync p99 140 ms (etcd's guidance: under 10 ms)";
  }
  LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.to, 0u);
  EXPECT_NE(m.reason.find("leadership stays"), std::string::npos) << m.reason;
  // Within the guidance but not twice as fast: stays.
  v = Base();
  v.nodes[0].wal_fsync_p99_ms = 12;
  v.nodes[1].wal_fsync_p99_ms = v.nodes[2].wal_fsync_p99_ms = 9;
  v.nodes[1].backend_commit_p99_ms = v.nodes[2].backend_commit_p99_ms = 9;
  EXPECT_EQ(DecideLeaderMove(v).to, 0u);
  // Unknown figures are no target.
  v = Base();
  v.nodes[1].wal_fsync_p99_ms = v.nodes[1].backend_commit_p99_ms = -1;
  v.nodes[2].wal_fsync_p99_ms = v.nodes[2].backend_commit_p99_ms = -1;
  EXPECT_EQ(DecideLeaderMove(v).to, 0u);
}

TEST(LeaderMove, LM4AtMostOnceInTheQuietTime) {
  LeaderMoveView v = Base();
  v.since_last_move = seconds(120);
  LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.to, 0u);
  EXPECT_NE(m.reason.find("moves at most once in 300s"), std::string::npos) << m.reason;
  v.since_last_move = seconds(301);
  EXPECT_NE(DecideLeaderMove(v).to, 0u);
}

TEST(LeaderMove, LM5OffOnlyNames) {
  LeaderMoveView v = Base();
  v.enabled = false;
  const LeaderMove m = DecideLeaderMove(v);
  EXPECT_EQ(m.to, 0u);
  EXPECT_NE(m.reason.find("has a slow disk"), std::string::npos);
  EXPECT_NE(m.reason.find("cluster.move_leader_off_slow_disk off"), std::string::npos);
}

}  // namespace
}  // namespace steward
