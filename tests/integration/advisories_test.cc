// etcd version advisories (etcd/advisories.h) with real agents and Debian's etcd 3.4.23: status
// (text and JSON) and the leader's /metrics name each member's advisories, and configure-cluster
// refuses a roll to a version whose advisory breaks data, naming it, with nothing stored, unless
// --force. Real agents on 127.0.118.x.
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kAdvisories = 118;

// The spec's "version", as `stewardctl get -o json` shows it ("" when none).
std::string SpecVersion(const TestCluster& c) {
  RunResult r = c.Ctl({"get", "-o", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (j.is_discarded() || !j.contains("spec") || !j["spec"].is_object()) return "";
  return j["spec"].value("version", std::string());
}

TEST(AdvisoriesTest, StatusAndMetricsNameTheAdvisoriesAndABadRollIsRefusedUnlessForced) {
  const std::string v34 = EtcdVersionOf("/usr/bin/etcd");
  ASSERT_EQ(v34.rfind("3.4.", 0), 0u) << "this test is about Debian 12's etcd 3.4, found " << v34;
  TestCluster c(kAdvisories, 3, 3, kFastLeader);
  c.UseEtcd(kDebianEtcd);
  // etcd.versions lists 3.5.2 (etcd #13766's range) under a binary that is not 3.5.2: the roll,
  // once forced, must wait for the binary (U2), so nothing switches either way.
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(c.ConfigPath(i));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text = absl::StrReplaceAll(text,
                               {{"  restart_backoff_max: 2s\n",
                                 absl::StrCat("  restart_backoff_max: 2s\n  versions:\n    ", v34,
                                              ": /usr/bin/etcd\n    3.5.2: /usr/bin/etcd\n")}});
    std::ofstream(c.ConfigPath(i)) << text;
  }
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();

  // status: one line per version and advisory, naming the members.
  RunResult status = c.Ctl({"status"});
  EXPECT_NE(status.output.find(
                absl::StrCat("ADVISORY etcd ", v34, " (n1, n2, n3): eol-3.4, end of life")),
            std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("ADVISORY etcd " + v34 + " (n1, n2, n3): etcd-21694, warning"),
            std::string::npos)
      << status.output;
  RunResult json = c.Ctl({"status", "-o", "json"});
  auto j = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.output;
  ASSERT_EQ(j["members"].size(), 3u);
  for (const auto& m : j["members"]) {
    ASSERT_TRUE(m.contains("advisories")) << m.dump();
    EXPECT_EQ(m["advisories"][0]["id"], "eol-3.4") << m.dump();
    EXPECT_EQ(m["advisories"][0]["effect"], "end of life") << m.dump();
  }

  // The steward leader's /metrics: one series per member and advisory.
  int li = -1;
  WaitFor([&] { return (li = StewardLeader(c)) >= 0; }, 30s);
  ASSERT_GE(li, 0) << c.Logs();
  bool all = WaitFor(
      [&] {
        RunResult m = c.AdminGet(li, "/metrics");
        for (const char* n : {"n1", "n2", "n3"}) {
          if (m.output.find(absl::StrCat("steward_etcd_advisory{member=\"", n, "\",version=\"", v34,
                                         "\",advisory=\"eol-3.4\",effect=\"end_of_life\"} 1")) ==
              std::string::npos) {
            return false;
          }
        }
        return true;
      },
      30s);
  EXPECT_TRUE(all) << c.AdminGet(li, "/metrics").output;

  // A roll to 3.5.2: refused with the advisory; the spec is as it was.
  RunResult refused = c.Ctl({"configure-cluster", "--etcd-version", "3.5.2"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("refusing to roll to etcd 3.5.2: etcd-13766 (3.5.0-3.5.2, etcd "
                                "#13766, refuses a roll)"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("add --force"), std::string::npos) << refused.output;
  EXPECT_EQ(SpecVersion(c), "") << "a refused roll stores nothing";

  // --force: stored, said; the leader then waits for a binary that is 3.5.2, and no member
  // switches.
  RunResult forced = c.Ctl({"configure-cluster", "--etcd-version", "3.5.2", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_NE(forced.output.find("warning: etcd 3.5.2: etcd-13766"), std::string::npos)
      << forced.output;
  EXPECT_EQ(SpecVersion(c), "3.5.2");
  bool waits = WaitFor(
      [&] {
        RunResult g = c.Ctl({"get"});
        return g.output.find("rolling upgrade to etcd 3.5.2 waits") != std::string::npos &&
               g.output.find(absl::StrCat("reports etcd ", v34)) != std::string::npos;
      },
      30s);
  EXPECT_TRUE(waits) << c.Ctl({"get"}).output;
  for (int i = 0; i < 3; ++i) {
    auto st = c.Client(c.ClientUrl(i)).Status(c.ClientUrl(i), 2000ms);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->version, v34) << "member n" << i + 1 << " switched";
  }
}

}  // namespace
}  // namespace steward::testing
