// The admin port's pure parts: readiness (admin/readiness.h), one row per reason, and the
// metrics registry's text format (common/metrics.h).
#include <gtest/gtest.h>

#include "admin/readiness.h"
#include "common/metrics.h"

namespace steward {
namespace {

ReadyView Ready() {
  ReadyView v;
  v.etcd_running = true;
  v.status_ok = true;
  v.has_leader = true;
  v.raft_index = 5000;
  v.raft_applied_index = 4990;
  return v;
}

TEST(ReadinessTest, AHealthyVotingMemberIsReady) {
  EXPECT_FALSE(NotReady(Ready()).has_value());
  // etcd 3.3 reports no applied index: not a lag.
  ReadyView v33 = Ready();
  v33.raft_applied_index = 0;
  EXPECT_FALSE(NotReady(v33).has_value());
}

TEST(ReadinessTest, EachReasonIsNamed) {
  const std::vector<std::pair<std::function<void(ReadyView&)>, std::string>> rows = {
      {[](ReadyView& v) { v.etcd_running = false; }, "not running"},
      {[](ReadyView& v) { v.fenced = true; }, "fenced"},
      {[](ReadyView& v) {
         v.status_ok = false;
         v.status_error = "deadline";
       },
       "does not answer: deadline"},
      {[](ReadyView& v) { v.errors = {"raft: corrupt"}; }, "etcd reports: raft: corrupt"},
      {[](ReadyView& v) { v.has_leader = false; }, "no leader"},
      {[](ReadyView& v) { v.is_learner = true; }, "learner"},
      {[](ReadyView& v) { v.raft_applied_index = 100; }, "applied 100 of 5000"},
  };
  for (const auto& [change, want] : rows) {
    ReadyView v = Ready();
    change(v);
    auto why = NotReady(v);
    ASSERT_TRUE(why.has_value()) << want;
    EXPECT_NE(why->find(want), std::string::npos) << *why;
  }
}

TEST(MetricsTest, RendersDeclaredSeriesWithHelpTypeAndEscapedLabels) {
  Metrics m;
  EXPECT_EQ(m.Render(), "") << "nothing set, nothing rendered";
  m.Set("steward_is_leader", 1);
  m.Add("steward_reconcile_steps_total", 1, {{"kind", "promote"}, {"result", "ok"}});
  m.Add("steward_reconcile_steps_total", 2, {{"kind", "promote"}, {"result", "ok"}});
  m.Set("steward_build_info", 1, {{"version", "a\"b\\c"}});
  m.Set("steward_backup_duration_seconds", 1.25);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# HELP steward_is_leader "), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE steward_is_leader gauge\nsteward_is_leader 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE steward_reconcile_steps_total counter\n"
                      "steward_reconcile_steps_total{kind=\"promote\",result=\"ok\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("steward_build_info{version=\"a\\\"b\\\\c\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("steward_backup_duration_seconds 1.25\n"), std::string::npos) << text;
  EXPECT_EQ(m.Value("steward_reconcile_steps_total", {{"kind", "promote"}, {"result", "ok"}}), 3);
  m.Clear("steward_is_leader");
  EXPECT_EQ(m.Render().find("steward_is_leader"), std::string::npos);
}

}  // namespace
}  // namespace steward
