// Backups to a real S3 protocol server (s3rver): total loss restored from S3, and an S3 outage
// during scheduled backups that leaves the cluster serving and heals when the store is back.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "backup/open.h"
#include "backup/pipeline.h"
#include "etcd/client.h"
#include "harness.h"
#include "s3rver.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kS3TotalLoss = 51, kS3Outage = 52 };

std::string S3Backup(const S3rver& s3, const std::string& interval) {
  return absl::StrCat("backup:\n  store: s3://backups/steward\n  interval: ", interval,
                      "\n  s3:\n    endpoint: ", s3.Endpoint(),
                      "\n    path_style: true\n    region: us-east-1\n"
                      "    access_key_id: S3RVER\n    secret_access_key: S3RVER\n");
}

std::unique_ptr<S3rver> StartS3() {
  auto s3 = S3rver::Start({"backups"});
  if (!s3.ok()) return nullptr;
  return std::move(*s3);
}

std::vector<ListedBackup> Backups(const TestCluster& c, int subnet) {
  auto config = LoadConfig(c.ConfigPath(0));
  if (!config.ok()) return {};
  auto store = OpenStore(config->backup);
  if (!store.ok()) return {};
  auto listed = ListBackups(**store, absl::StrCat("it", subnet));
  return listed.ok() ? *listed : std::vector<ListedBackup>{};
}

TEST(S3BackupTest, TotalLossIsRestoredFromS3) {
  if (S3rver::Binary().empty()) GTEST_FAIL() << "s3rver not installed (make test installs it)";
  auto s3 = StartS3();
  ASSERT_NE(s3, nullptr);
  TestCluster c(kS3TotalLoss, 3, 3, "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n",
                S3Backup(*s3, "1h"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient w = c.Client(c.ClientUrls());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(w.Put(absl::StrCat("/s3/k", i), "v").ok());
  RunResult b = c.Ctl({"backup"});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(b.output.find("S3RVER"), std::string::npos) << "credentials leaked: " << b.output;

  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGTERM);
  for (int i = 0; i < 3; ++i) fs::remove_all(c.DataDir(i));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs() << s3->LogTail();
  // Reads retried (bounded): the restored cluster may still be settling its leadership.
  EtcdClient r = c.Client(c.ClientUrls());
  for (int i = 0; i < 50; ++i) {
    bool present = WaitFor(
        [&] {
          auto got = r.Get(absl::StrCat("/s3/k", i));
          return got.ok() && got->has_value();
        },
        15s);
    ASSERT_TRUE(present) << i << "\n" << c.Logs();
  }
  EXPECT_EQ(c.Logs().find("S3RVER"), std::string::npos) << "credentials in the logs";
}

TEST(S3BackupTest, StoreOutageLeavesTheClusterServingAndBackupsResume) {
  if (S3rver::Binary().empty()) GTEST_FAIL() << "s3rver not installed (make test installs it)";
  auto s3 = StartS3();
  ASSERT_NE(s3, nullptr);
  TestCluster c(kS3Outage, 3, 3, "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n",
                S3Backup(*s3, "2s"));
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  ASSERT_TRUE(WaitFor([&] { return !Backups(c, kS3Outage).empty(); }, 30s)) << c.Logs();

  s3->Stop();
  EtcdClient w = c.Client(c.ClientUrls());
  // The cluster keeps serving writes while scheduled backups fail.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(w.Put(absl::StrCat("/outage/k", i), "v").ok()) << i;
    std::this_thread::sleep_for(300ms);
  }
  // The failed backups show in status (the leader publishes after each attempt).
  RunResult status;
  EXPECT_TRUE(WaitFor(
      [&] {
        status = c.Ctl({"status"});
        return status.exit_code == 0 && status.output.find("last error") != std::string::npos;
      },
      30s))
      << status.output;
  EXPECT_EQ(status.output.find("S3RVER"), std::string::npos) << status.output;

  const size_t before = Backups(c, kS3Outage).size();
  ASSERT_TRUE(s3->Restart().ok());
  // Retries back off from 5s; a new backup lands once the store is back.
  ASSERT_TRUE(WaitFor([&] { return Backups(c, kS3Outage).size() > before; }, 60s))
      << c.Logs() << s3->LogTail();
  EXPECT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 10s));
}

}  // namespace
}  // namespace steward::testing
