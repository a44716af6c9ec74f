// The simulation's fast tier (in `make test`): many seeded fault histories of the real decision
// and control code, every invariant checked after every step; and mutation checks: with a
// safety rule switched off, the simulation must find the loss that rule prevents.
#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "sim/simulation.h"

namespace steward::sim {
namespace {

std::string Explain(const Result& r, uint64_t seed) {
  std::string s = "seed " + std::to_string(seed) + ": " + r.violation + "\n";
  for (const auto& line : r.trace) s += "  " + line + "\n";
  return s;
}

TEST(Simulation, SeededFaultHistoriesKeepEveryInvariant) {
  // The fast tier: >= 100,000 simulated steps. Replay a failure with the printed seed:
  //   build/steward_sim --seed S --steps 2500
  long long steps = 0;
  int live = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = 1; seed <= 44; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2500;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    steps += r.steps;
    live += r.live_at_end ? 1 : 0;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%lld steps in %.1f s (%.0f steps/s); %d of 44 runs healthy at the end\n", steps,
              secs, steps / secs, live);
  EXPECT_GE(steps, 100000);
  EXPECT_GE(live, 15) << "many histories must end healthy once the faults stop (the others wait, "
                         "rightly, for an operator)";
}

TEST(Simulation, TheSameSeedGivesTheSameRun) {
  Options o;
  o.seed = 7;
  o.steps = 1500;
  Result a = RunSimulation(o), b = RunSimulation(o);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.virtual_ms, b.virtual_ms);
  EXPECT_EQ(a.writes_acked, b.writes_acked);
  EXPECT_EQ(a.faults, b.faults);
}

TEST(Simulation, WithoutFaultsTheClusterFormsAndStaysHealthy) {
  Options o;
  o.seed = 3;
  o.steps = 3000;
  o.faults = false;
  Result r = RunSimulation(o);
  ASSERT_TRUE(r.ok) << Explain(r, 3);
  EXPECT_TRUE(r.live_at_end) << r.end_state;
  EXPECT_EQ(r.bootstraps, 1);
  EXPECT_EQ(r.restores, 0);
  EXPECT_GT(r.writes_acked, 300);
  EXPECT_EQ(r.writes_lost_to_faults + r.writes_lost_to_restores, 0);
}

// Mutation: with `base` (its rules off), some seed among `seeds` seeds from `first` on must
// break an invariant.
::testing::AssertionResult FindsLoss(Options base, int seeds, int first = 1) {
  for (int seed = first; seed < first + seeds; ++seed) {
    base.seed = static_cast<uint64_t>(seed);
    Result r = RunSimulation(base);
    if (!r.ok) {
      return ::testing::AssertionSuccess() << "seed " << seed << ": " << r.violation;
    }
  }
  return ::testing::AssertionFailure() << "no violation in " << seeds << " seeds";
}

::testing::AssertionResult FindsLossWithRulesOff(std::set<std::string> rules, int nodes, int seeds,
                                                 int steps) {
  Options o;
  o.steps = steps;
  o.nodes = nodes;
  o.disabled_rules = std::move(rules);
  return FindsLoss(o, seeds);
}

TEST(Simulation, OnlyMembersWhoseDataDiffersAreRepairedAndEachIs) {
  // flip-value faults besides the others: the leader's hash check (reconcile/divergence.h)
  // repairs a member whose data differs, never one whose data agrees, and none is left voting.
  int flips = 0, live = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2500;
    o.diverge = true;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    flips += r.faults["flip-value"];
    live += r.live_at_end ? 1 : 0;
  }
  EXPECT_GE(flips, 12);
  EXPECT_GE(live, 4) << "histories that end healthy have repaired every flipped member";
}

TEST(Simulation, RestartRollsNeverTakeASecondMemberDownNorRunWhileDegraded) {
  // stewardctl restart every 300 steps among the faults: each order reaches a member only while
  // every other voter runs on the quorum side and no learner is on its way (CheckRestartSafe),
  // and the rolls get done.
  int orders = 0, live = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2500;
    o.restart_every = 300;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    orders += r.faults["restart-order"];
    live += r.live_at_end ? 1 : 0;
  }
  EXPECT_GE(orders, 24) << "restart orders over 12 histories";
  EXPECT_GE(live, 4);
}

// Mutation: with restart steps planned before the health checks (RS0 off), an order reaches a
// member while another voter is down.
TEST(SimulationMutations, WithoutTheHealthGateARestartTakesASecondMemberDown) {
  Options o;
  o.steps = 2500;
  o.restart_every = 100;
  o.disabled_rules = {"RS0"};
  EXPECT_TRUE(FindsLoss(o, 20));
}

// Mutation: without the last looks before the order and before the stop (RS6, RS7), a leader
// that was paused mid-pass restarts a member on an observation from before another voter went
// down.
TEST(SimulationMutations, WithoutTheLastLooksARestartActsOnAStaleObservation) {
  Options o;
  o.steps = 2500;
  o.restart_every = 300;
  o.disabled_rules = {"RS6", "RS7"};
  EXPECT_TRUE(FindsLoss(o, 12));
}

// Mutation: without DV2 a hash held by a minority may be taken for the cluster's, and a member
// whose data agrees is repaired (from the wrong one).
TEST(SimulationMutations, WithoutTheMajorityRuleACorrectMemberIsRepaired) {
  Options o;
  o.steps = 2500;
  o.diverge = true;
  o.disabled_rules = {"DV2"};
  EXPECT_TRUE(FindsLoss(o, 30));
}

TEST(SimulationMutations, WithoutTheLastVotersRuleAMinorityRestoresOverALiveCluster) {
  // Issue 9, path 1: a restore must be proven by a majority of the last known voters.
  EXPECT_TRUE(FindsLossWithRulesOff({"R1"}, 5, 100, 3000));
}

TEST(SimulationMutations, WithLocalMemberListsALiveMemberIsWiped) {
  // Found by this simulation: a member that was removed while cut off still served its old
  // member list under the same cluster ID; the leader read it, planned a wipe of the member
  // added since, and the node's own check (W5) read the same stale list. Lists that decide a
  // wipe are now read after a linearizable read on the same member (L1). With L1 off — the
  // code before the fix — the wipe of a live member comes back.
  // The first seed of 1,000 whose violation is this wipe is 145 since a restore raises the
  // restored epoch (issue 34): L1 off, seed 113 now first finds a restore started over a live
  // majority, from the same stale lists; with every rule on both seeds are clean.
  Options o;
  o.steps = 3000;
  o.nodes = 5;
  o.disabled_rules = {"L1"};
  ::testing::AssertionResult found = FindsLoss(o, 1, 145);
  EXPECT_TRUE(found);
  EXPECT_NE(std::string(found.message()).find("wiped member"), std::string::npos)
      << found.message();
}

TEST(SimulationMutations, WithoutTheWalRuleALeaderNobodySawIsForgotten) {
  // Found by this simulation (5 nodes, seed 35, before the pause-mid-call fault changed the
  // histories): a leader was elected and its first entries committed, then every agent that
  // could have seen it died before writing its "joined" marker; a re-imaged peer then
  // bootstrapped again under its old identity. The WAL's commit index now counts as joined
  // (J1). Scripted here, so it does not depend on a random history.
  Options o;
  o.steps = 1500;
  o.faults = false;
  o.lose_first_leader = true;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    Result safe = RunSimulation(o);
    EXPECT_TRUE(safe.ok) << Explain(safe, seed);
    EXPECT_EQ(safe.faults["lose-first-leader"], 1);
  }
  o.disabled_rules = {"J1"};
  EXPECT_TRUE(FindsLoss(o, 20))
      << "with J1 off, the re-imaged node must bootstrap over the cluster that had a leader";
}

TEST(SimulationMutations, WithoutTheJoinedAndPeersRulesALostMemberBootstrapsAgain) {
  // Issue 9, path 10: a re-imaged or wiped initial node must not bootstrap under its old
  // identity while its peers are down (S3: it was a member; S6: ask every initial agent).
  EXPECT_TRUE(FindsLossWithRulesOff({"S3", "S6"}, 4, 100, 3000));
}

TEST(SimulationMutations, OrderedByTheTakersClockAnOldBackupIsRestored) {
  // Issue 9, path 2: with backups ordered by name (the taker's clock, skewed) instead of
  // (generation, revision) (B1), a restore picks an older backup than the newest.
  EXPECT_TRUE(FindsLossWithRulesOff({"B1"}, 4, 100, 3000));
}

TEST(SimulationMutations, WithoutRevokingTheBackupsLeasesALostLockLivesOn) {
  // Issue 9, path 4: a restored member serves clients while a lease (a lock, a leader key)
  // from the backup is alive, unless the coordinator revokes them while fenced (F1).
  EXPECT_TRUE(FindsLossWithRulesOff({"F1"}, 4, 100, 3000));
}

TEST(SimulationMutations, WithoutTheStoreCheckAnEmptyClusterIsBootstrappedOverALostOne) {
  // Issue 9, path 3: with the store's evidence ignored (S7), a lost cluster is replaced by an
  // empty one.
  EXPECT_TRUE(FindsLossWithRulesOff({"S7"}, 4, 100, 3000));
}

TEST(Simulation, ACoordinatorDyingMidRestoreDoesNotStrandTheRestoredMembers) {
  // Found by this simulation (4 nodes, seed 25): the coordinator ordered n1 and n2 to restore
  // and died; n3, back with the lost cluster's data, coordinated next, saw no answering node
  // that had applied the restore (n1 and n2 were down) and cancelled it: n1 and n2 stayed
  // fenced for good. The intent now records that orders went out (R6).
  Options o;
  o.seed = 25;
  o.steps = 3000;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 25);
}

TEST(SimulationMutations, CancellingARestoreAfterItsOrdersStrandsTheRestoredMembers) {
  // R6 off: a coordinator that sees no answering node with the restore applied cancels it, and
  // the members that did restore (silent then) stay fenced for good. Rare in random histories:
  // more faults. (If a change to the simulation moves the first failing seed past the budget,
  // widen it or search other rates with `steward_sim --rules-off R6 --seeds 1000 ...`.)
  Options o;
  o.steps = 2000;
  o.nodes = 4;
  o.fault_rate = 0.05;
  o.crash_point_rate = 0.01;
  o.disabled_rules = {"R6"};
  // The first of 1,500 seeds that finds it since the coordinator waits for the fenced members'
  // publishes before it unfences them (and the model's member list shows the fence URL of a
  // fenced member) is 58 (224 since a restore raises the restored epoch, 1259 since the coordinator
  // unfences the fenced leader after its followers, 224 before, since Settle checks the fenced
  // cluster is its restore's and whether another coordinator settled it; 730 with that check read
  // through a transaction; 709 before, since the leader reads the spec and the maintenance state in
  // one transaction; 186 before that, 25 before a node stopped starting a member its cluster
  // removed (RM3), 732 before the planner took maintenance into its observation), pinned here.
  EXPECT_TRUE(FindsLoss(o, 1, 58));
}

TEST(SimulationMutations, WithoutR9ARestoreNoMemberCanRaiseWaitsForGood) {
  // R9 off: no node has etcdutl and the in-place edit refuses every backup, so no member can
  // raise the revision as ordered; the automatic restore is never replaced by one without the
  // bump and the cluster stays down. The first failing seed of 200 is 1.
  Options o;
  o.steps = 3000;
  o.etcdutl = false;
  o.in_place_refusals = 1;
  o.disabled_rules = {"R9"};
  EXPECT_TRUE(FindsLoss(o, 1, 1));
}

TEST(SimulationMutations, WithoutR11ARestoredClusterLostAgainIsNeverRestored) {
  // R11 off: a settled restore whose cluster was lost as a whole is carried on rather than
  // closed; being settled, it orders nobody to restore, and the cluster stays down. The first
  // failing seed of 1,000 is 21 since the coordinator waits for the fenced publishes (330
  // before, 175 before a restore raised the restored epoch).
  Options o;
  o.steps = 3000;
  o.disabled_rules = {"R11"};
  EXPECT_TRUE(FindsLoss(o, 1, 21));
}

TEST(SimulationMutations, WithoutRC3ASettledRestoreIsOrderedAgainAndTheClusterStaysDown) {
  // RC3 off (restore/decision.h): the coordinator orders the members of a settled restore to
  // restore again; the cluster never has a leader again. The first failing seed of 300 at
  // 4 nodes is 83 since the coordinator waits for the fenced publishes (51 before).
  Options o;
  o.steps = 2500;
  o.nodes = 4;
  o.disabled_rules = {"RC3"};
  EXPECT_TRUE(FindsLoss(o, 1, 83));
}

TEST(SimulationMutations, WithoutRC1OrdersCarryNoTermAndARestoreStalls) {
  // RC1 off: the coordinator orders without a promised term; agents that promised a newer one
  // refuse its orders as stale, and the restore never finishes. The first failing seed of 150
  // is 130.
  Options o;
  o.steps = 3000;
  o.disabled_rules = {"RC1"};
  EXPECT_TRUE(FindsLoss(o, 1, 130));
}

TEST(Simulation, ASettledRestoreIsNeverRunAgainOverNewerWrites) {
  // Found by this simulation (4 nodes, seed 5, fault rate 0.1, crash rate 0.02): a restore was
  // settled and its cluster served writes and was backed up (generation 2), but its intent was
  // not marked done before its coordinator died; all its members then lost their data, and the
  // next coordinator carried the old intent on: it restored the intent's old backup again,
  // without the writes since. A settled intent now orders no restores; if its cluster was lost
  // as a whole, it is closed and the next decision starts from the newest backup.
  Options o;
  o.seed = 5;
  o.steps = 2000;
  o.fault_rate = 0.1;
  o.crash_point_rate = 0.02;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 5);
}

TEST(Simulation, ARestoredClusterLostAgainIsRestoredPastTheRevisionsItServed) {
  // Found by this simulation once it checked that no revision is served twice (4 nodes, seed
  // 21): a restore raised the revision to 10000522 and its cluster served clients up to
  // 10000526; lost again before the leader recorded that, the next restore of the same backup
  // computed the same bump and served 10000523.. once more. A restore now records the revision
  // it starts its cluster at before ordering it (RaiseHighestRevision). (Re-pinned from seed 21
  // when refused joins began to back off, issue 32, which changed every history: seed 2 now
  // restores three times.)
  Options o;
  o.seed = 2;
  o.steps = 2500;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 2);
  EXPECT_GE(r.restores, 2);
}

TEST(Simulation, WithoutEtcdutlRestoresStillServeNoRevisionTwice) {
  // Nodes on etcd 3.4 alone: the in-place edit raises the revision. (With the nodes reporting
  // that only etcdutl can, as before, the first restore here starts at a served revision.)
  int restores = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2000;
    o.fault_rate = 0.1;
    o.crash_point_rate = 0.02;
    o.etcdutl = false;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    restores += r.restores;
  }
  EXPECT_GE(restores, 3);
}

TEST(Simulation, WithoutEtcdutlABackupTheInPlaceEditRefusesIsRestoredWithoutTheBump) {
  // Half the backups are ones the in-place edit refuses. Nodes without etcdutl refuse the
  // bump before they stop etcd; an automatic restore is then replaced by one without it
  // rather than waiting for good (liveness), and no tool is ever asked for a bump it cannot
  // make (the model's restore tool checks). Found wanting by review: every order failed, and
  // the backup was fetched again at every pass.
  int bumped = 0, unbumped = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2000;
    o.fault_rate = 0.1;
    o.crash_point_rate = 0.02;
    o.etcdutl = false;
    o.in_place_refusals = 0.5;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    bumped += r.bumped_restores;
    unbumped += r.unbumped_restores;
  }
  EXPECT_GE(unbumped, 1);
  EXPECT_GE(bumped, 1) << "the backups the edit takes are still restored with the bump";
}

TEST(Simulation, WithSomeNodesWithoutEtcdutlTheRestStillRaiseTheRevision) {
  // Only n1 and n2 (of 4) have etcdutl, or only n1, and the in-place edit refuses half the
  // backups: members that cannot make the bump but are a minority are healed by a join later
  // (the restore is not given up for one without it); when they leave no majority, it is.
  // (Found by review: the first version replaced it as soon as any member refused.)
  for (int with : {2, 1}) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      Options o;
      o.seed = seed;
      o.steps = 2500;
      o.etcdutl_nodes = with;
      o.in_place_refusals = 0.5;
      Result r = RunSimulation(o);
      ASSERT_TRUE(r.ok) << "etcdutl on " << with << " nodes, " << Explain(r, seed);
    }
  }
}

TEST(Simulation, HarsherHistoriesKeepEveryInvariant) {
  // Ten times the faults, ten times the crash points, five nodes.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = 2000;
    o.nodes = 5;
    o.fault_rate = 0.1;
    o.crash_point_rate = 0.02;
    Result r = RunSimulation(o);
    ASSERT_TRUE(r.ok) << Explain(r, seed);
  }
}

// Delta backups (Options::delta_every): the leader's deltas are stored with the real
// WriteDelta, restores choose and replay them with the real ChooseRestoreBase and ReplayDeltas,
// and a fault can lose a delta object. No restore may give up a write the intact chain of the
// newest backup or of the one before it holds, and no restored member may serve clients before
// the replay brought back every write its restore counted on.
Options WithDeltas(uint64_t seed) {
  Options o;
  o.seed = seed;
  o.steps = 2500;
  o.delta_every = 5000;
  return o;
}

TEST(Simulation, DeltaHistoriesKeepEveryInvariant) {
  int restores = 0, deltas = 0, replayed = 0, lost = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Result r = RunSimulation(WithDeltas(seed));
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    restores += r.restores;
    deltas += r.deltas;
    replayed += r.writes_replayed;
    lost += r.faults.count("delta-lost") ? r.faults.at("delta-lost") : 0;
  }
  std::printf(
      "40 histories with deltas: %d deltas stored, %d lost to faults, %d restores, %d "
      "writes replayed\n",
      deltas, lost, restores, replayed);
  // The paths the invariants guard must have run (seeds 1-40 give ~700 deltas, ~50 restores,
  // ~300 replayed writes).
  EXPECT_GT(deltas, 200);
  EXPECT_GT(lost, 20);
  EXPECT_GT(restores, 20);
  EXPECT_GT(replayed, 50);
}

TEST(Simulation, ARestoreWhoseDeltasAreLostAfterTheChoiceIsReplaced) {
  // Found by this simulation (seed 4, then seed 62 once that was fixed): a delta object lost
  // while its meta stayed made every automatic restore wait, for good ("cannot read the
  // deltas"); and one lost after the restore was chosen and ordered left it unable to settle
  // (its replay failed at every pass) with its members fenced. Now a lost object ends the
  // chain like a damaged one (ReadDelta: DataLoss), and an automatic restore whose replay finds
  // its chain damaged is replaced, before anything served clients, by one chosen afresh
  // (RestoreCoordinator::Supersede). Seed 62 loses a delta of the older backup's chain the
  // restore chose; its replacement restores the newer backup.
  for (uint64_t seed : {4, 62}) {
    Result r = RunSimulation(WithDeltas(seed));
    EXPECT_TRUE(r.ok) << Explain(r, seed);
    EXPECT_GE(r.restores, 1) << seed;
  }
}

TEST(Simulation, ANodeThatLostAReplacedRestoresDataJoinsUnfenced) {
  // Found by this simulation (deltas, seed 1573 at 5x the crash rate): a node applied restore
  // X and lost its data; X was replaced (a delta lost); the node joined the restored cluster,
  // but X's fence marker stayed, so its etcd restarted on the fence port for good. A join now
  // drops a fence left from lost data (LocalNode::Join).
  Options o = WithDeltas(1573);
  o.crash_point_rate = 0.01;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 1573);
}

TEST(Simulation, AJoinThatLeftAPartialDirIsSetAsideAndTheNodeHealed) {
  // Found by this simulation (3 nodes, seed 721; seed 299 with deltas): a member wiped a moment
  // after its join, before its agent saw the data; the runner's restarts of the join left a
  // dir without a WAL, and the leader waited for the node to come back empty, for good. The
  // node now sets that dir aside once etcd is down after a restart (LocalNode::ControlPass).
  Options o;
  o.seed = 721;
  o.steps = 2500;
  o.nodes = 3;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 721);
}

// Issue 32: the cluster runs 3.5.16, every etcd.binary is 3.4.23, and a member is re-imaged
// (its etcd-version record lost with its disk). It, or the spare that never ran etcd, joins
// with the binary of the cluster's version (EV1), and the cluster is back at its size.
Options Upgraded() {
  Options o;
  o.upgraded = true;
  o.faults = false;
  o.steps = 1500;
  o.reimage_at = 700;
  return o;
}

TEST(Simulation, AfterAnUpgradeAReimagedNodeRejoinsOnTheClustersVersion) {
  Options o = Upgraded();
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    Result r = RunSimulation(o);
    EXPECT_TRUE(r.ok) << Explain(r, seed);
    EXPECT_TRUE(r.live_at_end) << r.end_state;
    EXPECT_EQ(r.faults["reimage"], 1);
  }
  // And under random faults (a total loss there restores with whatever binary the node runs).
  o = Options();
  o.upgraded = true;
  o.steps = 2500;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    Result r = RunSimulation(o);
    EXPECT_TRUE(r.ok) << Explain(r, seed);
  }
}

TEST(SimulationMutations, WithoutTheClustersVersionAReimagedNodeNeverRejoins) {
  // EV1 off: a join runs etcd.binary (3.4.23), which the 3.5 cluster refuses; neither the
  // re-imaged node nor the spare can join, and the cluster stays below its size.
  Options o = Upgraded();
  o.disabled_rules = {"EV1"};
  ::testing::AssertionResult found = FindsLoss(o, 3);
  EXPECT_TRUE(found);
  EXPECT_NE(std::string(found.message()).find("not healthy"), std::string::npos) << found.message();
}

TEST(SimulationMutations, WithoutTheOlderChainARestoreGivesUpWritesOnlyItHolds) {
  // DC1 off: ChooseRestoreBase ignores the chain of the backup before the newest, which right
  // after a full backup (before the leader's deltas move on) holds the newest writes.
  // `steward_sim --seeds 100 --steps 2500 --deltas 5000 --rules-off DC1`: 14 violations, the
  // first at seed 2 (seed 25 before refused joins backed off, issue 32).
  Options o = WithDeltas(1);
  o.disabled_rules = {"DC1"};
  EXPECT_TRUE(FindsLoss(o, 1, 2));
}

TEST(SimulationMutations, WithAStaleVotersRecordAMinorityRestores) {
  // Found by this simulation (5 nodes, seed 18): the leader replaced voters while the store
  // was down, so the membership record still named the old voters; a majority of those
  // answered empty and a restore ran while the real voters held their data. Voter changes now
  // wait until the record lists every voter there will be (V1). Rare since the simulation runs
  // the agent's own node code: the first of 1,500 seeds that finds it with V1 off is 245
  // (`steward_sim --rules-off V1 --nodes 5 --steps 3000 --seeds 1500 --seed 11`; seed 10 is a
  // cluster left unhealthy; 801 before the leader read the spec and the maintenance state in
  // one transaction, 596 before a node
  // stopped starting a member its cluster removed (RM3), 371 before the planner took
  // maintenance into its observation, 490 before followers stopped campaigning every round),
  // pinned here; with V1 on it is clean (the fast tier's seeds, and
  // `make sim`).
  Options o;
  o.steps = 3000;
  o.nodes = 5;
  o.disabled_rules = {"V1"};
  EXPECT_TRUE(FindsLoss(o, 1, 245));
}

TEST(Simulation, DroppingAFenceNeverStartsEtcdOnAnEmptyDataDir) {
  // Found once the simulation ran the agent's own node code (LocalNode over the NodeDisk seam)
  // instead of a model of it (4 nodes, seed 5): a restored member's data dir was wiped while
  // it was still fenced; when the restore settled, dropping the fence restarted etcd with the
  // launch for member data — on an empty dir, where etcd bootstraps the initial cluster anew.
  // A launch on member data is now re-checked against the disk right before it runs.
  Options o;
  o.seed = 5;
  o.steps = 3000;
  Result r = RunSimulation(o);
  EXPECT_TRUE(r.ok) << Explain(r, 5);
}

TEST(SimulationMutations, RestartingEtcdOnAVanishedDataDirStrandsTheMember) {
  // Found by this simulation (3 nodes, seed 235): a member's data dir vanished under its
  // running etcd; the agent kept (re)starting etcd on the empty dir and reported it running,
  // so the leader neither replaced the member nor saw the node come back empty (D1).
  EXPECT_TRUE(FindsLossWithRulesOff({"D1"}, 3, 100, 3000));
}

// The operator destroys the cluster at step 600 (--force: the agents that answer carry it out;
// it is run again every 200 steps) and undoes it at step 1400, under every fault: while the
// store marks it destroyed, no agent is asked to run an etcd that is not running (but for a
// node that never learned of it restarting its own data during a store outage, the documented
// gap), and no restore is applied; once undone, the cluster heals as always.
Options DestroyRun(uint64_t seed) {
  Options o;
  o.seed = seed;
  o.steps = 2000;
  o.destroy_at = 600;
  o.undestroy_at = 1400;
  return o;
}

TEST(Simulation, ADestroyedClusterStartsNothingUntilUndestroy) {
  int destroyed = 0, live = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Result r = RunSimulation(DestroyRun(seed));
    ASSERT_TRUE(r.ok) << Explain(r, seed);
    destroyed += r.destroys > 0 ? 1 : 0;
    live += r.live_at_end ? 1 : 0;
  }
  EXPECT_GE(destroyed, 25) << "the store was down at most of the destroy points";
  EXPECT_GE(live, 10) << "once undestroyed, many histories must end healthy";
}

TEST(SimulationMutations, WithoutTheDestroyRulesADestroyedClusterComesBack) {
  // `steward_sim --seeds 300 --steps 2000 --destroy-at 600 --undestroy-at 1400 --rules-off X`:
  // SD1 off: 178 violations, first seed 4 (a node that recorded the destroy starts etcd on its
  // data); SD2 off: 71, first seed 5 (a node whose agent missed the order starts its data);
  // R7 off: 28, first seed 2 (the coordinator restores the destroyed cluster after a total loss).
  // (Seeds 1, 3 and 33 before the leader read the spec and the maintenance state in one
  // transaction.)
  for (const auto& [rule, seed] :
       std::vector<std::pair<std::string, int>>{{"SD1", 4}, {"SD2", 5}, {"R7", 2}}) {
    Options o = DestroyRun(0);
    o.disabled_rules = {rule};
    EXPECT_TRUE(FindsLoss(o, 1, seed)) << rule;
  }
}

}  // namespace
}  // namespace steward::sim
