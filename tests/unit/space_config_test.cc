// etcd.auto_compaction_mode / etcd.auto_compaction_retention: the defaults, the forms etcd
// takes, and every bad input named by its key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "config/config.h"

namespace steward {
namespace {

std::string Yaml(const std::string& etcd_lines) {
  return absl::StrCat(R"(
cluster:
  name: demo
  nodes:
    - {name: n1, host: 127.0.0.11}
node:
  name: n1
  data_dir: )",
                      std::filesystem::temp_directory_path().string(), "/steward-space-config-",
                      getpid(), R"(
etcd:
  binary: /bin/true
)",
                      etcd_lines, "tls:\n  mode: off\n");
}

absl::StatusOr<Config> Parse(const std::string& etcd_lines) {
  return ParseConfig(Yaml(etcd_lines), "node.yaml");
}

void ExpectError(const std::string& etcd_lines, const std::vector<std::string>& want) {
  auto c = Parse(etcd_lines);
  ASSERT_FALSE(c.ok()) << "accepted:\n" << etcd_lines;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  for (const auto& w : want) {
    EXPECT_NE(c.status().message().find(w), std::string::npos)
        << "error \"" << c.status().message() << "\" lacks \"" << w << "\"";
  }
}

TEST(SpaceConfigTest, DefaultIsPeriodicOneHour) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.auto_compaction_mode, "periodic");
  EXPECT_EQ(c->etcd.auto_compaction_retention, "1h");
}

TEST(SpaceConfigTest, PeriodicDurationsInEtcdsForm) {
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{{"30m", "30m"},
                                                                                {"90m", "90m"},
                                                                                {"2h", "2h"},
                                                                                {"1d", "24h"},
                                                                                {"45s", "45s"},
                                                                                {"1m30s", "90s"},
                                                                                {"0", "0"}}) {
    auto c = Parse("  auto_compaction_retention: " + in + "\n");
    ASSERT_TRUE(c.ok()) << in << ": " << c.status();
    EXPECT_EQ(c->etcd.auto_compaction_mode, "periodic");
    EXPECT_EQ(c->etcd.auto_compaction_retention, out) << in;
  }
}

TEST(SpaceConfigTest, RevisionMode) {
  auto c = Parse("  auto_compaction_mode: revision\n  auto_compaction_retention: 10000\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.auto_compaction_mode, "revision");
  EXPECT_EQ(c->etcd.auto_compaction_retention, "10000");
}

TEST(SpaceConfigTest, BadInputsNameTheKey) {
  ExpectError("  auto_compaction_mode: hourly\n",
              {"etcd.auto_compaction_mode", "periodic or revision", "\"hourly\""});
  ExpectError("  auto_compaction_mode: revision\n",
              {"etcd.auto_compaction_retention", "is required", "revisions"});
  ExpectError("  auto_compaction_mode: revision\n  auto_compaction_retention: 1h\n",
              {"etcd.auto_compaction_retention", "number of revisions", "\"1h\""});
  ExpectError("  auto_compaction_mode: revision\n  auto_compaction_retention: -5\n",
              {"etcd.auto_compaction_retention", "\"-5\""});
  ExpectError("  auto_compaction_retention: soon\n",
              {"etcd.auto_compaction_retention", "duration", "\"soon\""});
  ExpectError("  auto_compaction_retention: 500ms\n",
              {"etcd.auto_compaction_retention", "at least 1s", "\"500ms\""});
  ExpectError("  auto_compaction_retention: [1h]\n",
              {"etcd.auto_compaction_retention", "must be a string"});
}

// A drop-in config carries etcd's own --auto-compaction-* in extra_args: they decide, and the
// agent renders none of its own; setting both ways is refused, naming the extra_args entry.
TEST(SpaceConfigTest, ExtraArgsDecideOrClash) {
  auto c = Parse("  extra_args: [\"--auto-compaction-retention=5\"]\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.auto_compaction_mode, "");
  ExpectError(
      "  extra_args: [\"--snapshot-count=100\", \"--auto-compaction-mode=revision\"]\n"
      "  auto_compaction_retention: 2h\n",
      {"etcd.extra_args[1]", "--auto-compaction-mode",
       "etcd.auto_compaction_retention; set one or the other"});
}

// cluster.recover_nospace: the leader's own NOSPACE recovery, on unless turned off.
TEST(SpaceConfigTest, RecoverNospace) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cluster.recover_nospace);
  std::string yaml = Yaml("");
  const std::string at = "  nodes:\n";
  yaml.replace(yaml.find(at), at.size(), "  recover_nospace: false\n" + at);
  auto off = ParseConfig(yaml, "node.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->cluster.recover_nospace);
  yaml.replace(yaml.find("false"), 5, "maybe");
  auto bad = ParseConfig(yaml, "node.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cluster.recover_nospace"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("true or false"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace steward
