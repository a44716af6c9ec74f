// Drop-in configuration (config/dropin.h): etcd's ETCD_* environment (docker-rejoinable-etcd,
// seed 004) and etcd-wrapper's flags (seed 000), adapted to loopback, become node configs;
// what cannot be expressed is an error naming the variable or flag.
#include "config/dropin.h"

#include <gtest/gtest.h>

#include "yaml-cpp/yaml.h"

namespace steward {
namespace {

std::map<std::string, std::string> SeedEnvironment(const std::string& name, int i) {
  const std::string host = "127.0.86." + std::to_string(10 + i);
  return {
      {"ETCD_NAME", name},
      {"ETCD_ADVERTISE_CLIENT_URLS", "http://" + host + ":2379"},
      {"ETCD_LISTEN_CLIENT_URLS", "http://0.0.0.0:2379"},
      {"ETCD_INITIAL_ADVERTISE_PEER_URLS", "http://" + host + ":2380"},
      {"ETCD_LISTEN_PEER_URLS", "http://0.0.0.0:2380"},
      {"ETCD_INITIAL_CLUSTER_TOKEN", "etcd-cluster-1"},
      {"ETCD_INITIAL_CLUSTER",
       "etcd1=http://127.0.86.11:2380,etcd2=http://127.0.86.12:2380,etcd3=http://127.0.86.13:2380"},
      {"ETCD_OTHER_PEERS_CLIENT_URLS", "http://127.0.86.12:2379,http://127.0.86.13:2379"},
      {"ETCD_DATA_DIR", "/tmp/steward-dropin-test/" + name},
      {"HOME", "/root"},
  };
}

absl::StatusOr<Config> FromEnv(const std::map<std::string, std::string>& env,
                               std::vector<std::string>* warnings) {
  EtcdStyle s = EtcdStyleFromEnvironment(env);
  *warnings = s.warnings;
  auto yaml = ConfigYamlFromEtcdStyle(s, warnings);
  if (!yaml.ok()) return yaml.status();
  return ParseConfig(*yaml, "environment");
}

TEST(DropInTest, DockerRejoinableEtcdsEnvironmentBecomesANodeConfig) {
  std::vector<std::string> warnings;
  auto c = FromEnv(SeedEnvironment("etcd1", 1), &warnings);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node.name, "etcd1");
  EXPECT_EQ(c->cluster.name, "etcd-cluster-1");
  EXPECT_EQ(c->cluster.size, 3);
  ASSERT_EQ(c->cluster.nodes.size(), 3u);
  EXPECT_EQ(c->cluster.nodes[1].name, "etcd2");
  EXPECT_EQ(c->cluster.nodes[1].host, "127.0.86.12");
  EXPECT_EQ(c->cluster.ports.client, 2379);
  EXPECT_EQ(c->cluster.ports.peer, 2380);
  EXPECT_EQ(c->node.data_dir, "/tmp/steward-dropin-test/etcd1");
  EXPECT_EQ(c->tls.mode, "off");
  // The listen URLs are accepted, and the log says they are not used.
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("ETCD_LISTEN_CLIENT_URLS"), std::string::npos) << warnings[0];
}

TEST(DropInTest, OtherEtcdSettingsBecomeEtcdFlagsAndRenderedOnesAreIgnored) {
  auto env = SeedEnvironment("etcd2", 2);
  env["ETCD_SNAPSHOT_COUNT"] = "5000";
  env["ETCD_INITIAL_CLUSTER_STATE"] = "existing";  // the seed's script set it; steward decides
  std::vector<std::string> warnings;
  auto c = FromEnv(env, &warnings);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.extra_args, std::vector<std::string>{"--snapshot-count=5000"});
  bool said = false;
  for (const auto& w : warnings) said |= w.find("ETCD_INITIAL_CLUSTER_STATE is ignored") == 0;
  EXPECT_TRUE(said);
  env["ETCD_FORCE_NEW_CLUSTER"] = "true";
  auto refused = FromEnv(env, &warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--force-new-cluster"), std::string::npos);
}

TEST(DropInTest, WhatOneConfigCannotSayIsAnErrorNamingTheVariable) {
  // The seed's docker example: every node on one host, with its own ports.
  auto env = SeedEnvironment("etcd1", 1);
  env["ETCD_INITIAL_CLUSTER"] = "etcd1=http://192.168.99.100:1380,etcd2=http://192.168.99.100:2380";
  std::vector<std::string> warnings;
  auto c = FromEnv(env, &warnings);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ETCD_INITIAL_CLUSTER: the peer ports differ"),
            std::string::npos)
      << c.status();
  env = SeedEnvironment("etcd9", 1);
  c = FromEnv(env, &warnings);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ETCD_NAME: \"etcd9\" is not in ETCD_INITIAL_CLUSTER"),
            std::string::npos)
      << c.status();
}

std::vector<std::string> SeedWrapperFlags() {
  // Seed 000's pod spec, adapted to loopback and a file backup.
  return {"--name=controller-0",
          "--cert-file=/pki/etcd.pem",
          "--key-file=/pki/etcd-key.pem",
          "--peer-cert-file=/pki/etcd.pem",
          "--peer-key-file=/pki/etcd-key.pem",
          "--trusted-ca-file=/pki/ca.pem",
          "--peer-trusted-ca-file=/pki/ca.pem",
          "--initial-advertise-peer-urls=https://127.0.87.11:52380",
          "--listen-peer-urls=https://127.0.87.11:52380",
          "--listen-client-urls=https://127.0.87.11:52379,https://127.0.0.1:52379",
          "--advertise-client-urls=https://127.0.87.11:52379",
          "--initial-cluster=controller-0=https://127.0.87.11:52380,"
          "controller-1=https://127.0.87.12:52380,controller-2=https://127.0.87.13:52380",
          "--initial-cluster-token=etcd-default",
          "--etcd-servers=https://127.0.87.11:52379,https://127.0.87.12:52379,"
          "https://127.0.87.13:52379",
          "--backup-dir=/backups",
          "--backup-file=/backups/etcd.db",
          "--backup-interval=30m",
          "--healthcheck-interval=10s",
          "--pod-update-interval=1m"};
}

TEST(DropInTest, EtcdWrappersFlagsEachLandOnTheirSetting) {
  auto s = EtcdStyleFromWrapperFlags(SeedWrapperFlags());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->warnings.size(), 3u)
      << "--backup-file, --healthcheck-interval, --pod-update-interval";
  std::vector<std::string> warnings;
  auto yaml = ConfigYamlFromEtcdStyle(*s, &warnings);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  YAML::Node y = YAML::Load(*yaml);
  EXPECT_EQ(y["cluster"]["name"].as<std::string>(), "etcd-default");
  EXPECT_EQ(y["cluster"]["size"].as<int>(), 3);
  EXPECT_EQ(y["cluster"]["nodes"][2]["host"].as<std::string>(), "127.0.87.13");
  EXPECT_EQ(y["cluster"]["ports"]["client"].as<int>(), 52379);
  EXPECT_EQ(y["cluster"]["ports"]["peer"].as<int>(), 52380);
  EXPECT_EQ(y["node"]["name"].as<std::string>(), "controller-0");
  EXPECT_EQ(y["tls"]["mode"].as<std::string>(), "files");
  EXPECT_EQ(y["tls"]["cert_file"].as<std::string>(), "/pki/etcd.pem");
  EXPECT_EQ(y["tls"]["peer_key_file"].as<std::string>(), "/pki/etcd-key.pem");
  EXPECT_EQ(y["tls"]["trusted_ca_file"].as<std::string>(), "/pki/ca.pem");
  EXPECT_EQ(y["tls"]["client_cert_file"].as<std::string>(), "/pki/etcd.pem");
  EXPECT_EQ(y["backup"]["store"].as<std::string>(), "file:///backups");
  EXPECT_EQ(y["backup"]["interval"].as<std::string>(), "30m");
  EXPECT_FALSE(y["runner"]) << "no --image: etcd runs as the agent's child";
}

TEST(DropInTest, TheImageFlagMeansAStaticPodAndAnUnknownFlagIsAnError) {
  auto flags = SeedWrapperFlags();
  flags.push_back("--image=registry.example/etcd:3.4.23");
  flags.push_back("--pod-spec-file=/etc/steward/pod.yaml");
  auto s = EtcdStyleFromWrapperFlags(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<std::string> warnings;
  YAML::Node y = YAML::Load(*ConfigYamlFromEtcdStyle(*s, &warnings));
  EXPECT_EQ(y["runner"]["kind"].as<std::string>(), "static-pod");
  EXPECT_EQ(y["runner"]["image"].as<std::string>(), "registry.example/etcd:3.4.23");
  EXPECT_EQ(y["runner"]["pod_spec_file"].as<std::string>(), "/etc/steward/pod.yaml");
  flags.push_back("--frobnicate=1");
  auto bad = EtcdStyleFromWrapperFlags(flags);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown flag --frobnicate"), std::string::npos);
}

TEST(DropInTest, HttpsWithoutCertificatesIsAnError) {
  auto flags = SeedWrapperFlags();
  flags.erase(flags.begin() + 1, flags.begin() + 7);  // the six certificate flags
  auto s = EtcdStyleFromWrapperFlags(flags);
  ASSERT_TRUE(s.ok());
  std::vector<std::string> warnings;
  auto yaml = ConfigYamlFromEtcdStyle(*s, &warnings);
  ASSERT_FALSE(yaml.ok());
  EXPECT_NE(yaml.status().message().find("--initial-cluster: uses https"), std::string::npos)
      << yaml.status();
}

TEST(DropInTest, FlagsThatContradictTheConfigFileAreNamedWithBoth) {
  std::vector<std::string> warnings;
  auto a = FromEnv(SeedEnvironment("etcd1", 1), &warnings);
  auto b = FromEnv(SeedEnvironment("etcd2", 2), &warnings);
  ASSERT_TRUE(a.ok() && b.ok());
  b->source = "/etc/steward/node.yaml";
  auto c = Contradictions(*a, *b);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0],
            "node.name: \"etcd1\" from the flags contradicts \"etcd2\" in "
            "/etc/steward/node.yaml");
  EXPECT_TRUE(Contradictions(*a, *a).empty());
}

}  // namespace
}  // namespace steward
