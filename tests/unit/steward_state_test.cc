// `stewardctl status`'s steward lines: the leader's report says how old it is, and a report
// past three missed rewrites is flagged SILENT (issue 14: an idle reconciler and a dead one
// must not look the same).
#include <gtest/gtest.h>

#include "control/history.h"
#include "ctl/status.h"

namespace steward {
namespace {

nlohmann::json State(int64_t at, int64_t refresh) {
  nlohmann::json r = {{"leader", "n1"},
                      {"term", 3},
                      {"step", "none"},
                      {"detail", "cluster at size 3, all members healthy"},
                      {"at", at}};
  if (refresh > 0) r["refresh"] = refresh;
  return {{"leader", "n1"}, {"reconciler", r}};
}

TEST(StewardStateTest, AFreshReportSaysItsAgeAndIsNotSilent) {
  const std::string out = DescribeStewardState(State(1000, 30), 1045);
  EXPECT_NE(out.find("reported by n1 45s ago"), std::string::npos) << out;
  EXPECT_EQ(out.find("SILENT"), std::string::npos) << out;
}

TEST(StewardStateTest, AReportPastThreeRewritesIsSilent) {
  const std::string out = DescribeStewardState(State(1000, 30), 1091);
  EXPECT_NE(out.find("SILENT: no report for 91s"), std::string::npos) << out;
}

TEST(StewardStateTest, AReportWithoutARefreshIsNeverCalledSilent) {
  // Written by an agent from before reports were rewritten: its age is how long it has been at
  // that step, and nothing more can be told.
  EXPECT_EQ(DescribeStewardState(State(1000, 0), 5000).find("SILENT"), std::string::npos);
}

TEST(StewardStateTest, NoLeaderKeySaysNobodyHoldsTheLease) {
  EXPECT_NE(DescribeStewardState(nlohmann::json::object(), 1).find("no agent holds the leader"),
            std::string::npos);
}

// Issue 34 part 3: read without a quorum (a member's own copy), the leader key names an agent
// that can no longer keep its lease; it is not shown as leader, and the report is shown as
// the last one from before the loss, never SILENT (nobody could rewrite it).
TEST(StewardStateTest, ReadWithoutAQuorumShowsNoLeaderAndTheLastReportAsSuch) {
  nlohmann::json local = State(1000, 30);
  local.erase("leader");
  local["last_leader"] = "n1";
  local["local"] = true;
  const std::string out = DescribeStewardState(local, 2000);
  EXPECT_EQ(out.find("steward leader: n1"), std::string::npos) << out;
  EXPECT_NE(out.find("steward leader: none (the quorum is lost"), std::string::npos) << out;
  EXPECT_NE(out.find("the last was n1"), std::string::npos) << out;
  EXPECT_NE(out.find("last report:    cluster at size 3"), std::string::npos) << out;
  EXPECT_EQ(out.find("SILENT"), std::string::npos) << out;
}

TEST(EventTest, JsonRoundTripsAndToleratesMissingFields) {
  Event e{1795700000123, 7, "n2", "join", "order from n1", "ok"};
  const Event back = EventFromJson(EventToJson(e));
  EXPECT_EQ(back.at_ms, e.at_ms);
  EXPECT_EQ(back.term, 7u);
  EXPECT_EQ(back.node, "n2");
  EXPECT_EQ(back.action, "join");
  EXPECT_EQ(back.reason, "order from n1");
  EXPECT_EQ(back.result, "ok");
  EXPECT_EQ(EventToJson(e)["at"], 1795700000);
  const Event partial = EventFromJson(nlohmann::json{{"action", "wait"}});
  EXPECT_EQ(partial.action, "wait");
  EXPECT_EQ(partial.at_ms, 0);
  EXPECT_TRUE(EventFromJson(nlohmann::json::array()).action.empty());
}

}  // namespace
}  // namespace steward
