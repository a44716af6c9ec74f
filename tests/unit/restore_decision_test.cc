// Table tests of the total-loss -> restore decision (src/restore/decision.h), one
// test per rule, named for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "common/rules.h"
#include "restore/decision.h"

namespace steward {
namespace {

RestoreAgentView Empty() { return {}; }
RestoreAgentView WithData() { return {true, true, ""}; }

// Five nodes, size three: n1..n3 are the members, n4 and n5 spares. Everyone answers, empty.
RestoreView FiveNodes() {
  RestoreView v;
  v.self = "n1";
  v.configured = {"n1", "n2", "n3", "n4", "n5"};
  for (const auto& n : v.configured) v.answered[n] = Empty();
  v.cluster_existed = true;
  v.last_voters = {"n1", "n2", "n3"};
  return v;
}

TEST(RestoreDecisionTest, EveryMemberEmptyStartsARestore) {
  RestoreDecision d = DecideRestore(FiveNodes());
  EXPECT_EQ(d.action, RestoreAction::kStart) << d.reason;
}

// R1: issue 9, path 1: n1 and n2 stall, n3 comes back wiped, the spares answer empty.
TEST(RestoreDecisionTest, R1_SparesAndOneWipedMemberAreNotTotalLoss) {
  RestoreView v = FiveNodes();
  v.self = "n3";
  v.answered.erase("n1");
  v.answered.erase("n2");
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("only 1 of the last known voting members"), std::string::npos)
      << d.reason;
  EXPECT_NE(d.reason.find("silent: n1,n2"), std::string::npos) << d.reason;
}

// R1 with size 1 on three nodes: the single member is silent, two empty nodes answer.
TEST(RestoreDecisionTest, R1_SilentSingleMemberBlocksTheRestore) {
  RestoreView v;
  v.self = "n2";
  v.configured = {"n1", "n2", "n3"};
  v.answered = {{"n2", Empty()}, {"n3", Empty()}};
  v.cluster_existed = true;
  v.last_voters = {"n1"};
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
}

// R1: the record, not the configured order, names the members (a spare replaced n1 earlier).
TEST(RestoreDecisionTest, R1_RecordedVotersCountNotTheInitialOnes) {
  RestoreView v = FiveNodes();
  v.last_voters = {"n2", "n4", "n5"};
  v.answered.erase("n4");
  v.answered.erase("n5");
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
  v.answered["n4"] = Empty();
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kStart);
}

TEST(RestoreDecisionTest, R1_AnyDataOrRunningEtcdMeansNoRestore) {
  RestoreView v = FiveNodes();
  v.answered["n5"] = WithData();
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v = FiveNodes();
  v.answered["n2"].etcd_running = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v = FiveNodes();
  v.etcd_answers = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
}

// R2: a majority of the voters is not enough when most configured nodes are silent.
TEST(RestoreDecisionTest, R2_MajorityOfAllConfiguredNodesMustAnswer) {
  RestoreView v = FiveNodes();
  v.answered.erase("n3");
  v.answered.erase("n4");
  v.answered.erase("n5");
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("2 of 5 agents"), std::string::npos) << d.reason;
}

TEST(RestoreDecisionTest, R3_OnlyTheLowestNamedAnsweringAgentCoordinates) {
  RestoreView v = FiveNodes();
  v.self = "n2";
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
  v.answered.erase("n1");
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kStart);
}

TEST(RestoreDecisionTest, R4_UnreadableStoreWaitsAndNewClusterIsNotRestored) {
  RestoreView v = FiveNodes();
  v.store_ok = false;
  v.store_error = "the directory does not exist";
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("does not exist"), std::string::npos);
  v = FiveNodes();
  v.cluster_existed = false;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kNothing);
}

TEST(RestoreDecisionTest, AutoRestoreOffWaitsForTheOperator) {
  RestoreView v = FiveNodes();
  v.auto_restore = false;
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("restore-backup"), std::string::npos);
}

TEST(RestoreDecisionTest, AD5_AdoptingNoRestoreStartsByItself) {
  RestoreView v = FiveNodes();
  ASSERT_EQ(DecideRestore(v).action, RestoreAction::kStart);
  v.adopting = true;
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_NE(d.reason.find("cluster.adopt"), std::string::npos) << d.reason;
}

// R5: a pending automatic restore written by a minority is cancelled when the members return.
TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreIsCancelledByLiveData) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
  v.answered["n2"] = WithData();  // n2 is back with the live cluster's data
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kCancel);
  EXPECT_NE(d.reason.find("n2"), std::string::npos) << d.reason;
}

// Once a node restored, the restore is carried through: cancelling would strand it fenced.
TEST(RestoreDecisionTest, R5_ARestoreAppliedSomewhereIsCarriedThrough) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.answered["n3"].restore_id = "r1";
  v.answered["n3"].has_data = true;
  v.answered["n3"].etcd_running = true;
  v.answered["n2"] = WithData();  // a member of the lost cluster, back late
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
}

// R6: once orders may have gone out, silence is not proof that nobody restored.
TEST(RestoreDecisionTest, R6_ARestoreWhoseOrdersWentOutIsNeverCancelled) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true, /*ordered=*/true};
  v.answered["n2"] = WithData();  // a member of the lost cluster, back; the restored ones silent
  v.etcd_answers = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
  v.pending->ordered = false;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kCancel);
}

TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreIsCancelledByAnAnsweringEtcd) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.etcd_answers = true;  // nobody applied r1 yet: this etcd is the live cluster
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kCancel);
}

TEST(RestoreDecisionTest, R5_PendingAutomaticRestoreWaitsWhenTheVotersFallSilent) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", true};
  v.answered.erase("n1");
  v.answered.erase("n2");
  v.self = "n3";
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kWait);
}

TEST(RestoreDecisionTest, R5_OperatorRestoreIsCarriedOnOverLiveData) {
  RestoreView v = FiveNodes();
  v.pending = RestoreView::Pending{"r1", false};
  v.answered["n1"] = WithData();
  v.etcd_answers = true;
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
}

// A randomized simulation: clusters of 1-7 nodes, some members wiped, spares, partitions into
// up to three groups, frozen agents, pending automatic intents. Every agent decides from what
// its own group shows it. After every decision:
//   - no restore starts or continues (before anyone applied it) while a majority of the last
//     known voting members could hold data (they hold it, or they are silent to the group);
//   - no agent with data, and no answering etcd, is in a group that restores;
//   - at most one group restores (two clusters never come out of one).
// Seeded, so a failure names the seed that replays it.
TEST(RestoreDecisionSimTest, NoRestoreWhileAMajorityOfTheMembersCouldHoldData) {
  std::mt19937 rng(20261126);
  int starts = 0, waits = 0;
  for (int round = 0; round < 20000; ++round) {
    const uint32_t seed = rng();
    std::mt19937 r(seed);
    auto chance = [&](int pct) { return static_cast<int>(r() % 100) < pct; };
    const int n = 1 + static_cast<int>(r() % 7);
    const int size = 1 + static_cast<int>(r() % n);
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.push_back("n" + std::to_string(i + 1));
    // The last known voters: the first `size` nodes, or (a replacement happened) a shuffle.
    std::vector<std::string> voters(names.begin(), names.begin() + size);
    if (chance(30)) {
      std::vector<std::string> shuffled = names;
      std::shuffle(shuffled.begin(), shuffled.end(), r);
      voters.assign(shuffled.begin(), shuffled.begin() + size);
    }
    std::map<std::string, bool> has_data, up;
    std::map<std::string, int> group;
    const int groups = 1 + static_cast<int>(r() % 3);
    for (const auto& name : names) {
      const bool voter = std::find(voters.begin(), voters.end(), name) != voters.end();
      has_data[name] = voter && !chance(60);  // a member keeps its data, or lost it
      up[name] = !chance(20);                 // frozen or down: answers nobody
      group[name] = static_cast<int>(r() % groups);
    }
    const bool pending = chance(30);
    std::set<int> restoring_groups;
    for (int g = 0; g < groups; ++g) {
      for (const auto& self : names) {
        if (group[self] != g || !up[self]) continue;
        RestoreView v;
        v.self = self;
        v.configured = names;
        v.cluster_existed = true;
        v.last_voters = voters;
        if (pending) v.pending = RestoreView::Pending{"r1", true};
        for (const auto& other : names) {
          if (group[other] != g || !up[other]) continue;
          v.answered[other] = {has_data[other], has_data[other], ""};
          if (has_data[other]) v.etcd_answers = true;
        }
        RestoreDecision d = DecideRestore(v);
        const bool restores =
            d.action == RestoreAction::kStart || d.action == RestoreAction::kContinue;
        if (!restores) {
          ++waits;
          continue;
        }
        ++starts;
        restoring_groups.insert(g);
        int could_hold = 0;
        for (const auto& m : voters) {
          if (has_data[m] || group[m] != g || !up[m]) ++could_hold;
        }
        ASSERT_LT(could_hold, static_cast<int>(voters.size()) / 2 + 1)
            << "seed " << seed << ": " << self << " restores: " << d.reason;
        for (const auto& [other, a] : v.answered) {
          ASSERT_FALSE(a.has_data) << "seed " << seed << ": restores over " << other;
        }
        ASSERT_FALSE(v.etcd_answers) << "seed " << seed;
      }
    }
    ASSERT_LE(restoring_groups.size(), 1u) << "seed " << seed << ": two groups restore";
  }
  // The simulation must reach both outcomes, or it proves nothing.
  EXPECT_GT(starts, 100);
  EXPECT_GT(waits, 100);
}

}  // namespace

// R7: every member empty and silent is total loss, but a destroyed cluster is never restored
// by itself; without the mark it is.
TEST(RestoreDecisionTest, R7_ADestroyedClusterIsNotRestored) {
  RestoreView v = FiveNodes();
  v.destroyed = "cluster demo was destroyed by root@h";
  RestoreDecision d = DecideRestore(v);
  EXPECT_EQ(d.action, RestoreAction::kWait);
  EXPECT_EQ(d.reason, v.destroyed);
  v.destroyed.clear();
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kStart);
  // A pending automatic restore without orders out is cancelled once the mark is there.
  v.destroyed = "cluster demo was destroyed";
  v.pending = RestoreView::Pending{"r1", true, false};
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kCancel);
  v.pending->ordered = true;  // R6: carried through
  EXPECT_EQ(DecideRestore(v).action, RestoreAction::kContinue);
}

// R8: a backup is judged damaged only when the members that refused its DB leave no majority
// that could restore it, and never once a member applied it (the verdict is the same on every
// node: one that restored it proves the DB whole). Only an automatic restore that has not
// settled is replaced; an operator's waits, marked.
TEST(RestoreDecisionTest, R8_ABackupEveryMemberRefusesAsDamagedIsMarkedAndReplaced) {
  struct Row {
    size_t members, applied, refused;
    bool automatic, settled, mark, replace;
  };
  const Row rows[] = {
      {3, 0, 3, true, false, true, true},    // every member refused: replaced
      {3, 0, 2, true, false, true, true},    // one silent: the other two leave no majority
      {3, 0, 1, true, false, false, false},  // two may still restore it
      {3, 1, 2, true, false, false, false},  // one applied it: the DB is whole
      {3, 0, 3, false, false, true, false},  // an operator's restore: marked, not replaced
      {3, 0, 3, true, true, true, false},    // settled (cannot be, but): never replaced
      {5, 0, 3, true, false, true, true},    // 2 of 5 left: no majority
      {5, 0, 2, true, false, false, false},  // 3 of 5 left could
      {0, 0, 0, true, false, false, false},
  };
  for (const Row& r : rows) {
    DamagedBackupVerdict v =
        JudgeDamagedBackup(r.members, r.applied, r.refused, r.automatic, r.settled);
    EXPECT_EQ(v.mark, r.mark) << r.members << " " << r.applied << " " << r.refused;
    EXPECT_EQ(v.replace, r.replace) << r.members << " " << r.applied << " " << r.refused;
  }
  SetRulesOffForTesting({"R8"});
  EXPECT_FALSE(JudgeDamagedBackup(3, 0, 3, true, false).mark) << "rule off: waits, as before";
  SetRulesOffForTesting({});
}

// One round of orders judged (JudgeRound): R8 first, then R10's majority, then R9.
TEST(RestoreDecisionTest, R8_R9_R10_ARoundSettlesOnlyOnAMajorityAndIsReplacedOnlyWhenItNeverCan) {
  struct Row {
    size_t members, applied, damaged, cannot_bump;
    bool bumped, automatic, settled;
    RoundVerdict want;
    const char* why;
  };
  using V = RoundVerdict;
  const Row rows[] = {
      {3, 2, 0, 0, true, true, false, V::kSettle, "R10: 2 of 3 applied"},
      {3, 3, 0, 0, true, true, false, V::kSettle, "R10: all applied"},
      {3, 1, 0, 0, true, true, false, V::kWait, "R10: 1 of 3 is no majority"},
      {5, 2, 0, 0, false, true, false, V::kWait, "R10: 2 of 5 is no majority"},
      {5, 3, 0, 2, true, true, false, V::kSettle, "R10: 3 of 5 settle; the two are healed later"},
      {3, 0, 3, 0, true, true, false, V::kReplaceDamaged, "R8 before everything"},
      {3, 0, 3, 3, true, false, false, V::kMarkDamaged, "R8: the operator's is marked, waits"},
      {3, 0, 0, 2, true, true, false, V::kReplaceUnbumped, "R9: 1 of 3 can raise it"},
      {3, 1, 0, 2, true, true, false, V::kReplaceUnbumped, "R9: 1 applied, the rest cannot"},
      {3, 0, 0, 1, true, true, false, V::kWait, "R9: 2 of 3 still can"},
      {3, 0, 0, 3, false, true, false, V::kWait, "R9: not raised at all"},
      {3, 0, 0, 3, true, false, false, V::kWait, "R9: the operator's restore waits"},
      {3, 0, 0, 3, true, true, true, V::kWait, "R9: settled, never replaced"},
      {5, 0, 0, 3, true, true, false, V::kReplaceUnbumped, "R9: 2 of 5 left"},
      {5, 0, 0, 2, true, true, false, V::kWait, "R9: 3 of 5 left could"},
  };
  for (const Row& r : rows) {
    RoundView v;
    v.members = r.members;
    v.applied = r.applied;
    v.refused_damaged = r.damaged;
    v.cannot_bump = r.cannot_bump;
    v.bumped = r.bumped;
    v.automatic = r.automatic;
    v.settled = r.settled;
    EXPECT_STREQ(RoundVerdictName(JudgeRound(v)), RoundVerdictName(r.want)) << r.why;
  }
  RoundView unbumpable;
  unbumpable.members = 3;
  unbumpable.cannot_bump = 3;
  unbumpable.bumped = true;
  SetRulesOffForTesting({"R9"});
  EXPECT_EQ(JudgeRound(unbumpable), RoundVerdict::kWait) << "rule off: waits for good";
  RoundView one_applied;
  one_applied.members = 3;
  one_applied.applied = 1;
  SetRulesOffForTesting({"R10"});
  EXPECT_EQ(JudgeRound(one_applied), RoundVerdict::kSettle) << "rule off: settles on a minority";
  SetRulesOffForTesting({});
}

// R11: only a settled restore is closed, and only when a majority of its members answer empty.
TEST(RestoreDecisionTest, R11_ASettledRestoreLostAsAWholeIsClosedNotRestoredAgain) {
  EXPECT_TRUE(CloseLostRestore(true, 3, 2));
  EXPECT_TRUE(CloseLostRestore(true, 3, 3));
  EXPECT_FALSE(CloseLostRestore(true, 3, 1)) << "a majority may still hold its data";
  EXPECT_FALSE(CloseLostRestore(false, 3, 3)) << "not settled: carried on";
  EXPECT_FALSE(CloseLostRestore(true, 0, 0));
  EXPECT_TRUE(CloseLostRestore(true, 5, 3));
  EXPECT_FALSE(CloseLostRestore(true, 5, 2));
  SetRulesOffForTesting({"R11"});
  EXPECT_FALSE(CloseLostRestore(true, 3, 3)) << "rule off: never closed";
  SetRulesOffForTesting({});
}

// RC1-RC5: the coordinator's next step, from the intent as recorded and what this pass did.
TEST(RestoreDecisionTest, RC1_RC5_TheCoordinatorTakesOneStepAtATimeInTheSafeOrder) {
  struct Row {
    bool settled, promised, rechecked, round_done, round_settles, unfenced;
    RestoreStep want;
    const char* why;
  };
  using S = RestoreStep;
  const Row rows[] = {
      {false, false, false, false, false, false, S::kPromise, "RC1: a term first"},
      {true, false, false, false, false, false, S::kPromise,
       "RC1: the unfence orders need one too"},
      {false, true, false, false, false, false, S::kRecheck, "RC2: re-proved after the promises"},
      {true, true, false, false, false, false, S::kRecheck, "RC2: settled, re-proved all the same"},
      {false, true, true, false, false, false, S::kOrder, "the orders"},
      {false, true, true, true, false, false, S::kStop, "RC4: the round did not settle it"},
      {false, true, true, true, true, false, S::kSettle, "RC4: a majority applied it this pass"},
      {true, true, true, false, false, false, S::kUnfence, "RC3: settled, never ordered again"},
      {true, true, true, true, true, false, S::kUnfence, "RC5: settled this pass: unfence"},
      {true, true, true, false, false, true, S::kFinish, "RC5: unfenced: finish"},
  };
  for (const Row& r : rows) {
    RestoreStepView v;
    v.settled = r.settled;
    v.promised = r.promised;
    v.rechecked = r.rechecked;
    v.round_done = r.round_done;
    v.round_settles = r.round_settles;
    v.unfenced = r.unfenced;
    EXPECT_STREQ(RestoreStepName(NextRestoreStep(v)), RestoreStepName(r.want)) << r.why;
  }
  // Mutation checks: each rule off lets through the step it holds back.
  struct Off {
    const char* rule;
    RestoreStepView v;
    RestoreStep then;
  };
  RestoreStepView fresh;
  RestoreStepView promised;
  promised.promised = true;
  RestoreStepView settled;
  settled.settled = settled.promised = settled.rechecked = true;
  RestoreStepView not_settling;
  not_settling.promised = not_settling.rechecked = not_settling.round_done = true;
  const Off offs[] = {
      {"RC1", fresh, S::kRecheck},       {"RC2", promised, S::kOrder}, {"RC3", settled, S::kOrder},
      {"RC4", not_settling, S::kSettle}, {"RC5", settled, S::kFinish},
  };
  for (const Off& o : offs) {
    const RestoreStep on = NextRestoreStep(o.v);
    SetRulesOffForTesting({o.rule});
    EXPECT_STREQ(RestoreStepName(NextRestoreStep(o.v)), RestoreStepName(o.then)) << o.rule;
    EXPECT_NE(NextRestoreStep(o.v), on) << o.rule;
    SetRulesOffForTesting({});
  }
}

}  // namespace steward
