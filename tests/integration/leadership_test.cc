// The streams an idle agent keeps open instead of polling (issue 13, "a quiet agent"): the
// followers' watch on the leader key and the leader's lease keep-alive stream, against real
// etcd 3.4 on 127.0.30.0/24 and 127.0.64.0/24.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "etcd/client.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

// One subnet per test: ctest runs the tests of a file in parallel, and two clusters on one
// subnet take each other's ports.
constexpr int kSubnet = 30;
constexpr int kStreamSubnet = 64;

// The streams themselves: a watch sees puts and deletes of its keys only, Cancel ends a wait
// at once from another thread, and a lease stream renews a lease and says when it is gone.
TEST(StreamTest, WatchSeesItsKeysAndLeaseStreamRenews) {
  TestCluster c(kStreamSubnet, 1, 1);
  c.StartAgent(0);
  ASSERT_TRUE(c.WaitHealthy(1, 60s)) << c.Logs();
  EtcdClient etcd = c.Client(c.ClientUrl(0));
  ASSERT_TRUE(WaitFor([&] { return etcd.Put("/w/a", "0").ok(); }, 15s));
  etcdserverpb::TxnRequest look;
  look.add_success()->mutable_request_range()->set_key("/w/a");
  auto seen = etcd.Txn(look);
  ASSERT_TRUE(seen.ok()) << seen.status();
  const int64_t rev = seen->header().revision();

  // A put after the watch's start revision but before it was opened is still delivered.
  ASSERT_TRUE(etcd.Put("/w/a", "1").ok());
  auto opened = etcd.WatchKeys({"/w/a", "/w/b"}, rev, 2000ms);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<KeyWatch> watch = std::move(*opened);
  auto events = watch->Wait(5000ms);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kv().key(), "/w/a");
  EXPECT_EQ((*events)[0].kv().value(), "1");
  EXPECT_EQ((*events)[0].type(), etcdserverpb::Event::PUT);

  // Another key: nothing within the bound (the wait times out without breaking the stream).
  ASSERT_TRUE(etcd.Put("/w/c", "x").ok());
  events = watch->Wait(500ms);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(events->empty());

  // A delete of the second key.
  ASSERT_TRUE(etcd.Put("/w/b", "y").ok());
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key("/w/b");
  ASSERT_TRUE(etcd.Txn(del).ok());
  std::vector<etcdserverpb::Event> got;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (got.size() < 2 && std::chrono::steady_clock::now() < until) {
    events = watch->Wait(1000ms);
    ASSERT_TRUE(events.ok()) << events.status();
    got.insert(got.end(), events->begin(), events->end());
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].kv().key(), "/w/b");
  EXPECT_EQ(got[1].type(), etcdserverpb::Event::DELETE);

  // Cancel from another thread ends a long wait at once, with an error.
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    watch->Cancel();
  });
  const auto began = std::chrono::steady_clock::now();
  events = watch->Wait(20000ms);
  canceller.join();
  EXPECT_FALSE(events.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);

  // The lease stream: renews while the lease lives, NotFound once it is revoked.
  auto lease = etcd.LeaseGrant(10s);
  ASSERT_TRUE(lease.ok()) << lease.status();
  auto stream = etcd.OpenLeaseStream(2000ms);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int i = 0; i < 3; ++i) {
    absl::Status s = (*stream)->KeepAlive(*lease, 2000ms);
    EXPECT_TRUE(s.ok()) << s;
  }
  ASSERT_TRUE(etcd.LeaseRevoke(*lease).ok());
  EXPECT_TRUE(absl::IsNotFound((*stream)->KeepAlive(*lease, 2000ms)));

  // A watch on a member that goes away breaks (the agent restarts it; the watch does not
  // come back by itself).
  opened = etcd.WatchKeys({"/w/a"}, rev, 2000ms);
  ASSERT_TRUE(opened.ok()) << opened.status();
  c.KillEtcd(0);
  bool broke = false;
  const auto bound = std::chrono::steady_clock::now() + 10s;
  while (!broke && std::chrono::steady_clock::now() < bound) {
    auto e = (*opened)->Wait(1000ms);
    broke = !e.ok();
  }
  EXPECT_TRUE(broke) << "the watch outlived its etcd";
}

// A follower waits on a watch of the leader key: a freed key (here deleted by hand, as an
// expired or revoked lease deletes it) is taken by another agent at once. A follower that
// polled would look again only after half the TTL (10 s here, the longest it waits).
TEST(LeadershipTest, AFreedLeaderKeyIsTakenAtOnce) {
  TestCluster c(kSubnet, 3, 3, "  leader_lease_ttl: 30s\n");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  EtcdClient etcd = c.Client(c.ClientUrls());
  const std::string key = "/steward/it" + std::to_string(kSubnet) + "/leader";
  std::string leader;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = etcd.Get(key);
        if (l.ok() && l->has_value()) leader = **l;
        return !leader.empty();
      },
      30s));
  // Let the followers look and open their watches.
  std::this_thread::sleep_for(3s);
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(key);
  ASSERT_TRUE(etcd.Txn(del).ok());
  const auto freed = std::chrono::steady_clock::now();
  std::string next;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = etcd.Get(key);
        if (l.ok() && l->has_value()) next = **l;
        return !next.empty();
      },
      25s))
      << c.Logs();
  const auto took = std::chrono::steady_clock::now() - freed;
  EXPECT_NE(next, leader) << "the leader does not campaign: it still believes it leads";
  EXPECT_LT(took, 2s) << "the key was taken after "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms: the followers polled instead of watching\n"
                      << c.Logs();
}

}  // namespace
}  // namespace steward::testing
