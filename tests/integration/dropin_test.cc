// Drop-in configuration with real agents and etcd: docker-rejoinable-etcd's ETCD_* environment
// (seed 004) and etcd-wrapper's flags (seed 000), adapted to loopback, start working clusters
// with no config file; a member wiped and restarted with the same environment rejoins with
// all data. Plain http, as the seeds run.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kEnv = 86, kWrapper = 87 };

EtcdClient Plain(const std::string& url) {
  EtcdClient::Options o;
  o.timeout = 3000ms;
  return EtcdClient({url}, o);
}

bool Healthy(const std::vector<std::string>& urls, size_t voters) {
  auto members = Plain(urls.front()).MemberList();
  if (!members.ok() || members->size() != voters) return false;
  for (const auto& m : *members) {
    if (m.is_learner || m.name.empty()) return false;
  }
  for (const auto& u : urls) {
    auto st = Plain(u).Status(u, 2000ms);
    if (!st.ok() || st->leader == 0) return false;
  }
  return true;
}

std::vector<std::string> SeedEnvironment(const TestCluster& c, int i) {
  auto host = [](int k) { return absl::StrCat("127.0.", kEnv, ".", 11 + k); };
  std::vector<std::string> others;
  for (int k = 0; k < 3; ++k) {
    if (k != i) others.push_back(absl::StrCat("http://", host(k), ":2379"));
  }
  return {
      absl::StrCat("ETCD_NAME=etcd", i + 1),
      absl::StrCat("ETCD_ADVERTISE_CLIENT_URLS=http://", host(i), ":2379"),
      "ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379",
      absl::StrCat("ETCD_INITIAL_ADVERTISE_PEER_URLS=http://", host(i), ":2380"),
      "ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380",
      "ETCD_INITIAL_CLUSTER_TOKEN=etcd-cluster-1",
      absl::StrCat("ETCD_INITIAL_CLUSTER=etcd1=http://", host(0), ":2380,etcd2=http://", host(1),
                   ":2380,etcd3=http://", host(2), ":2380"),
      absl::StrCat("ETCD_OTHER_PEERS_CLIENT_URLS=", others[0], ",", others[1]),
      absl::StrCat("ETCD_DATA_DIR=", c.DataDir(i)),
  };
}

TEST(DropInTest, EtcdsEnvironmentStartsAClusterAndAWipedMemberRejoins) {
  TestCluster c(kEnv, 3, 3);
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i)
    urls.push_back(absl::StrCat("http://127.0.", kEnv, ".", 11 + i, ":2379"));
  for (int i = 0; i < 3; ++i) c.StartAgentWith(i, {}, SeedEnvironment(c, i));
  ASSERT_TRUE(WaitFor([&] { return Healthy(urls, 3); }, 90s)) << c.Logs();
  ASSERT_TRUE(WaitFor([&] { return Plain(urls[0]).Put("/dropin/k", "v").ok(); }, 15s));

  // The container is replaced: agent and etcd gone, the data dir empty, the same environment.
  c.SignalAgent(2, SIGTERM);
  fs::remove_all(c.DataDir(2));
  c.StartAgentWith(2, {}, SeedEnvironment(c, 2));
  ASSERT_TRUE(WaitFor([&] { return Healthy(urls, 3); }, 120s)) << c.Logs();
  auto got = Plain(urls[2]).Get("/dropin/k");
  ASSERT_TRUE(WaitFor(
      [&] {
        got = Plain(urls[2]).Get("/dropin/k");
        return got.ok() && got->has_value();
      },
      30s))
      << c.Logs();
  EXPECT_EQ(**got, "v");
}

TEST(DropInTest, EtcdWrappersFlagsStartAClusterBackedUpToAFile) {
  TestCluster c(kWrapper, 3, 3);
  auto host = [](int k) { return absl::StrCat("127.0.", kWrapper, ".", 11 + k); };
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) urls.push_back(absl::StrCat("http://", host(i), ":52379"));
  for (int i = 0; i < 3; ++i) {
    c.StartAgentWith(
        i,
        {
            absl::StrCat("--name=controller-", i),
            absl::StrCat("--initial-advertise-peer-urls=http://", host(i), ":52380"),
            absl::StrCat("--listen-peer-urls=http://", host(i), ":52380"),
            absl::StrCat("--listen-client-urls=http://", host(i), ":52379,http://127.0.0.1:52379"),
            absl::StrCat("--advertise-client-urls=http://", host(i), ":52379"),
            absl::StrCat("--initial-cluster=controller-0=http://", host(0),
                         ":52380,controller-1=http://", host(1), ":52380,controller-2=http://",
                         host(2), ":52380"),
            "--initial-cluster-token=etcd-default",
            absl::StrCat("--etcd-servers=", urls[0], ",", urls[1], ",", urls[2]),
            absl::StrCat("--backup-dir=", c.Root(), "/backups"),
            "--backup-file=/ignored/etcd.db",
            "--backup-interval=1h",
            "--healthcheck-interval=10s",
            // Not one of etcd-wrapper's (its data lives in the container): steward's own.
            absl::StrCat("--data-dir=", c.DataDir(i)),
        },
        {});
  }
  ASSERT_TRUE(WaitFor([&] { return Healthy(urls, 3); }, 90s)) << c.Logs();
  ASSERT_TRUE(WaitFor([&] { return Plain(urls[1]).Put("/wrapper/k", "v").ok(); }, 15s));
  // The leader takes a backup into --backup-dir once the cluster is up.
  EXPECT_TRUE(WaitFor(
      [&] {
        std::error_code ec;
        return fs::exists(c.Root() + "/backups/etcd-default/backups", ec) &&
               !fs::is_empty(c.Root() + "/backups/etcd-default/backups", ec);
      },
      60s))
      << c.Logs();
}

}  // namespace
}  // namespace steward::testing
