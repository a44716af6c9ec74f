// Foundation integration tests: real agents, real etcd 3.4, on 127.0.X.0/24 loopback addresses.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "etcd/client.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Each test has its own subnet so ctest can run them in parallel.
enum Subnet {
  kForm = 21,
  kEtcdKill = 22,
  kAgentKill = 23,
  kStaggered = 24,
  kCtl = 25,
  kEtcdEnv = 26
};

TEST(ClusterTest, ThreeAgentsFormAClusterAndAPutRoundTrips) {
  TestCluster c(kForm, 3, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 30s)) << "three healthy voters, no learner";
  EtcdClient writer = c.Client({c.ClientUrl(0)});
  ASSERT_TRUE(WaitFor([&] { return writer.Put("/it/hello", "world").ok(); }, 15s));
  EtcdClient reader = c.Client({c.ClientUrl(2)});
  absl::StatusOr<std::optional<std::string>> got = absl::UnavailableError("not read");
  WaitFor(
      [&] {
        got = reader.Get("/it/hello");
        return got.ok();
      },
      15s);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, "world");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdProcessCount(i), 1);
}

// Issue 11: etcd >= 3.4 exits when a variable and a flag set the same value, so an ETCD_NAME
// set on the node for another purpose crash-looped etcd under the agent. etcd's variables no
// longer reach it (nor etcdctl); the agent says which it dropped.
TEST(ClusterTest, EtcdVariablesInTheAgentsEnvironmentNeverReachEtcd) {
  TestCluster c(kEtcdEnv, 3, 3);
  ASSERT_EQ(setenv("ETCD_NAME", "not-this-node", 1), 0);
  ASSERT_EQ(setenv("ETCD_INITIAL_CLUSTER_STATE", "existing", 1), 0);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  unsetenv("ETCD_NAME");
  unsetenv("ETCD_INITIAL_CLUSTER_STATE");
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    auto pid = c.EtcdPid(i);
    ASSERT_TRUE(pid.has_value());
    std::ifstream in("/proc/" + std::to_string(*pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(env.empty()) << "cannot read etcd's environment";
    EXPECT_EQ(env.find("ETCD_NAME="), std::string::npos);
    EXPECT_EQ(env.find("ETCD_INITIAL_CLUSTER_STATE="), std::string::npos);
  }
  std::ifstream log(c.Root() + "/agent-n1.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("not passed to etcd or etcdctl: ETCD_"), std::string::npos) << text;
}

TEST(ClusterTest, KilledEtcdIsRestartedAndRejoins) {
  TestCluster c(kEtcdKill, 3, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  auto old_pid = c.EtcdPid(1);
  ASSERT_TRUE(old_pid.has_value());
  ASSERT_EQ(kill(*old_pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = c.EtcdPid(1);
        return p.has_value() && *p != *old_pid;
      },
      30s))
      << c.Logs();
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  EXPECT_EQ(c.EtcdProcessCount(1), 1);
  // The restarted member serves reads of data written while it was down.
  EtcdClient client = c.Client({c.ClientUrl(1)});
  EtcdClient first = c.Client({c.ClientUrl(0)});
  ASSERT_TRUE(WaitFor([&] { return first.Put("/it/after", "restart").ok(); }, 15s));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = client.Get("/it/after");
        return got.ok() && got->has_value() && **got == "restart";
      },
      10s));
}

TEST(ClusterTest, RestartedAgentAdoptsTheRunningEtcd) {
  TestCluster c(kAgentKill, 3, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  auto etcd_pid = c.EtcdPid(0);
  ASSERT_TRUE(etcd_pid.has_value());
  c.SignalAgent(0, SIGKILL);
  // etcd outlives its agent.
  std::this_thread::sleep_for(1s);
  ASSERT_EQ(c.EtcdPid(0), etcd_pid);
  c.StartAgent(0);
  // Give the new agent time to (wrongly) start a second etcd or restart the member.
  std::this_thread::sleep_for(4s);
  EXPECT_TRUE(c.AgentRunning(0)) << c.Logs();
  EXPECT_EQ(c.EtcdPid(0), etcd_pid) << "the member was restarted\n" << c.Logs();
  EXPECT_EQ(c.EtcdProcessCount(0), 1) << c.Logs();
  EXPECT_TRUE(c.WaitHealthy(3, 30s)) << c.Logs();
  // And the adopted etcd is still supervised: kill it, the new agent restarts it.
  ASSERT_EQ(kill(*etcd_pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = c.EtcdPid(0);
        return p.has_value() && *p != *etcd_pid;
      },
      30s))
      << c.Logs();
  EXPECT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
}

TEST(ClusterTest, AgentsStartedSecondsApartStillFormOneCluster) {
  TestCluster c(kStaggered, 3, 3);
  c.StartAgent(2);
  std::this_thread::sleep_for(3s);
  // Alone, the agent waits: its etcd runs but the cluster has no quorum yet.
  EXPECT_TRUE(c.AgentRunning(2)) << c.Logs();
  EXPECT_FALSE(c.Status().healthy);
  c.StartAgent(0);
  std::this_thread::sleep_for(3s);
  c.StartAgent(1);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  std::set<uint64_t> cluster_ids;
  ASSERT_TRUE(WaitFor(
      [&] {
        cluster_ids.clear();
        for (const auto& m : c.Status().members) {
          if (!m.status.has_value()) return false;
          cluster_ids.insert(m.status->cluster_id);
        }
        return true;
      },
      30s));
  EXPECT_EQ(cluster_ids.size(), 1u) << "members disagree on the cluster";
}

TEST(ClusterTest, StewardctlStatusShowsTheClusterAndUnreachableMembers) {
  TestCluster c(kCtl, 3, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  // A loaded machine can make one member's Status miss its deadline: ask again (bounded).
  RunResult ok;
  WaitFor(
      [&] {
        ok = RunCommand({STEWARDCTL_BIN, "status", "--config", c.ConfigPath(0)}, 30s);
        return ok.exit_code == 0;
      },
      30s);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  for (const std::string& want : {std::string("NAME"), std::string("n1"), std::string("n2"),
                                  std::string("n3"), std::string("leader"), std::string("follower"),
                                  EtcdVersionOf(kMainEtcd), std::string("healthy")}) {
    EXPECT_NE(ok.output.find(want), std::string::npos) << want << "\n" << ok.output;
  }
  RunResult json;
  WaitFor(
      [&] {
        json = RunCommand({STEWARDCTL_BIN, "status", "--endpoints", c.ClientUrl(1), "-o", "json",
                           "--cacert", c.CaCert(), "--cert", c.AdminCert(), "--key", c.AdminKey()},
                          30s);
        return json.exit_code == 0;
      },
      30s);
  EXPECT_EQ(json.exit_code, 0) << json.output;
  auto j = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.output;
  EXPECT_EQ(j["members"].size(), 3u);
  EXPECT_TRUE(j["healthy"].get<bool>());
  // etcdctl's conventions: flags before the subcommand, -w, and its environment variables.
  RunResult global;
  WaitFor(
      [&] {
        global = RunCommand(
            {"/usr/bin/env", "ETCDCTL_CACERT=" + c.CaCert(), "ETCDCTL_CERT=" + c.AdminCert(),
             "ETCDCTL_KEY=" + c.AdminKey(), "ETCDCTL_ENDPOINTS=" + c.ClientUrl(2), STEWARDCTL_BIN,
             "-w", "json", "status"},
            30s);
        return global.exit_code == 0;
      },
      30s);
  auto g = nlohmann::json::parse(global.output, nullptr, false);
  ASSERT_TRUE(g.is_object()) << global.output;
  EXPECT_EQ(g["members"].size(), 3u);
  RunResult from_env = RunCommand({"/usr/bin/env", "STEWARD_CONFIG=" + c.ConfigPath(0),
                                   STEWARDCTL_BIN, "get", "--output", "json"},
                                  30s);
  EXPECT_EQ(from_env.exit_code, 0) << from_env.output;
  EXPECT_NE(from_env.output.find("\"desired_size\": 3"), std::string::npos) << from_env.output;
  RunResult before =
      RunCommand({STEWARDCTL_BIN, "--config", c.ConfigPath(0), "history", "-o", "json"}, 30s);
  EXPECT_EQ(before.exit_code, 0) << before.output;
  EXPECT_TRUE(nlohmann::json::parse(before.output, nullptr, false).is_array()) << before.output;
  // Without root (issue 15): an operator's account with a copy of the config and its own
  // client certificate. The node's CA key, data dir and etcd binary are not its business.
  if (geteuid() == 0) {
    const std::string dir = c.Root() + "/operator";
    fs::create_directories(dir);
    for (const auto& [from, to] :
         {std::pair{c.ConfigPath(0), dir + "/node.yaml"}, std::pair{c.CaCert(), dir + "/ca.crt"},
          std::pair{c.AdminCert(), dir + "/admin.crt"},
          std::pair{c.AdminKey(), dir + "/admin.key"}}) {
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
      ::chown(to.c_str(), 65534, 65534);
      fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write);
    }
    fs::permissions(c.Root(), fs::perms::others_exec, fs::perm_options::add);
    ::chown(dir.c_str(), 65534, 65534);
    RunResult as_nobody;
    WaitFor(
        [&] {
          as_nobody = RunCommand(
              {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               STEWARDCTL_BIN, "--config", dir + "/node.yaml", "--cacert", dir + "/ca.crt",
               "--cert", dir + "/admin.crt", "--key", dir + "/admin.key", "status", "-o", "json"},
              30s);
          return as_nobody.exit_code == 0;
        },
        30s);
    EXPECT_EQ(as_nobody.exit_code, 0) << as_nobody.output;
    EXPECT_NE(as_nobody.output.find("\"healthy\": true"), std::string::npos) << as_nobody.output;
  }
  RunResult version = RunCommand({STEWARDCTL_BIN, "--version"}, 10s);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.output.rfind("stewardctl ", 0), 0u) << version.output;

  // Stop n3 for good: status still lists it, as unreachable, and exits non-zero.
  c.SignalAgent(2, SIGTERM);
  ASSERT_FALSE(c.EtcdPid(2).has_value()) << "agent stop left etcd running";
  RunResult degraded = RunCommand({STEWARDCTL_BIN, "status", "--config", c.ConfigPath(0)}, 30s);
  EXPECT_EQ(degraded.exit_code, 1) << degraded.output;
  EXPECT_NE(degraded.output.find("unreachable"), std::string::npos) << degraded.output;
  EXPECT_NE(degraded.output.find("n3"), std::string::npos) << degraded.output;
}

TEST(AgentTest, BadConfigExitsTwoNamingTheKey) {
  std::string path = std::filesystem::temp_directory_path() /
                     ("steward-bad-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(path)
      << "cluster:\n  name: x\n  size: 5\n  nodes:\n    - {name: a, host: 127.0.0.1}\n"
         "node:\n  name: a\n  data_dir: /tmp/steward-bad-dd\n";
  RunResult r = RunCommand({STEWARD_BIN, "--config", path}, 30s);
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cluster.size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("got 5"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists("/tmp/steward-bad-dd")) << "a bad config touched the disk";
}

}  // namespace
}  // namespace steward::testing
