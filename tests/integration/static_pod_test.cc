// The static-pod runner (runner.kind: static-pod) with a stand-in kubelet (fake_kubelet.h):
// a three-node cluster forms, is backed up, heals a member whose data dir was wiped, and is
// restored from its backup — all through manifests the agents write and remove. Real agents and
// etcd on 127.0.85.x.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "fake_kubelet.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kStaticPod = 85 };

TEST(StaticPodTest, AClusterFormsIsBackedUpHealsAndIsRestoredThroughStaticPods) {
  TestCluster c(kStaticPod, 3, 3, kFastLeader,
                std::string("runner:\n  kind: static-pod\n  image: registry.example/etcd:3.4.23\n"
                            "  manifest_dir: ROOT/manifests\n") +
                    kFileBackup);
  fs::create_directories(c.Root() + "/manifests");
  FakeKubelet kubelet(c.Root() + "/manifests", "/usr/bin/etcd", c.Root());
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 90s)) << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    const std::string file = "etcd-steward-n" + std::to_string(i + 1) + ".yaml";
    EXPECT_TRUE(fs::exists(c.Root() + "/manifests/" + file));
    EXPECT_GT(kubelet.PidOf(file), 0) << "etcd runs as the kubelet's pod, not the agent's child";
    EXPECT_FALSE(c.EtcdPid(i).has_value()) << "no child etcd of the agent";
  }
  Put(c, "/static-pod/before", "1");

  const std::string name = TakeBackup(c);
  ASSERT_FALSE(name.empty());
  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find(name), std::string::npos) << list.output;

  // n2's data dir is wiped under its running etcd, which then dies: the agent removes its
  // manifest rather than let the kubelet restart etcd on the empty dir (D1), and the leader
  // heals the member (remove, add as a learner, join order: a new manifest, promote).
  const pid_t old = kubelet.PidOf("etcd-steward-n2.yaml");
  fs::remove_all(c.DataDir(1) + "/etcd");
  kill(old, SIGKILL);
  EXPECT_TRUE(WaitFor(
      [&] {
        const pid_t now = kubelet.PidOf("etcd-steward-n2.yaml");
        return now > 0 && now != old;
      },
      120s))
      << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EtcdClient n2 = c.Client(c.ClientUrl(1));
  absl::StatusOr<std::optional<std::string>> got = absl::UnavailableError("not read");
  WaitFor(
      [&] {
        got = n2.Get("/static-pod/before");
        return got.ok() && got->has_value();
      },
      30s);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value()) << "the healed member holds the data written before";

  // A restore of the whole cluster through the manifests: stop (remove), restore, start fenced
  // (a manifest on the fence port), unfence (rewritten on the client port).
  Put(c, "/static-pod/after", "1");
  RunResult r = c.Ctl({"restore-backup", name, "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient n1 = c.Client(c.ClientUrl(0));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto before = n1.Get("/static-pod/before");
        auto after = n1.Get("/static-pod/after");
        return before.ok() && before->has_value() && after.ok() && !after->has_value();
      },
      30s))
      << "the restored cluster holds what the backup held, and nothing newer\n"
      << c.Logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fs::exists(c.Root() + "/manifests/etcd-steward-n" + std::to_string(i + 1) + ".yaml"),
              true);
  }
  if (getenv("STEWARD_TEST_LOGS")) std::cerr << c.Logs();
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGTERM);
  // A stopped agent stops its etcd: the manifest is gone.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(
        fs::exists(c.Root() + "/manifests/etcd-steward-n" + std::to_string(i + 1) + ".yaml"));
  }
}

}  // namespace
}  // namespace steward::testing
