// Golden test of the etcd flags rendered from a config: a change here changes how every
// member starts, so it must be deliberate.
#include "etcd/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace steward {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Config ThreeNodes(const std::string& self, const std::string& tls_mode = "off") {
  auto c = ParseConfig(R"(
cluster:
  name: demo
  size: 3
  nodes:
    - {name: n1, host: 127.0.0.11}
    - {name: n2, host: 127.0.0.12}
    - {name: n3, host: 127.0.0.13}
    - {name: n4, host: 127.0.0.14}
node:
  name: )" + self + R"(
  data_dir: /tmp/steward-flags-test/)" +
                           self + R"(
etcd:
  binary: /bin/true
  extra_args: ["--heartbeat-interval=100", "--election-timeout=1000"]
tls:
  mode: )" + tls_mode + R"(
  cert_file: /pki/server.crt
  key_file: /pki/server.key
  peer_cert_file: /pki/peer.crt
  peer_key_file: /pki/peer.key
  trusted_ca_file: /pki/ca.crt
  client_cert_file: /pki/client.crt
  client_key_file: /pki/client.key
)",
                       "flags_test");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(FlagsTest, BootstrapGolden) {
  std::vector<std::string> got = RenderEtcdFlags(BootstrapLaunch(ThreeNodes("n2")));
  std::vector<std::string> want = {
      "--name=n2",
      "--data-dir=/tmp/steward-flags-test/n2/etcd",
      "--listen-client-urls=http://127.0.0.12:2379",
      "--advertise-client-urls=http://127.0.0.12:2379",
      "--listen-peer-urls=http://127.0.0.12:2380",
      "--initial-advertise-peer-urls=http://127.0.0.12:2380",
      "--initial-cluster=n1=http://127.0.0.11:2380,n2=http://127.0.0.12:2380,"
      "n3=http://127.0.0.13:2380",
      "--initial-cluster-state=new",
      "--initial-cluster-token=steward-demo",
      "--auto-compaction-mode=periodic",
      "--auto-compaction-retention=1h",
      "--heartbeat-interval=100",
      "--election-timeout=1000",
  };
  EXPECT_EQ(absl::StrJoin(got, "\n"), absl::StrJoin(want, "\n"));
}

TEST(FlagsTest, TlsFilesModeGolden) {
  std::vector<std::string> got = RenderEtcdFlags(BootstrapLaunch(ThreeNodes("n1", "files")));
  std::vector<std::string> want = {
      "--name=n1",
      "--data-dir=/tmp/steward-flags-test/n1/etcd",
      "--listen-client-urls=https://127.0.0.11:2379",
      "--advertise-client-urls=https://127.0.0.11:2379",
      "--listen-peer-urls=https://127.0.0.11:2380",
      "--initial-advertise-peer-urls=https://127.0.0.11:2380",
      "--initial-cluster=n1=https://127.0.0.11:2380,n2=https://127.0.0.12:2380,"
      "n3=https://127.0.0.13:2380",
      "--initial-cluster-state=new",
      "--initial-cluster-token=steward-demo",
      "--cert-file=/pki/server.crt",
      "--key-file=/pki/server.key",
      "--trusted-ca-file=/pki/ca.crt",
      "--client-cert-auth=true",
      "--peer-cert-file=/pki/peer.crt",
      "--peer-key-file=/pki/peer.key",
      "--peer-trusted-ca-file=/pki/ca.crt",
      "--peer-client-cert-auth=true",
      "--auto-compaction-mode=periodic",
      "--auto-compaction-retention=1h",
      "--heartbeat-interval=100",
      "--election-timeout=1000",
  };
  EXPECT_EQ(absl::StrJoin(got, "\n"), absl::StrJoin(want, "\n"));
}

TEST(FlagsTest, ExistingStateAndCustomCluster) {
  EtcdLaunch l;
  l.name = "n4";
  l.data_dir = "/d";
  l.client_url = "http://h:1";
  l.peer_url = "http://h:2";
  l.initial_cluster = {{"n1", "http://a:2"}, {"n4", "http://h:2"}};
  l.new_cluster = false;
  l.token = "t";
  std::vector<std::string> got = RenderEtcdFlags(l);
  ASSERT_EQ(got.size(), 9u);
  EXPECT_EQ(got[6], "--initial-cluster=n1=http://a:2,n4=http://h:2");
  EXPECT_EQ(got[7], "--initial-cluster-state=existing");
  EXPECT_EQ(got[8], "--initial-cluster-token=t");
}

// cluster.ports.metrics: etcd's own metrics in plain HTTP on the node's host, before extra_args.
TEST(FlagsTest, MetricsPortRendersListenMetricsUrls) {
  Config c = ThreeNodes("n2");
  EXPECT_EQ(absl::StrJoin(RenderEtcdFlags(BootstrapLaunch(c)), " ").find("--listen-metrics-urls"),
            std::string::npos)
      << "off by default";
  c.cluster.ports.metrics = 2393;
  std::vector<std::string> got = RenderEtcdFlags(BootstrapLaunch(c));
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got[got.size() - 3], "--listen-metrics-urls=http://127.0.0.12:2393");
}

// etcd.auto_compaction_*: rendered after the managed flags and before extra_args; an empty mode
// (extra_args set them) renders nothing.
TEST(FlagsTest, AutoCompactionFlags) {
  Config c = ThreeNodes("n2");
  c.etcd.auto_compaction_mode = "revision";
  c.etcd.auto_compaction_retention = "10000";
  std::vector<std::string> got = RenderEtcdFlags(BootstrapLaunch(c));
  ASSERT_GE(got.size(), 4u);
  EXPECT_EQ(got[got.size() - 4], "--auto-compaction-mode=revision");
  EXPECT_EQ(got[got.size() - 3], "--auto-compaction-retention=10000");
  c.etcd.auto_compaction_mode.clear();
  EXPECT_EQ(absl::StrJoin(RenderEtcdFlags(BootstrapLaunch(c)), " ").find("auto-compaction"),
            std::string::npos);
}

// etcd 3.4 runs with the zap logger (etcd #14402, #17265: capnslog's nil zap logger panics
// when a read index times out); other versions, an unknown version, and extra_args that name
// a logger get no --logger from us.
TEST(FlagsTest, Etcd34GetsTheZapLogger) {
  Config c = ThreeNodes("n1");
  EtcdLaunch l = BootstrapLaunch(c);
  auto has_logger = [](const EtcdLaunch& launch) {
    return absl::StrJoin(RenderEtcdFlags(launch), " ").find("--logger=zap") != std::string::npos;
  };
  EXPECT_FALSE(has_logger(l));
  l.version = "3.4.23";
  EXPECT_TRUE(has_logger(l));
  for (const char* v : {"3.3.27", "3.5.30", "3.6.0", "3.40.1"}) {
    l.version = v;
    EXPECT_FALSE(has_logger(l)) << v;
  }
  l.version = "3.4.23";
  l.extra_args.push_back("--logger=capnslog");
  EXPECT_FALSE(has_logger(l));
}

TEST(PendingFlagsTest, NothingWhenTheSameFlagsAreSpelledOtherwise) {
  EXPECT_THAT(PendingFlags({"--name=n1", "-quota-backend-bytes", "100", "--debug"},
                           {"--name", "n1", "--quota-backend-bytes=100", "--debug=true"}),
              IsEmpty());
}

TEST(PendingFlagsTest, NamesChangedAddedAndDroppedFlagsOnce) {
  EXPECT_THAT(PendingFlags({"--name=n1", "--snapshot-count=100", "--logger=zap"},
                           {"--name=n1", "--snapshot-count=200", "--quota-backend-bytes=8",
                            "--quota-backend-bytes=9"}),
              ElementsAre("--logger", "--quota-backend-bytes", "--snapshot-count"));
}

TEST(PendingFlagsTest, InitialClusterFlagsAreNotPending) {
  // etcd reads them only to create a member: a cluster that grew since is no restart.
  EXPECT_THAT(PendingFlags({"--initial-cluster=n1=http://a", "--initial-cluster-state=new"},
                           {"--initial-cluster=n1=http://a,n2=http://b",
                            "--initial-cluster-state=existing", "--initial-cluster-token=t"}),
              IsEmpty());
}

TEST(PendingFlagsTest, ARenderedLaunchAgainstItselfWithANewExtraArg) {
  EtcdLaunch l;
  l.name = "n1";
  l.data_dir = "/d";
  l.client_url = "https://127.0.0.1:2379";
  l.peer_url = "https://127.0.0.1:2380";
  const auto before = RenderEtcdFlags(l);
  l.extra_args = {"--quota-backend-bytes=4294967296"};
  EXPECT_THAT(PendingFlags(before, RenderEtcdFlags(l)), ElementsAre("--quota-backend-bytes"));
  EXPECT_THAT(PendingFlags(RenderEtcdFlags(l), RenderEtcdFlags(l)), IsEmpty());
}

}  // namespace
}  // namespace steward
