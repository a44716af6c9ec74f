// What the agent's children (etcd, etcdctl, etcdutl) get from its environment, and running a
// helper with a deadline and a cancel check (common/subprocess.h).
#include "common/subprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace steward {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& prefix) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
}

TEST(ChildEnvironmentTest, EtcdsAndCloudVariablesAreDroppedAndExtrasAdded) {
  setenv("ETCD_NAME", "elsewhere", 1);
  setenv("ETCDCTL_ENDPOINTS", "http://10.0.0.1:2379", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  setenv("STEWARD_TEST_KEEP", "1", 1);
  setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  std::vector<std::string> env = ChildEnvironment({"ETCDCTL_API=3"});
  EXPECT_FALSE(Has(env, "NOTIFY_SOCKET="))
      << "etcd would send systemd its own READY=1 for the agent's unit (seen under systemd)";
  EXPECT_FALSE(Has(env, "ETCD_NAME="));
  EXPECT_FALSE(Has(env, "ETCDCTL_ENDPOINTS="));
  EXPECT_FALSE(Has(env, "AWS_"));
  EXPECT_TRUE(Has(env, "STEWARD_TEST_KEEP=1"));
  EXPECT_TRUE(Has(env, "ETCDCTL_API=3")) << "what the agent sets itself is passed";
  std::vector<std::string> dropped = DroppedEtcdVariables();
  EXPECT_NE(std::find(dropped.begin(), dropped.end(), "ETCD_NAME"), dropped.end());
  EXPECT_NE(std::find(dropped.begin(), dropped.end(), "ETCDCTL_ENDPOINTS"), dropped.end());
  EXPECT_EQ(std::find(dropped.begin(), dropped.end(), "AWS_SECRET_ACCESS_KEY"), dropped.end())
      << "credentials are dropped silently, never named in a log";
  EXPECT_EQ(std::find(dropped.begin(), dropped.end(), "NOTIFY_SOCKET"), dropped.end())
      << "systemd's variables are not etcd's: no warning about them";
  unsetenv("ETCD_NAME");
  unsetenv("ETCDCTL_ENDPOINTS");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("STEWARD_TEST_KEEP");
  unsetenv("NOTIFY_SOCKET");
}

TEST(RunProcessTest, AHelperSeesOnlyTheFilteredEnvironment) {
  setenv("ETCD_DATA_DIR", "/elsewhere", 1);
  auto r = RunProcess({"/usr/bin/env"}, {"ETCDCTL_API=3"}, std::chrono::seconds(10));
  unsetenv("ETCD_DATA_DIR");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output.find("ETCD_DATA_DIR"), std::string::npos);
  EXPECT_NE(r->output.find("ETCDCTL_API=3"), std::string::npos);
}

TEST(RunProcessTest, ACancelledHelperIsKilled) {
  int asks = 0;
  auto r =
      RunProcess({"/bin/sleep", "60"}, {}, std::chrono::seconds(60), [&] { return ++asks > 3; });
  EXPECT_TRUE(absl::IsCancelled(r.status())) << r.status();
}

}  // namespace
}  // namespace steward
