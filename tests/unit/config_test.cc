// Config validation: every kind of bad input gets an error that names the key and the problem.
#include "config/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "config/aws_credentials.h"

namespace steward {
namespace {

const char kGood[] = R"(
cluster:
  name: demo
  size: 3
  nodes:
    - {name: n1, host: 127.0.0.11}
    - {name: n2, host: 127.0.0.12}
    - {name: n3, host: 127.0.0.13}
  ports: {client: 2379, peer: 2380, agent: 2381, admin: 2382}
node:
  name: n1
  data_dir: DATADIR
etcd:
  binary: /bin/true
  extra_args: []
tls:
  mode: off
)";

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("steward-config-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Yaml(const std::string& from = kGood) {
    return absl::StrReplaceAll(from, {{"DATADIR", (dir_ / "n1").string()}});
  }
  // Replaces `what` in the good config by `with` and expects an error mentioning each of `want`.
  void ExpectError(const std::string& what, const std::string& with,
                   const std::vector<std::string>& want) {
    std::string text = Yaml();
    auto pos = text.find(what);
    ASSERT_NE(pos, std::string::npos) << what;
    text.replace(pos, what.size(), with);
    auto c = ParseConfig(text, "node.yaml");
    ASSERT_FALSE(c.ok()) << "accepted:\n" << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    for (const auto& w : want) {
      EXPECT_NE(c.status().message().find(w), std::string::npos)
          << "error \"" << c.status().message() << "\" lacks \"" << w << "\"";
    }
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigTest, GoodConfigLoadsWithDefaults) {
  auto c = ParseConfig(Yaml(), "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cluster.name, "demo");
  EXPECT_EQ(c->cluster.size, 3);
  ASSERT_EQ(c->cluster.nodes.size(), 3u);
  EXPECT_EQ(c->self().host, "127.0.0.11");
  EXPECT_EQ(c->ClientUrl(c->cluster.nodes[1]), "http://127.0.0.12:2379");
  EXPECT_EQ(c->PeerUrl(c->cluster.nodes[2]), "http://127.0.0.13:2380");
  EXPECT_EQ(c->ClusterToken(), "steward-demo");
  EXPECT_EQ(c->etcd.stop_timeout, std::chrono::seconds(10));
  EXPECT_EQ(c->node.log_level, "info");
  // Validation changes nothing on disk.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "n1"));
}

// backup.drill_interval: daily by default, 0 turns drills off, and below a second is refused.
TEST_F(ConfigTest, RestoreDrillsAreDailyByDefaultAndCanBeTurnedOff) {
  auto c = ParseConfig(Yaml(), "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backup.drill_interval, std::chrono::hours(24));
  EXPECT_EQ(c->backup.drill_scratch, "");
  auto off =
      ParseConfig(Yaml() + "backup:\n  drill_interval: 0s\n  drill_scratch: /srv/x\n", "node.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->backup.drill_interval.count(), 0);
  EXPECT_EQ(off->backup.drill_scratch, "/srv/x");
  auto bad = ParseConfig(Yaml() + "backup:\n  drill_interval: 10ms\n", "node.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("backup.drill_interval"), std::string::npos)
      << bad.status();
}

// backup.low_memory_stream: off by default; a value that is not a boolean names the key.
TEST_F(ConfigTest, LowMemoryStreamIsOffByDefaultAndTakesABoolean) {
  auto c = ParseConfig(Yaml(), "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->backup.low_memory_stream);
  auto on = ParseConfig(Yaml() + "backup:\n  low_memory_stream: true\n", "node.yaml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->backup.low_memory_stream);
  auto bad = ParseConfig(Yaml() + "backup:\n  low_memory_stream: sometimes\n", "node.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("backup.low_memory_stream"), std::string::npos)
      << bad.status();
}

TEST_F(ConfigTest, SizeDefaultsToThreeOrNodeCount) {
  std::string text = Yaml();
  text.replace(text.find("  size: 3\n"), 10, "");
  auto c = ParseConfig(text, "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cluster.size, 3);
}

TEST_F(ConfigTest, DataDirDefaultsUnderVarLib) {
  std::string text = Yaml();
  auto pos = text.find("  data_dir:");
  text.erase(pos, text.find('\n', pos) - pos + 1);
  auto c = ParseConfig(text, "node.yaml");
  // /var/lib/steward/n1 may or may not be creatable here; either way the key is resolved.
  if (c.ok()) {
    EXPECT_EQ(c->node.data_dir, "/var/lib/steward/n1");
  } else {
    EXPECT_NE(c.status().message().find("node.data_dir"), std::string::npos);
  }
}

TEST_F(ConfigTest, UnknownKeys) {
  ExpectError("  size: 3", "  size: 3\n  sise: 4", {"node.yaml", "cluster.sise", "unknown key"});
  ExpectError("etcd:\n", "etcd:\n  bnary: /x\n", {"etcd.bnary", "unknown key"});
  ExpectError("{name: n2, host: 127.0.0.12}", "{name: n2, host: 127.0.0.12, port: 1}",
              {"cluster.nodes[1].port", "unknown key"});
  ExpectError("cluster:\n", "clutser: {}\ncluster:\n", {"clutser", "unknown key"});
}

TEST_F(ConfigTest, MissingRequiredKeys) {
  ExpectError("  name: demo\n", "", {"cluster.name", "is required"});
  ExpectError("  name: n1\n", "", {"node.name", "is required"});
  ExpectError("{name: n2, host: 127.0.0.12}", "{name: n2}",
              {"cluster.nodes[1].host", "is required"});
  ExpectError(
      "  nodes:\n    - {name: n1, host: 127.0.0.11}\n    - {name: n2, host: 127.0.0.12}\n"
      "    - {name: n3, host: 127.0.0.13}\n",
      "", {"cluster.nodes", "is required"});
  auto empty = ParseConfig("", "node.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("cluster"), std::string::npos);
}

TEST_F(ConfigTest, DuplicateNodeNames) {
  ExpectError("{name: n3, host: 127.0.0.13}", "{name: n2, host: 127.0.0.13}",
              {"cluster.nodes[2].name", "duplicate node name \"n2\"", "cluster.nodes[1]"});
}

TEST_F(ConfigTest, DuplicateHostPort) {
  ExpectError("{name: n3, host: 127.0.0.13}", "{name: n3, host: 127.0.0.11}",
              {"cluster.nodes[2].host", "duplicate host:port", "cluster.nodes[0]"});
}

TEST_F(ConfigTest, NodeNameNotAmongNodes) {
  ExpectError("  name: n1\n  data_dir", "  name: n9\n  data_dir",
              {"node.name", "\"n9\" is not among cluster.nodes (n1, n2, n3)"});
}

TEST_F(ConfigTest, SizeOutOfRange) {
  ExpectError("size: 3", "size: 0",
              {"cluster.size", "between 1 and the number of nodes (3)", "got 0"});
  ExpectError("size: 3", "size: 4", {"cluster.size", "got 4"});
  ExpectError("size: 3", "size: three", {"cluster.size", "must be an integer"});
}

TEST_F(ConfigTest, PortOutOfRangeOrClashing) {
  ExpectError("client: 2379", "client: 70000",
              {"cluster.ports.client", "port 70000 is out of range"});
  ExpectError("admin: 2382", "admin: 0", {"cluster.ports.admin", "out of range"});
  ExpectError("peer: 2380", "peer: 2379", {"cluster.ports.peer", "already cluster.ports.client"});
}

TEST_F(ConfigTest, EtcdBinaryMissingOrNotExecutable) {
  ExpectError("binary: /bin/true", "binary: /nonexistent/etcd",
              {"etcd.binary", "\"/nonexistent/etcd\" does not exist"});
  std::string plain = (dir_ / "not-exec").string();
  std::ofstream(plain) << "x";
  ::chmod(plain.c_str(), 0644);
  // Mode 0644 has no execute bit, so even root may not execute it.
  ExpectError("binary: /bin/true", "binary: " + plain, {"etcd.binary", "is not executable"});
  ExpectError("binary: /bin/true", "binary: /tmp", {"etcd.binary", "is not a regular file"});
}

TEST_F(ConfigTest, RestoreInPlaceIsOnByDefaultAndABadValueNamesTheKey) {
  auto c = ParseConfig(Yaml(), "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->etcd.restore_in_place);
  std::string text = Yaml();
  text.replace(text.find("binary: /bin/true"), 17, "binary: /bin/true\n  restore_in_place: false");
  auto off = ParseConfig(text, "node.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->etcd.restore_in_place);
  ExpectError("binary: /bin/true", "binary: /bin/true\n  restore_in_place: maybe",
              {"etcd.restore_in_place", "must be true or false"});
}

TEST_F(ConfigTest, DataDirThatCannotBeCreated) {
  std::string file = (dir_ / "a-file").string();
  std::ofstream(file) << "x";
  std::string text = Yaml();
  auto pos = text.find((dir_ / "n1").string());
  text.replace(pos, (dir_ / "n1").string().size(), file + "/n1");
  auto c = ParseConfig(text, "node.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("node.data_dir"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("is not a directory"), std::string::npos) << c.status();
}

TEST_F(ConfigTest, ManagedFlagsCannotBeOverridden) {
  ExpectError("extra_args: []", "extra_args: [\"--snapshot-count=1000\", \"--data-dir=/x\"]",
              {"etcd.extra_args[1]", "--data-dir is set by steward"});
}

TEST_F(ConfigTest, BadDurationsAndNames) {
  ExpectError("extra_args: []", "extra_args: []\n  stop_timeout: 10x",
              {"etcd.stop_timeout", "unknown unit"});
  ExpectError("name: demo", "name: \"de mo\"", {"cluster.name", "letters, digits"});
  ExpectError("{name: n2,", "{name: \"n,2\",", {"cluster.nodes[1].name", "letters, digits"});
  ExpectError("  name: n1\n", "  name: n1\n  log_level: loud\n", {"node.log_level", "\"loud\""});
}

TEST_F(ConfigTest, TlsIsRequiredUnlessExplicitlyOff) {
  ExpectError("tls:\n  mode: off\n", "", {"tls", "is required", "tls.mode: off"});
  ExpectError("mode: off", "mode: maybe", {"tls.mode", "\"maybe\" is not one of"});
  ExpectError("mode: off", "mode: issued", {"tls.ca_cert", "is required"});
  ExpectError("mode: off", "mode: files", {"tls.cert_file", "is required"});
  ExpectError("mode: off", "mode: issued\n  ca_cert: /nonexistent/ca.crt\n  ca_key: /x",
              {"tls.ca_cert", "does not exist or is not readable"});
}

TEST_F(ConfigTest, TlsCaKeyReadableByOthersIsRefused) {
  std::string ca = (dir_ / "ca.crt").string(), key = (dir_ / "ca.key").string();
  std::ofstream(ca) << "x";
  std::ofstream(key) << "x";
  ::chmod(key.c_str(), 0644);
  ExpectError("mode: off", "mode: issued\n  ca_cert: " + ca + "\n  ca_key: " + key,
              {"tls.ca_key", "readable by others", "0644"});
  ::chmod(key.c_str(), 0600);
  std::string text = Yaml();
  text.replace(text.find("mode: off"), 9, "mode: issued\n  ca_cert: " + ca + "\n  ca_key: " + key);
  auto c = ParseConfig(text, "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ClientUrl(c->cluster.nodes[0]), "https://127.0.0.11:2379");
  EXPECT_EQ(c->Tls().client_cert, (dir_ / "n1/tls/client.crt").string());
}

TEST_F(ConfigTest, InvalidYamlNamesTheLine) {
  auto c = ParseConfig("cluster:\n  name: [unclosed\n", "node.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("node.yaml: line"), std::string::npos) << c.status();
}

TEST_F(ConfigTest, LoadConfigReportsAMissingFile) {
  auto c = LoadConfig((dir_ / "nope.yaml").string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nope.yaml does not exist"), std::string::npos) << c.status();
}

// Issue 9: values that would make the agent destroy things are refused, not obeyed.
TEST_F(ConfigTest, ZeroPeriodsThatWouldReplaceOrPruneAreRefused) {
  ExpectError(
      "  ports:", "  replace_after: 0s\n  ports:", {"cluster.replace_after", "at least 1s"});
  ExpectError("  ports:", "  learner_timeout: 0s\n  ports:", {"cluster.learner_timeout"});
  ExpectError("tls:", "backup:\n  retention: {keep_all_for: 0s}\ntls:",
              {"backup.retention.keep_all_for", "greater than 0"});
  ExpectError(
      "tls:", "backup:\n  retention: {daily_for: 0s}\ntls:", {"backup.retention.daily_for"});
}

TEST_F(ConfigTest, OneMachineUnderTwoSpellingsIsRefused) {
  ExpectError("- {name: n2, host: 127.0.0.12}",
              "- {name: n2, host: localhost}\n    - {name: n4, host: 127.0.0.1}",
              {"cluster.nodes[2].host", "same address (127.0.0.1)", "localhost"});
  ExpectError("- {name: n2, host: 127.0.0.12}",
              "- {name: n2, host: \"::1\"}\n    - {name: n4, host: \"[::1]\"}",
              {"cluster.nodes[2].host", "same address (::1)"});
}

TEST_F(ConfigTest, AnS3SecretInAFileOthersCanReadIsRefused) {
  const std::string path = (dir_ / "node.yaml").string();
  std::string text = Yaml();
  text.replace(text.find("tls:"), 4,
               "backup:\n  store: s3://bucket/prefix\n  s3: {access_key_id: AKID, "
               "secret_access_key: sekrit}\ntls:");
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0644);
  auto c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("backup.s3.secret_access_key"), std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("0644"), std::string::npos) << c.status();
  EXPECT_EQ(c.status().message().find("sekrit"), std::string::npos) << "the secret leaked";
  ::chmod(path.c_str(), 0640);
  EXPECT_TRUE(LoadConfig(path).ok());
}

// Issue 16: S3 credentials from the shared credentials file (AWS_PROFILE or backup.s3.profile)
// when neither the config nor AWS_* give them, and backup.s3.ca_file checked at load.
TEST_F(ConfigTest, S3CredentialsFromTheSharedFileAndACaFile) {
  struct Env {  // restores the variables it touched
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    void Set(const char* k, const char* v) {
      const char* old = std::getenv(k);
      saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v)
        ::setenv(k, v, 1);
      else
        ::unsetenv(k);
    }
    ~Env() {
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
        if (it->second)
          ::setenv(it->first.c_str(), it->second->c_str(), 1);
        else
          ::unsetenv(it->first.c_str());
      }
    }
  } env;
  const std::string creds = (dir_ / "credentials").string();
  std::ofstream(creds) << "# comment\n[default]\naws_access_key_id = DEFAULTKEY\n"
                          "aws_secret_access_key = defaultsecret\n\n[minio]\n"
                          "aws_access_key_id=MINIOKEY\naws_secret_access_key=miniosecret\n"
                          "aws_session_token = tok\n";
  env.Set("AWS_ACCESS_KEY_ID", nullptr);
  env.Set("AWS_SECRET_ACCESS_KEY", nullptr);
  env.Set("AWS_SESSION_TOKEN", nullptr);
  env.Set("AWS_PROFILE", nullptr);
  env.Set("AWS_SHARED_CREDENTIALS_FILE", creds.c_str());
  auto with = [&](const std::string& s3) {
    std::string text = Yaml();
    text.replace(text.find("tls:"), 4, "backup:\n  store: s3://bucket/prefix\n" + s3 + "tls:");
    return ParseConfig(text, "node.yaml");
  };
  auto c = with("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backup.s3.access_key_id, "DEFAULTKEY");
  env.Set("AWS_PROFILE", "minio");
  c = with("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backup.s3.access_key_id, "MINIOKEY");
  EXPECT_EQ(c->backup.s3.session_token, "tok");
  // The config's profile wins over AWS_PROFILE; a missing profile names the key and the file.
  c = with("  s3: {profile: nosuch}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("backup.s3.profile"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("[nosuch]"), std::string::npos) << c.status();
  // Keys in the environment win over the file.
  env.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env.Set("AWS_SECRET_ACCESS_KEY", "envsecret");
  c = with("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backup.s3.access_key_id, "ENVKEY");
  // ca_file: must hold a PEM certificate.
  const std::string not_pem = (dir_ / "not.pem").string();
  std::ofstream(not_pem) << "hello\n";
  c = with("  s3: {ca_file: " + not_pem + "}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("backup.s3.ca_file"), std::string::npos) << c.status();
  c = with("  s3: {ca_file: " + (dir_ / "missing.pem").string() + "}\n");
  EXPECT_FALSE(c.ok());
  // Parsing alone: a profile without its secret is refused, naming the profile, never a value.
  auto bad = ParseSharedCredentials("[p]\naws_access_key_id = K\n", "p", "f");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("[p]"), std::string::npos);
  EXPECT_EQ(ParseSharedCredentials("[q]\n", "p", "f").status().code(), absl::StatusCode::kNotFound);
}

// Issue 15: stewardctl reads a node's config on any machine, without root. What only the
// agent's machine has (its etcd binary, data dir, CA key) is not checked; every key still is.
TEST_F(ConfigTest, AClientConfigNeedsNotTheAgentsMachine) {
  const std::string path = (dir_ / "node.yaml").string();
  std::string text = Yaml();
  text = absl::StrReplaceAll(
      text, {{"binary: /bin/true", "binary: /nonexistent/etcd"},
             {"data_dir: " + (dir_ / "n1").string(), "data_dir: /proc/nonexistent/n1"},
             {"mode: off",
              "mode: issued\n  ca_cert: /nonexistent/ca.crt\n"
              "  ca_key: /nonexistent/ca.key"}});
  std::ofstream(path) << text;
  auto agent = LoadConfig(path);
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("etcd.binary"), std::string::npos) << agent.status();
  auto client = LoadClientConfig(path);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->cluster.name, "demo");
  EXPECT_EQ(client->ClientUrl(client->cluster.nodes[1]), "https://127.0.0.12:2379");
  // The host checks are back for the next agent parse on this thread.
  EXPECT_FALSE(LoadConfig(path).ok());
  // A bad key is still named.
  std::ofstream(path) << absl::StrReplaceAll(text, {{"size: 3", "size: three"}});
  auto bad = LoadClientConfig(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cluster.size"), std::string::npos) << bad.status();
}

TEST_F(ConfigTest, ExtraSansAreCheckedAndNamed) {
  ExpectError("mode: off", "mode: off\n  extra_sans: [etcd.example.com]",
              {"tls.extra_sans", "only used with tls.mode: issued"});
  ExpectError("mode: off", "mode: off\n  extra_sans: [\"bad name\"]",
              {"tls.extra_sans[0]", "is not a DNS name or an IP address"});
  ExpectError("mode: off", "mode: off\n  extra_sans: etcd.example.com",
              {"tls.extra_sans", "must be a list"});
}

TEST_F(ConfigTest, RunnerSettingsAreCheckedAndNamed) {
  ExpectError("extra_args: []", "extra_args: []\nrunner:\n  kind: vm",
              {"runner.kind", "\"vm\" is not one of process, static-pod"});
  ExpectError("extra_args: []", "extra_args: []\nrunner:\n  kind: static-pod\n  manifest_dir: /tmp",
              {"runner.image", "is required"});
  ExpectError("extra_args: []",
              "extra_args: []\nrunner:\n  kind: static-pod\n  image: etcd:3.4\n  manifest_dir: "
              "/nonexistent/manifests",
              {"runner.manifest_dir", "is not a directory"});
  ExpectError("extra_args: []", "extra_args: []\nrunner:\n  image: etcd:3.4",
              {"runner.image", "only used with runner.kind: static-pod"});
  ExpectError("extra_args: []",
              "extra_args: []\nrunner:\n  kind: static-pod\n  image: etcd:3.4\n  manifest_dir: "
              "/tmp\n  pod_spec_file: /nonexistent.yaml",
              {"runner.pod_spec_file", "cannot read"});
}

// A WAL outside <data-dir>/member/wal would make a live member look empty (and partial).
TEST_F(ConfigTest, WalDirAndSingleDashManagedFlagsAreRefused) {
  ExpectError("extra_args: []", "extra_args: [\"--wal-dir=/elsewhere\"]",
              {"etcd.extra_args[0]", "--wal-dir"});
  ExpectError("extra_args: []", "extra_args: [\"-data-dir=/elsewhere\"]",
              {"etcd.extra_args[0]", "--data-dir"});
  // Flags that would let etcd act behind the agent's back (issue 11).
  ExpectError("extra_args: []", "extra_args: [\"--config-file=/etc/etcd.yaml\"]",
              {"etcd.extra_args[0]", "--config-file"});
  ExpectError("extra_args: []", "extra_args: [\"-force-new-cluster\"]",
              {"etcd.extra_args[0]", "--force-new-cluster discards"});
  ExpectError("extra_args: []", "extra_args: [\"--discovery-srv=example.com\"]",
              {"etcd.extra_args[0]", "--discovery-srv"});
  ExpectError("extra_args: []", "extra_args: [\"--strict-reconfig-check=false\"]",
              {"etcd.extra_args[0]", "quorum"});
  ExpectError("extra_args: []", "extra_args: [\"--client-cert-auth=false\"]",
              {"etcd.extra_args[0]", "--client-cert-auth is set by steward"});
  ExpectError("extra_args: []", "extra_args: [\"--peer-auto-tls\"]",
              {"etcd.extra_args[0]", "--peer-auto-tls"});
}

// cluster.adopt (issue 12): the running cluster's client URLs, checked and named.
TEST_F(ConfigTest, AdoptEndpointsAreCheckedAndNamed) {
  const std::string ports = "  ports: {client: 2379, peer: 2380, agent: 2381, admin: 2382}\n";
  auto with = [&](const std::string& adopt) {
    std::string text = Yaml();
    text.replace(text.find(ports), ports.size(), ports + adopt);
    return ParseConfig(text, "node.yaml");
  };
  auto good = with("  adopt:\n    endpoints: [http://127.0.0.21:2379, http://127.0.0.22:2379]\n");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->cluster.adopt.endpoints.size(), 2u);
  EXPECT_TRUE(good->cluster.adopt.enabled());
  auto urls = good->ClusterClientUrls();
  ASSERT_EQ(urls.size(), 5u);
  EXPECT_EQ(urls.back(), "http://127.0.0.22:2379");
  auto expect = [&](const std::string& adopt, const std::vector<std::string>& want) {
    auto c = with(adopt);
    ASSERT_FALSE(c.ok()) << adopt;
    for (const auto& w : want) {
      EXPECT_NE(c.status().message().find(w), std::string::npos)
          << "error \"" << c.status().message() << "\" lacks \"" << w << "\"";
    }
  };
  expect("  adopt: {endpoints: []}\n", {"cluster.adopt.endpoints", "must list"});
  expect("  adopt: {endpoints: [127.0.0.21:2379]}\n",
         {"cluster.adopt.endpoints[0]", "not an http:// or https:// URL"});
  expect("  adopt: {endpoints: [http://127.0.0.21]}\n",
         {"cluster.adopt.endpoints[0]", "needs a host and a port"});
  expect("  adopt: {endpoints: [http://127.0.0.21:2379, https://127.0.0.22:2379]}\n",
         {"cluster.adopt.endpoints[1]", "mixes http and https"});
  expect("  adopt: {endpoints: [http://127.0.0.12:2379]}\n",
         {"cluster.adopt.endpoints[0]", "configured node's own etcd URL"});
  expect("  adopt: {endpoints: [https://127.0.0.21:2379]}\n",
         {"cluster.adopt.ca_file", "required for https:// endpoints while tls.mode is off"});
  expect("  adopt: {endpoints: [https://127.0.0.21:2379], ca_file: /nonexistent/ca.crt}\n",
         {"cluster.adopt.ca_file", "does not exist"});
  expect("  adopt: {endpoints: [http://127.0.0.21:2379], ca_file: /etc/hostname}\n",
         {"cluster.adopt.ca_file", "only used with https://"});
  expect(
      "  adopt: {endpoints: [https://127.0.0.21:2379], ca_file: /etc/hostname, "
      "cert_file: /etc/hostname}\n",
      {"cluster.adopt.key_file", "go together"});
  expect("  adopt: {endpoints: [http://127.0.0.21:2379], token: x}\n",
         {"cluster.adopt.token", "unknown key"});
}

TEST_F(ConfigTest, MetricsPortIsCheckedAndExclusiveWithTheFlag) {
  auto ok = ParseConfig(
      absl::StrReplaceAll(Yaml(), {{"admin: 2382}", "admin: 2382, metrics: 2393}"}}), "node.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cluster.ports.metrics, 2393);
  ExpectError("admin: 2382}", "admin: 2382, metrics: 2379}",
              {"cluster.ports.metrics", "port 2379 is already cluster.ports.client"});
  ExpectError("admin: 2382}", "admin: 2382, metrics: 70000}",
              {"cluster.ports.metrics", "out of range"});
  auto both = ParseConfig(
      absl::StrReplaceAll(
          Yaml(),
          {{"admin: 2382}", "admin: 2382, metrics: 2393}"},
           {"extra_args: []", "extra_args: [\"--listen-metrics-urls=http://127.0.0.11:9999\"]"}}),
      "node.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("etcd.extra_args[0]: --listen-metrics-urls is set from "
                                         "cluster.ports.metrics"),
            std::string::npos)
      << both.status();
}

TEST_F(ConfigTest, AuthModeIsCheckedAndNeedsTls) {
  auto c = ParseConfig(Yaml(), "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->auth.mode, "unmanaged");  // the agents leave etcd's auth alone unless told
  EXPECT_EQ(c->auth.admin_users, std::vector<std::string>{"steward-admin"});
  ExpectError("tls:\n", "auth:\n  mode: yes\ntls:\n", {"auth.mode", "unmanaged, on, off"});
  ExpectError("tls:\n", "auth:\n  mode: on\ntls:\n", {"auth.mode", "needs TLS"});
  ExpectError("tls:\n", "auth:\n  mode: off\n  admin_users: [root]\ntls:\n",
              {"auth.admin_users[0]", "etcd's own root user"});
  ExpectError("tls:\n", "auth:\n  mode: off\n  admin_users: ops\ntls:\n",
              {"auth.admin_users", "list"});
  ExpectError("tls:\n", "auth:\n  mod: on\ntls:\n", {"auth.mod", "unknown key"});
  ExpectError("tls:\n  mode: off\n", "auth:\n  mode: on\ntls:\n  mode: off\n",
              {"auth.mode", "needs TLS"});
  auto off = ParseConfig(absl::StrReplaceAll(Yaml(), {{"tls:\n",
                                                       "auth:\n  mode: off\n  "
                                                       "admin_users: [ops, bob]\ntls:\n"}}),
                         "node.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->auth.mode, "off");
  EXPECT_EQ(off->auth.admin_users, (std::vector<std::string>{"ops", "bob"}));
}

TEST_F(ConfigTest, AuthOnWithAdoptIsRefused) {
  std::string ca = (dir_ / "ca.crt").string(), key = (dir_ / "ca.key").string();
  std::ofstream(ca) << "x";
  std::ofstream(key) << "x";
  ::chmod(key.c_str(), 0600);
  std::string text = Yaml();
  text.replace(text.find("mode: off"), 9, "mode: issued\n  ca_cert: " + ca + "\n  ca_key: " + key);
  const std::string ports = "  ports: {client: 2379, peer: 2380, agent: 2381, admin: 2382}\n";
  text.replace(text.find(ports), ports.size(),
               ports + "  adopt:\n    endpoints: [https://127.0.0.21:2379]\n");
  ASSERT_TRUE(ParseConfig(text, "node.yaml").ok());
  auto c = ParseConfig(text + "auth:\n  mode: on\n", "node.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("auth.mode"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("cluster.adopt"), std::string::npos) << c.status();
}

TEST_F(ConfigTest, EncryptionKeyFilesAreCheckedAndNamed) {
  const std::string key = (dir_ / "backup.key").string();
  std::ofstream(key) << "c2hvcnQ=\n";  // "short"
  ::chmod(key.c_str(), 0600);
  const std::string store = "backup:\n  store: file:///tmp\n  encryption:\n";
  ExpectError("tls:\n", store + "    key_file: " + key + "\ntls:\n",
              {"backup.encryption.key_file", "32-byte key"});
  ExpectError("tls:\n", store + "    old_key_files: [/x]\ntls:\n",
              {"backup.encryption.key_file", "is required"});
  ExpectError("tls:\n", store + "    key_file: /nonexistent/k\ntls:\n",
              {"backup.encryption.key_file", "/nonexistent/k"});
  std::ofstream(key, std::ios::trunc) << std::string(43, 'A') << "=\n";  // 32 zero bytes
  ::chmod(key.c_str(), 0644);
  ExpectError("tls:\n", store + "    key_file: " + key + "\ntls:\n",
              {"backup.encryption.key_file", "readable by group or others"});
  ::chmod(key.c_str(), 0600);
  auto c = ParseConfig(
      absl::StrReplaceAll(Yaml(), {{"tls:\n", store + "    key_file: " + key +
                                                  "\n    old_key_files: [" + key + "]\ntls:\n"}}),
      "node.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backup.encryption.key_file, key);
  EXPECT_EQ(c->backup.encryption.old_key_files.size(), 1u);
  ExpectError("tls:\n",
              store + "    key_file: " + key + "\n    old_key_files: [/nonexistent/o]\ntls:\n",
              {"backup.encryption.old_key_files[0]", "/nonexistent/o"});
}

}  // namespace
}  // namespace steward
