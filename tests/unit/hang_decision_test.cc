// Table tests of the hang decision (src/node/hang_decision.h), one per rule, a mutation test
// of H3, and the watchdog (src/node/hang_watch.h) over scripted probes on a manual clock.
#include "node/hang_decision.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/rules.h"
#include "node/hang_watch.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A running member that has not answered for 40 s while the others serve.
HangView Hung() {
  HangView v;
  v.node = "n2";
  v.wanted = true;
  v.has_pid = true;
  v.others_serve = true;
  v.unanswered_for = seconds(40);
  v.bound = seconds(30);
  v.process_state = 'T';
  return v;
}

TEST(HangDecisionTest, H8_AMemberSilentPastTheBoundWhileOthersServeIsRestartedInPlace) {
  HangDecision d = DecideHang(Hung());
  EXPECT_EQ(d.action, HangAction::kRestart);
  EXPECT_EQ(d.rule, "H8");
  EXPECT_NE(d.reason.find("restarting it in place"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("stopped"), std::string::npos) << d.reason;
  HangView running = Hung();
  running.process_state = 'S';  // a stall inside etcd: the same
  EXPECT_EQ(DecideHang(running).action, HangAction::kRestart);
}

TEST(HangDecisionTest, H1_AMemberThatAnswersIsHealthyWhateverElseHolds) {
  HangView v = Hung();
  v.own_reads = true;
  v.process_state = 'D';
  v.restarts = 5;
  EXPECT_EQ(DecideHang(v).action, HangAction::kHealthy);
}

TEST(HangDecisionTest, H2_NotRunningOrBusyByDesignWaits) {
  HangView v = Hung();
  v.wanted = false;
  EXPECT_EQ(DecideHang(v).rule, "H2");
  v = Hung();
  v.has_pid = false;
  EXPECT_EQ(DecideHang(v).rule, "H2");
  for (const char* busy : {"it is being restored (r1)", "it is a learner", "it was started 3s ago",
                           "the leader holds it stopped"}) {
    v = Hung();
    v.busy = busy;
    HangDecision d = DecideHang(v);
    EXPECT_EQ(d.action, HangAction::kWait) << busy;
    EXPECT_EQ(d.rule, "H2");
    EXPECT_NE(d.reason.find(busy), std::string::npos) << d.reason;
  }
}

TEST(HangDecisionTest, H3_NoRestartWhileTheOthersDoNotServeEither) {
  HangView v = Hung();
  v.others_serve = false;
  v.unanswered_for = seconds(600);
  HangDecision d = DecideHang(v);
  EXPECT_EQ(d.action, HangAction::kWait);
  EXPECT_EQ(d.rule, "H3");
  EXPECT_NE(d.reason.find("quorum problem"), std::string::npos) << d.reason;
}

// What H3 prevents: with it off, a member of a cluster that lost its quorum (no member answers
// a linearizable read, this one included) is restarted, though nothing is wrong with it.
TEST(HangDecisionTest, H3_Off_AHealthyMemberIsRestartedDuringAQuorumLoss) {
  HangView v = Hung();
  v.others_serve = false;
  v.process_state = 'S';
  SetRulesOffForTesting({"H3"});
  const HangAction off = DecideHang(v).action;
  SetRulesOffForTesting({});
  EXPECT_EQ(off, HangAction::kRestart);
  EXPECT_EQ(DecideHang(v).action, HangAction::kWait);
}

TEST(HangDecisionTest, H4_ADefragmentingMemberIsNeverRestarted) {
  HangView v = Hung();
  v.defragmenting = true;
  v.process_state = 'R';
  v.unanswered_for = seconds(600);
  EXPECT_EQ(DecideHang(v).rule, "H4");
  EXPECT_EQ(DecideHang(v).action, HangAction::kWait);
}

TEST(HangDecisionTest, H5_WithinTheBoundItWaitsAndSaysWhen) {
  HangView v = Hung();
  v.unanswered_for = seconds(29);
  HangDecision d = DecideHang(v);
  EXPECT_EQ(d.action, HangAction::kWait);
  EXPECT_EQ(d.rule, "H5");
  EXPECT_NE(d.reason.find("after 30s"), std::string::npos) << d.reason;
}

TEST(HangDecisionTest, H6_UninterruptibleIoIsNamedNotRestarted) {
  HangView v = Hung();
  v.process_state = 'D';
  HangDecision d = DecideHang(v);
  EXPECT_EQ(d.action, HangAction::kStuck);
  EXPECT_EQ(d.rule, "H6");
  EXPECT_NE(d.reason.find("its data dir's filesystem does not complete writes"), std::string::npos)
      << d.reason;
}

TEST(HangDecisionTest, H7_GivesUpAfterTheRestartsInPlace) {
  HangView v = Hung();
  v.restarts = kMaxHangRestarts;
  HangDecision d = DecideHang(v);
  EXPECT_EQ(d.action, HangAction::kStuck);
  EXPECT_EQ(d.rule, "H7");
  v.restarts = kMaxHangRestarts - 1;
  EXPECT_EQ(DecideHang(v).action, HangAction::kRestart);
}

class ManualClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override { return now; }
  std::chrono::system_clock::time_point WallNow() override {
    return std::chrono::system_clock::time_point{} +
           (now - std::chrono::steady_clock::time_point{});
  }
  void SleepFor(milliseconds d) override { now += d; }
  std::chrono::steady_clock::time_point now{seconds(1000)};
};

// A member whose reads are scripted; restart() gives it a new pid and counts.
struct Member {
  bool answers = true;
  bool others = true;
  char state = 'S';
  pid_t pid = 100;
  std::vector<std::string> events;
  int restarts = 0;
  HangProbes Probes() {
    HangProbes p;
    p.own_read = [this] { return answers ? absl::OkStatus() : absl::DeadlineExceededError("x"); };
    p.others_read = [this](bool*) {
      return others ? absl::OkStatus() : absl::UnavailableError("no leader");
    };
    p.defragmenting = [] { return std::optional<bool>(false); };
    p.process_state = [this](pid_t) { return state; };
    p.pid = [this] { return std::optional<pid_t>(pid); };
    p.wanted = [] { return true; };
    p.busy = [] { return std::string(); };
    p.restart = [this](pid_t, milliseconds) {
      ++restarts;
      ++pid;
      return absl::OkStatus();
    };
    p.record = [this](const std::string& action, const std::string&, const std::string&) {
      events.push_back(action);
    };
    return p;
  }
};

// A watch (bound 30 s) over a scripted member whose pid it has seen answer, then `after`
// later the member stops answering.
class HangWatchTest : public ::testing::Test {
 protected:
  void Stall(seconds after) {
    EXPECT_EQ(w.Round().action, HangAction::kHealthy);  // the pid is seen: its start
    clock.now += after;                                 // past the start's grace
    m.answers = false;
  }
  ManualClock clock;
  Member m;
  HangWatch w{"n2", seconds(30), seconds(5), &clock, m.Probes()};
};

TEST_F(HangWatchTest, RestartsAStalledMemberOnceAfterTheBoundAndRecordsItsRecovery) {
  Stall(seconds(40));
  m.state = 'T';
  for (int i = 0; i < 14; ++i) {  // 28 s unanswered: within the bound
    EXPECT_EQ(w.Round().rule, "H5");
    clock.now += seconds(2);
  }
  EXPECT_NE(w.verdict().find("H5"), std::string::npos) << w.verdict();
  clock.now += seconds(2);
  EXPECT_EQ(w.Round().action, HangAction::kRestart);
  EXPECT_EQ(m.restarts, 1);
  // The restarted etcd (a new pid) gets the bound again, as a start.
  clock.now += seconds(2);
  EXPECT_EQ(w.Round().rule, "H2");
  EXPECT_EQ(m.restarts, 1);
  m.answers = true;
  EXPECT_EQ(w.Round().action, HangAction::kHealthy);
  EXPECT_EQ(w.verdict(), "");
  EXPECT_EQ(w.restarts(), 1);
  EXPECT_EQ(m.events, (std::vector<std::string>{"hang-restart", "hang-recovered"}));
}

TEST_F(HangWatchTest, NeverRestartsWhileTheQuorumIsLost) {
  Stall(seconds(60));
  m.others = false;
  for (int i = 0; i < 300; ++i) {  // ten minutes
    EXPECT_EQ(w.Round().rule, "H3");
    clock.now += seconds(2);
  }
  EXPECT_EQ(m.restarts, 0);
}

// A member frozen through a quorum loss is not restarted the moment the others serve again:
// the time without a quorum does not count toward the bound (seen against real etcd).
TEST_F(HangWatchTest, TheQuorumLossDoesNotCountTowardTheBound) {
  Stall(seconds(60));
  m.others = false;
  for (int i = 0; i < 30; ++i) {  // a minute without a quorum
    EXPECT_EQ(w.Round().rule, "H3");
    clock.now += seconds(2);
  }
  m.others = true;  // the others are back first; this one is still catching up
  EXPECT_EQ(w.Round().rule, "H5");
  EXPECT_EQ(m.restarts, 0);
}

// A member whose file system did not complete writes (H6) is not restarted the moment the
// writes complete: it gets the bound to catch up (seen against real etcd after fsfreeze -u).
TEST_F(HangWatchTest, TimeStuckInIoDoesNotCountTowardTheBound) {
  Stall(seconds(60));
  m.state = 'D';
  for (int i = 0; i < 30; ++i) {
    w.Round();
    clock.now += seconds(2);
  }
  EXPECT_NE(w.verdict().find("H6"), std::string::npos) << w.verdict();
  m.state = 'S';  // thawed, still catching up
  EXPECT_EQ(w.Round().rule, "H5");
  EXPECT_EQ(m.restarts, 0);
}

TEST_F(HangWatchTest, GivesUpAfterTwoRestartsAndSaysSo) {
  Stall(seconds(60));
  for (int i = 0; i < 200; ++i) {
    w.Round();
    clock.now += seconds(2);
  }
  EXPECT_EQ(m.restarts, kMaxHangRestarts);
  EXPECT_NE(w.verdict().find("H7"), std::string::npos) << w.verdict();
  EXPECT_EQ(m.events.back(), "hang-stuck");
}

}  // namespace
}  // namespace steward
