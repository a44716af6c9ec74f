// `stewardctl retire-unmanaged`'s choice (ctl/retire.h): one table test per rule T1-T3.
#include "ctl/retire.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

// Three unmanaged voters o1..o3 (o1 the etcd leader, ids 0x901..) and `managed` healthy managed
// voters n1.. (ids 0x101..).
ClusterView Adopted(int managed) {
  ClusterView v;
  v.reachable = true;
  auto add = [&](uint64_t id, const std::string& name, const std::string& peer) {
    MemberRow r;
    r.member.id = id;
    r.member.name = name;
    r.member.peer_urls = {peer};
    r.healthy = true;
    v.members.push_back(r);
  };
  for (int i = 0; i < 3; ++i) {
    add(0x901 + static_cast<uint64_t>(i), "o" + std::to_string(i + 1),
        "http://127.0.0." + std::to_string(21 + i) + ":2380");
  }
  for (int i = 0; i < managed; ++i) {
    add(0x101 + static_cast<uint64_t>(i), "n" + std::to_string(i + 1),
        "http://127.0.0." + std::to_string(11 + i) + ":2380");
  }
  v.leader_id = 0x901;
  return v;
}

const std::map<std::string, std::string> kManaged = {{"http://127.0.0.11:2380", "n1"},
                                                     {"http://127.0.0.12:2380", "n2"},
                                                     {"http://127.0.0.13:2380", "n3"}};

TEST(RetireTest, T1_NothingGoesUntilTheAgentsGrewTheClusterToItsSize) {
  RetireStep s = NextRetirement(Adopted(2), kManaged, 3);
  EXPECT_EQ(s.kind, RetireStep::kRefuse);
  EXPECT_NE(s.reason.find("only 2 of 3 managed"), std::string::npos) << s.reason;
  ClusterView v = Adopted(3);
  v.members[4].healthy = false;  // n2
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kRefuse);
  v = Adopted(3);
  v.leader_id = 0;
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kRefuse);
  v.reachable = false;
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kRefuse);
}

TEST(RetireTest, T3_FollowersFirstTheEtcdLeaderLastThenDone) {
  ClusterView v = Adopted(3);
  RetireStep s = NextRetirement(v, kManaged, 3);
  ASSERT_EQ(s.kind, RetireStep::kRemove) << s.reason;
  EXPECT_NE(s.member_id, 0x901u) << "the etcd leader goes last";
  EXPECT_NE(s.reason.find("5 healthy of 5"), std::string::npos) << s.reason;
  v.members.erase(v.members.begin() + 1);
  v.members.erase(v.members.begin() + 1);
  s = NextRetirement(v, kManaged, 3);
  ASSERT_EQ(s.kind, RetireStep::kRemove);
  EXPECT_EQ(s.member_id, 0x901u);
  EXPECT_NE(s.reason.find("etcd leader"), std::string::npos) << s.reason;
  v.members.erase(v.members.begin());
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kDone);
}

TEST(RetireTest, T3_LearnersAndTheUnhealthyGoFirst) {
  ClusterView v = Adopted(3);
  v.members[2].healthy = false;  // o3
  EXPECT_EQ(NextRetirement(v, kManaged, 3).member_id, 0x903u);
  MemberRow l;
  l.member.id = 0x950;
  l.member.is_learner = true;
  l.member.peer_urls = {"http://127.0.0.24:2380"};
  v.members.push_back(l);
  EXPECT_EQ(NextRetirement(v, kManaged, 3).member_id, 0x950u);
}

TEST(RetireTest, T2_NoRemovalBelowQuorum) {
  // Size 1 is reached with one managed voter, but with o2 and o3 down, removing the healthy o1
  // would leave 1 healthy of 3: refused. (The unhealthy go first, which is safe.)
  ClusterView v = Adopted(1);
  v.members[1].healthy = false;
  v.members[2].healthy = false;
  RetireStep s = NextRetirement(v, kManaged, 1);
  ASSERT_EQ(s.kind, RetireStep::kRemove) << s.reason;
  EXPECT_EQ(s.member_id, 0x902u);
  v.members.erase(v.members.begin() + 1, v.members.begin() + 3);  // o2, o3 removed
  v.members[1].healthy = false;                                   // n1 down
  s = NextRetirement(v, kManaged, 0);
  EXPECT_EQ(s.kind, RetireStep::kRefuse);
  EXPECT_NE(s.reason.find("below quorum"), std::string::npos) << s.reason;
}

TEST(RetireTest, T2_TheManagedMembersMustHoldQuorumWithoutTheOthers) {
  // Five managed voters wanted three: three healthy is enough for size, and 3 of 5 is a
  // quorum. With only two of five managed healthy, the others would not hold quorum alone.
  ClusterView v = Adopted(5);
  std::map<std::string, std::string> managed = kManaged;
  managed["http://127.0.0.14:2380"] = "n4";
  managed["http://127.0.0.15:2380"] = "n5";
  EXPECT_EQ(NextRetirement(v, managed, 3).kind, RetireStep::kRemove);
  v.members[6].healthy = false;
  v.members[7].healthy = false;
  v.members[5].healthy = false;
  RetireStep s = NextRetirement(v, managed, 2);
  EXPECT_EQ(s.kind, RetireStep::kRefuse);
  EXPECT_NE(s.reason.find("would not hold a quorum"), std::string::npos) << s.reason;
}

TEST(RetireTest, AnOldMemberOnANodesPeerUrlUnderAnotherNameIsNotTheNodes) {
  // o1 runs on n1's host and peer port (the nodes reuse the old machines): it is still
  // unmanaged, so nothing is "done" while it is in the cluster.
  ClusterView v = Adopted(3);
  v.members.erase(v.members.begin() + 1, v.members.begin() + 3);  // o2, o3 retired already
  v.members[0].member.peer_urls = {"http://127.0.0.11:2380"};     // o1 on n1's peer URL
  v.members[1].member.peer_urls = {"http://127.0.0.21:2380"};     // n1 (for the count)
  std::map<std::string, std::string> managed = kManaged;
  managed["http://127.0.0.21:2380"] = "n1";
  RetireStep s = NextRetirement(v, managed, 3);
  ASSERT_EQ(s.kind, RetireStep::kRemove) << s.reason;
  EXPECT_EQ(s.member_id, 0x901u);
}

TEST(RetireTest, T4_AViewThatMixesTwoClustersRemovesNothing) {
  ClusterView v = Adopted(3);
  v.list_cluster_id = 0xc1;
  for (auto& r : v.members) {
    r.status = MemberStatus{};
    r.status->cluster_id = 0xc1;
    r.status->member_id = r.member.id;
  }
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kRemove);
  v.members[1].status->cluster_id = 0xc2;  // o2 answers for another cluster
  RetireStep s = NextRetirement(v, kManaged, 3);
  EXPECT_EQ(s.kind, RetireStep::kRefuse);
  EXPECT_NE(s.reason.find("mixes two clusters"), std::string::npos) << s.reason;
  v.members[1].status->cluster_id = 0xc1;
  v.members[2].status->member_id = 0x777;  // a URL answered by another member
  EXPECT_EQ(NextRetirement(v, kManaged, 3).kind, RetireStep::kRefuse);
}

}  // namespace
}  // namespace steward
