// The admin port (issue 14, part): /healthz, /readyz, /leader and /metrics on every agent of a
// real 3-node TLS cluster (127.0.96.x). Health endpoints answer without a client certificate,
// /leader and /metrics need one; exactly one agent is the leader; a member whose etcd stops
// answering is not ready, with the reason; the live /metrics passes `promtool check metrics`;
// cluster.ports.metrics serves etcd's own metrics in plain HTTP.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "harness.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

enum Subnet { kAdmin = 96 };

// The admin port's answer: status (0: none) and body.
struct Reply {
  int status = 0;
  std::string body;
};

Reply Get(const TestCluster& c, int i, const std::string& path, bool with_cert) {
  RunResult r = c.AdminGet(i, path, with_cert);
  return {r.exit_code, r.output};
}

TEST(AdminTest, HealthReadinessLeaderAndMetricsOnTheAdminPort) {
  // cluster.ports.metrics: etcd's own metrics in plain HTTP as well.
  TestCluster c(kAdmin, 3, 3, std::string(kFastLeader) + "  ports:\n    metrics: 2393\n",
                kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();

  for (int i = 0; i < 3; ++i) {
    // Load balancers have no client certificate: health answers anyway.
    Reply h = Get(c, i, "/healthz", false);
    EXPECT_EQ(h.status, 200) << "node " << i << ": " << h.body;
    EXPECT_TRUE(WaitFor([&] { return Get(c, i, "/readyz", false).status == 200; }, 30s))
        << "node " << i << ": " << Get(c, i, "/readyz", false).body;
    // The rest needs one.
    Reply anonymous = Get(c, i, "/metrics", false);
    EXPECT_EQ(anonymous.status, 403) << anonymous.body;
    EXPECT_EQ(Get(c, i, "/leader", false).status, 403);
  }

  // Exactly one agent says it leads.
  int leader = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        int leaders = 0;
        for (int i = 0; i < 3; ++i) {
          if (Get(c, i, "/leader", true).status == 200) {
            ++leaders;
            leader = i;
          }
        }
        return leaders == 1;
      },
      30s))
      << c.Logs();
  const int follower = (leader + 1) % 3;
  Reply not_leader = Get(c, follower, "/leader", true);
  EXPECT_EQ(not_leader.status, 503);
  EXPECT_NE(not_leader.body.find("not the steward leader"), std::string::npos) << not_leader.body;

  // The leader's metrics: the cluster's counts and its first backup; every agent's: its own
  // member, its certificates, the build.
  Reply m;
  ASSERT_TRUE(WaitFor(
      [&] {
        m = Get(c, leader, "/metrics", true);
        return m.status == 200 && m.body.find("steward_members_healthy 3\n") != std::string::npos &&
               m.body.find("steward_backup_last_success_timestamp_seconds ") != std::string::npos;
      },
      60s))
      << m.body;
  for (const char* want :
       {"# TYPE steward_is_leader gauge", "steward_is_leader 1\n", "steward_members_voting 3\n",
        "steward_members_desired 3\n", "steward_etcd_running 1\n", "steward_member_has_leader 1\n",
        "steward_certificate_expiry_timestamp_seconds{cert=\"server\"} ",
        "steward_build_info{version=\"", "# TYPE steward_etcd_restarts_total counter"}) {
    EXPECT_NE(m.body.find(want), std::string::npos) << want << " not in:\n" << m.body;
  }
  Reply fm = Get(c, follower, "/metrics", true);
  EXPECT_NE(fm.body.find("steward_is_leader 0\n"), std::string::npos) << fm.body;
  EXPECT_EQ(fm.body.find("steward_members_voting"), std::string::npos)
      << "only the leader reports the cluster's counts:\n"
      << fm.body;

  // The same figures as `stewardctl status -o json` (a quiet cluster: the same moment).
  auto metric = [&m](const std::string& name) -> long {
    const size_t at = m.body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stol(m.body.substr(at + name.size() + 2));
  };
  RunResult st = c.Ctl({"status", "-o", "json"});
  auto sj = nlohmann::json::parse(st.output, nullptr, false);
  ASSERT_TRUE(sj.is_object()) << st.output;
  EXPECT_EQ(metric("steward_members_voting"), sj.value("voters", -2)) << st.output;
  EXPECT_EQ(metric("steward_members_healthy"), sj.value("healthy_voters", -2)) << st.output;
  long learners = 0;
  for (const auto& mem : sj["members"]) learners += mem.value("role", "") == "learner" ? 1 : 0;
  EXPECT_EQ(metric("steward_members_learner"), learners);

  // promtool checks the live exposition (names, types, help, units).
  const std::string file = c.Root() + "/metrics.txt";
  std::ofstream(file) << m.body;
  RunResult lint =
      RunCommand({"/bin/sh", "-c", absl::StrCat(PROMTOOL_BIN, " check metrics < ", file)}, 30s);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;

  // etcd's own metrics, scrapable without an etcd client certificate.
  httplib::Client etcd_metrics(c.Host(0), 2393);
  etcd_metrics.set_connection_timeout(3, 0);
  auto em = etcd_metrics.Get("/metrics");
  ASSERT_TRUE(em) << "nothing on etcd's metrics URL";
  EXPECT_EQ(em->status, 200);
  EXPECT_NE(em->body.find("etcd_server_has_leader 1"), std::string::npos);

  // A member whose etcd stops answering is not ready, and says why; then ready again.
  auto pid = c.EtcdPid(follower);
  ASSERT_TRUE(pid.has_value());
  ::kill(*pid, SIGSTOP);
  Reply down;
  const bool noticed = WaitFor(
      [&] {
        down = Get(c, follower, "/readyz", false);
        return down.status == 503;
      },
      20s);
  ::kill(*pid, SIGCONT);
  EXPECT_TRUE(noticed) << down.status << " " << down.body;
  EXPECT_NE(down.body.find("etcd does not answer"), std::string::npos) << down.body;
  EXPECT_EQ(Get(c, follower, "/healthz", false).status, 200) << "the agent itself is alive";
  EXPECT_TRUE(WaitFor([&] { return Get(c, follower, "/readyz", false).status == 200; }, 30s))
      << Get(c, follower, "/readyz", false).body;
}

}  // namespace
}  // namespace steward::testing
