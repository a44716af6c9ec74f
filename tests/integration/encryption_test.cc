// Backups encrypted at rest (backup.encryption) with real agents and etcd 3.4 on 127.0.29.x:
// no plaintext of a known value in the store, restore through the key, a key rotation with the
// old key kept for older backups, and a wrong key refused before anything is stopped.
#include "backup/encryption.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kSubnet = 29;
constexpr char kCanary[] = "plaintext-canary-4242-in-etcd";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A key file as an operator makes one (openssl rand -base64 32; chmod 600); returns its id.
std::string WriteKey(const std::string& path, char fill) {
  std::ofstream(path, std::ios::trunc) << absl::Base64Escape(std::string(32, fill)) << "\n";
  ::chmod(path.c_str(), 0600);
  return MakeEncryptionKey(std::string(32, fill)).id;
}

// Whether any file under `dir` holds `needle`.
bool StoreHolds(const fs::path& dir, const std::string& needle) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && Slurp(e.path()).find(needle) != std::string::npos) return true;
  }
  return false;
}

void Reload(TestCluster& c, const std::string& must_log) {
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGHUP);
  for (int i = 0; i < 3; ++i) {
    const std::string log = absl::StrCat(c.Root(), "/agent-n", i + 1, ".log");
    ASSERT_TRUE(WaitFor([&] { return absl::StrContains(Slurp(log), must_log); }, 30s))
        << "n" << i + 1 << " did not reload with " << must_log << "\n"
        << c.Logs();
  }
}

TEST(EncryptionTest, BackupsHoldNoPlaintextRestoreThroughTheKeyAndSurviveARotation) {
  // The key files live beside the store; ROOT is the test's temp dir.
  const std::string yaml = absl::StrCat(
      "backup:\n  store: file://ROOT/backups\n  interval: 1h\n  delta_interval: 300ms\n"
      "  encryption:\n    key_file: ROOT/key1\n");
  TestCluster c(kSubnet, 3, 3, kFastLeader, yaml);
  const std::string id1 = WriteKey(c.Root() + "/key1", 'a');
  const std::string id2 = WriteKey(c.Root() + "/key2", 'b');
  const std::string id3 = WriteKey(c.Root() + "/key3", 'c');
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();

  Put(c, "/it/secret", kCanary);
  const std::string first = TakeBackup(c);
  ASSERT_FALSE(first.empty());
  // A delta backup carries the value too (written after the automatic first backup).
  Put(c, "/it/secret2", kCanary);
  std::vector<fs::path> deltas;
  ASSERT_TRUE(WaitFor(
      [&] {
        deltas.clear();
        for (const auto& e : fs::recursive_directory_iterator(c.Root() + "/backups")) {
          if (absl::EndsWith(e.path().string(), ".delta.zst")) deltas.push_back(e.path());
        }
        return !deltas.empty();
      },
      30s))
      << c.Logs();
  for (const auto& d : deltas) EXPECT_EQ(Slurp(d).substr(0, 8), "STWDENC1") << d;
  EXPECT_FALSE(StoreHolds(c.Root() + "/backups", kCanary)) << "the store holds the value in clear";
  const std::string meta = Slurp(c.Root() + "/backups/it29/backups/" + first + "/meta.json");
  EXPECT_TRUE(absl::StrContains(meta, id1)) << meta;
  RunResult status = c.Ctl({"status"});
  EXPECT_FALSE(absl::StrContains(status.output, "NOT ENCRYPTED")) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "(encrypted, key " + id1 + ")")) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "auth:           off")) << status.output;
  RunResult listed = c.Ctl({"list-backups"});
  EXPECT_TRUE(absl::StrContains(listed.output, "encrypted (key " + id1 + ")")) << listed.output;
  // zstd may code a literal so that the value is not stored verbatim even in clear: the
  // object must also be in the encrypted format.
  const std::string object =
      Slurp(c.Root() + "/backups/it29/backups/" + first + "/snapshot.db.zst");
  EXPECT_EQ(object.substr(0, 8), "STWDENC1");

  // Restore through the key.
  Put(c, "/it/secret", "changed");
  RunResult r1 = c.Ctl({"restore-backup", first, "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(r1.exit_code, 0) << r1.output << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/secret").value_or("<absent>"), kCanary);

  // Rotation: new backups under key2, key1 kept for the older ones.
  c.ReplaceInConfigs(
      "    key_file: " + c.Root() + "/key1\n",
      "    key_file: " + c.Root() + "/key2\n    old_key_files: [" + c.Root() + "/key1]\n");
  Reload(c, "encrypted, key " + id2);
  const std::string second = TakeBackup(c);
  ASSERT_FALSE(second.empty());
  EXPECT_TRUE(
      absl::StrContains(Slurp(c.Root() + "/backups/it29/backups/" + second + "/meta.json"), id2));
  Put(c, "/it/secret", "changed again");
  RunResult r2 = c.Ctl({"restore-backup", first, "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(r2.exit_code, 0) << r2.output << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/secret").value_or("<absent>"), kCanary);

  // A wrong key (key3, nothing old): refused, naming the key, and nothing is stopped.
  c.ReplaceInConfigs(
      "    key_file: " + c.Root() + "/key2\n    old_key_files: [" + c.Root() + "/key1]\n",
      "    key_file: " + c.Root() + "/key3\n");
  Reload(c, "encrypted, key " + id3);
  Put(c, "/it/secret", "after the rotation");
  std::vector<std::optional<pid_t>> etcd_before;
  for (int i = 0; i < 3; ++i) etcd_before.push_back(c.EtcdPid(i));
  RunResult refused = c.Ctl({"restore-backup", first, "--yes", "--wait", "60"}, true, 90s);
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, id1)) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "old_key_files")) << refused.output;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.EtcdPid(i), etcd_before[static_cast<size_t>(i)]) << "n" << i + 1 << " was stopped";
  }
  EXPECT_EQ(Get(c, 0, "/it/secret").value_or("<absent>"), "after the rotation");
  EXPECT_EQ(c.HealthyVoters(), (std::vector<std::string>{"n1", "n2", "n3"}));
}

}  // namespace
}  // namespace steward::testing
