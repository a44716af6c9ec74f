// Table-driven tests of the reconciler's planner: one or more cases per rule of
// PlanNextStep, each asserting the step kind, its target (member or node) and the key words of
// its reason. The randomized simulation in plan_sim_test.cc checks the safety invariants.
#include "reconcile/plan.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint64_t kLeaderIndex = 1000;
constexpr uint64_t kLearnerId = 0x44a;

std::string PeerUrl(int i) { return absl::StrCat("http://10.0.0.", i, ":2380"); }
uint64_t InitialId(int i) { return 0x100 + static_cast<uint64_t>(i); }

// Index of node/member "nK" in the base observation below.
NodeView& Node(ClusterObservation& o, int i) { return o.nodes[static_cast<size_t>(i - 1)]; }
MemberView* Member(ClusterObservation& o, const std::string& name) {
  for (auto& m : o.members) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

MemberView StartedVoter(int i) {
  MemberView m;
  m.id = InitialId(i);
  m.name = absl::StrCat("n", i);
  m.peer_url = PeerUrl(i);
  m.started = true;
  m.healthy = true;
  m.raft_index = kLeaderIndex;
  return m;
}

// Five configured nodes n1..n5; n1..n3 run the three healthy voting members of the initial
// cluster (n1 is etcd's leader); n4 and n5 are spares: agent up, no data, no etcd.
ClusterObservation Base() {
  ClusterObservation o;
  o.desired_size = 3;
  o.replace_after = seconds(60);
  o.learner_timeout = seconds(60);
  for (int i = 1; i <= 5; ++i) {
    NodeView n;
    n.name = absl::StrCat("n", i);
    n.peer_url = PeerUrl(i);
    n.agent_up = true;
    n.initial_member_id = InitialId(i);
    if (i <= 3) {
      n.etcd_running = true;
      n.has_data = true;
      n.local_member_id = InitialId(i);
    }
    o.nodes.push_back(n);
  }
  for (int i = 1; i <= 3; ++i) o.members.push_back(StartedVoter(i));
  o.members[0].is_etcd_leader = true;
  o.member_list_ok = true;
  o.leader_raft_index = kLeaderIndex;
  return o;
}

// Node i's machine is down: the agent does not answer, its member does not either.
void NodeDown(ClusterObservation& o, int i, milliseconds unhealthy_for = seconds(5)) {
  NodeView& n = Node(o, i);
  n.agent_up = false;
  n.etcd_running = false;
  n.has_data = false;  // unknown: the agent did not report
  n.local_member_id = 0;
  if (MemberView* m = Member(o, n.name)) {
    m->healthy = false;
    m->unhealthy_for = unhealthy_for;
  }
}

// Node i is back with an empty data dir; its (started) member is unhealthy.
void NodeBackEmpty(ClusterObservation& o, int i) {
  NodeView& n = Node(o, i);
  n.agent_up = true;
  n.etcd_running = false;
  n.has_data = false;
  n.local_member_id = 0;
  if (MemberView* m = Member(o, n.name)) {
    m->healthy = false;
    m->unhealthy_for = seconds(5);
  }
}

// The current learner for node i (unstarted: no name yet).
MemberView& AddLearner(ClusterObservation& o, int i) {
  MemberView l;
  l.id = kLearnerId;
  l.peer_url = PeerUrl(i);
  l.is_learner = true;
  o.members.push_back(l);
  return o.members.back();
}

// The learner on node i has joined and started; its raft index is `index`.
void LearnerRunning(ClusterObservation& o, int i, uint64_t index) {
  MemberView& l = AddLearner(o, i);
  l.name = absl::StrCat("n", i);
  l.started = true;
  l.healthy = true;
  l.raft_index = index;
  NodeView& n = Node(o, i);
  n.etcd_running = true;
  n.has_data = true;
  n.local_member_id = kLearnerId;
}

// Node i is an idle spare: agent up, no data, no etcd.
void MakeSpare(ClusterObservation& o, int i) {
  NodeView& n = Node(o, i);
  n.agent_up = true;
  n.etcd_running = false;
  n.has_data = false;
  n.local_member_id = 0;
}

// All five nodes run healthy voters.
void FiveVoters(ClusterObservation& o) {
  for (int i = 4; i <= 5; ++i) {
    NodeView& n = Node(o, i);
    n.etcd_running = true;
    n.has_data = true;
    n.local_member_id = InitialId(i);
    o.members.push_back(StartedVoter(i));
  }
}

struct Case {
  std::string name;
  std::function<void(ClusterObservation&)> setup;
  StepKind kind;
  uint64_t member_id = 0;  // checked when kind names a member
  std::string node;        // checked when kind names a node
  std::vector<std::string> reason_has;
  std::vector<std::string> reason_lacks = {};
  std::function<void(const Step&)> extra = nullptr;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::vector<Case> Cases() {
  return {
      // --- the member list cannot be read ---
      {"UnreadableMemberListWaits",
       [](ClusterObservation& o) {
         o.member_list_ok = false;
         o.members.clear();
       },
       StepKind::kWait,
       0,
       "",
       {"member list cannot be read"}},
      {"UnreadableMemberListWaitsEvenWithForeignData",
       [](ClusterObservation& o) {
         o.member_list_ok = false;
         o.members.clear();
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = 0xbad;
       },
       StepKind::kWait,
       0,
       "",
       {"member list cannot be read"}},

      // --- quorum lost ---
      {"QuorumLostOneOfThreeWaits",
       [](ClusterObservation& o) {
         NodeDown(o, 2);
         NodeDown(o, 3);
       },
       StepKind::kWait,
       0,
       "",
       {"quorum lost", "1 of 3", "nothing is wiped"}},
      {"QuorumLostNoWipeOfForeignData",
       [](ClusterObservation& o) {
         NodeDown(o, 2);
         NodeDown(o, 3);
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = 0xbad;
       },
       StepKind::kWait,
       0,
       "",
       {"quorum lost"},
       {"wiping"}},
      {"QuorumLostNoRemovalOfWipedOrDeadMembers",
       [](ClusterObservation& o) {
         NodeBackEmpty(o, 2);
         NodeDown(o, 3, seconds(600));
       },
       StepKind::kWait,
       0,
       "",
       {"quorum lost", "1 of 3"},
       {"removing"}},
      {"QuorumLostNoPromotion",
       [](ClusterObservation& o) {
         NodeDown(o, 2);
         NodeDown(o, 3);
         LearnerRunning(o, 4, kLeaderIndex);
       },
       StepKind::kWait,
       0,
       "",
       {"quorum lost", "1 of 3"}},
      {"EmptyMemberListIsQuorumLost",
       [](ClusterObservation& o) { o.members.clear(); },
       StepKind::kWait,
       0,
       "",
       {"quorum lost", "0 of 0"}},

      // --- data of a member that is gone is set aside ---
      {"WipesSpareHoldingForeignData",
       [](ClusterObservation& o) {
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = 0xdead;
       },
       StepKind::kWipe,
       0,
       "n4",
       {"wiping node n4", "dead", "no longer in the member list"}},
      {"WipesNodeWhoseRemovedMemberStillRuns",
       [](ClusterObservation& o) {
         // n3's member was replaced while it was away; its old etcd is back and running.
         o.members.pop_back();
         o.members.push_back(StartedVoter(4));
         Node(o, 4).etcd_running = true;
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = InitialId(4);
       },
       StepKind::kWipe,
       0,
       "n3",
       {"wiping node n3", "103", "no longer in the member list"}},
      {"NoWipeWhenLocalMemberIdUnknown",
       [](ClusterObservation& o) {
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = 0;
       },
       StepKind::kNone,
       0,
       "",
       {"all members healthy"}},
      {"NoWipeWhenLocalMemberStillListed",
       [](ClusterObservation& o) {
         // n2's etcd is down but its data's member is still in the list.
         Node(o, 2).etcd_running = false;
         Member(o, "n2")->healthy = false;
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "unhealthy"}},
      {"NoWipeWhenAgentDown",
       [](ClusterObservation& o) {
         Node(o, 4).agent_up = false;
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = 0xdead;
       },
       StepKind::kNone,
       0,
       "",
       {}},

      // --- a node back with an empty data dir ---
      {"RemovesStartedMemberOfWipedNode",
       [](ClusterObservation& o) { NodeBackEmpty(o, 2); },
       StepKind::kRemoveMember,
       InitialId(2),
       "",
       {"n2", "102", "back with an empty data dir"}},
      {"WaitsWhenRemovingWipedNodesMemberWouldLoseQuorum",
       [](ClusterObservation& o) {
         // n2's last Status answered before its node came back empty; n3 is down.
         NodeBackEmpty(o, 2);
         Member(o, "n2")->healthy = true;
         Member(o, "n2")->unhealthy_for = milliseconds(0);
         NodeDown(o, 3);
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "empty data dir", "would lose quorum"}},
      {"NoRemovalWhileWipedNodesEtcdRuns",
       [](ClusterObservation& o) {
         // etcd is already running again (e.g. joining): not an empty, idle node.
         NodeBackEmpty(o, 2);
         Node(o, 2).etcd_running = true;
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "unhealthy"}},

      // --- unstarted entries for a node's peer URL ---
      {"RemovesUnstartedVoterWithForeignId",
       [](ClusterObservation& o) {
         MemberView& m = *Member(o, "n3");
         m = MemberView{};
         m.id = 0x5ca1e;
         m.peer_url = PeerUrl(3);
         NodeBackEmpty(o, 3);
       },
       StepKind::kRemoveMember,
       0x5ca1e,
       "",
       {"n3", "never started", "stale or conflicting ID"}},
      {"KeepsUnstartedInitialMember",
       [](ClusterObservation& o) {
         // Initial bootstrap in progress: n3 has not started yet; its entry carries its name.
         MemberView& m = *Member(o, "n3");
         m.started = false;
         m.healthy = false;
         m.raft_index = 0;
         NodeBackEmpty(o, 3);
       },
       StepKind::kNone,
       0,
       "",
       {}},

      // --- a member that carries a node's name with another peer URL ---
      {"RemovesMemberNamedLikeNodeWithOtherPeerUrl",
       [](ClusterObservation& o) {
         MemberView& m = *Member(o, "n3");
         m.peer_url = "http://10.9.9.9:2380";
         m.healthy = false;
         m.unhealthy_for = seconds(5);
         Node(o, 3).etcd_running = false;
         Node(o, 3).has_data = false;
         Node(o, 3).local_member_id = 0;
       },
       StepKind::kRemoveMember,
       InitialId(3),
       "",
       {"n3", "http://10.9.9.9:2380", "is not (http://10.0.0.3:2380)"}},
      {"WaitsWhenRemovingMisnamedMemberWouldLoseQuorum",
       [](ClusterObservation& o) {
         Member(o, "n3")->peer_url = "http://10.9.9.9:2380";  // still healthy
         NodeDown(o, 2);
       },
       StepKind::kWait,
       0,
       "",
       {"n3", "peer URL", "would lose quorum"}},

      {"BlockedRemovalDoesNotBlockASafeOne",
       [](ClusterObservation& o) {
         // n2 moved; its old host still serves member n2, so removing that now would leave
         // 1 healthy of 2. n3 is back empty: removing its member is safe and comes first.
         Member(o, "n2")->peer_url = "http://10.9.9.9:2380";
         MakeSpare(o, 2);
         NodeBackEmpty(o, 3);
       },
       StepKind::kRemoveMember,
       InitialId(3),
       "",
       {"n3", "back with an empty data dir"}},
      {"MovedMemberGoesOnceSafe",
       [](ClusterObservation& o) {
         // ... and then the moved member: 1 healthy of 1 remains.
         Member(o, "n2")->peer_url = "http://10.9.9.9:2380";
         MakeSpare(o, 2);
         o.members.pop_back();
         MakeSpare(o, 3);
       },
       StepKind::kRemoveMember,
       InitialId(2),
       "",
       {"n2", "http://10.9.9.9:2380"}},

      {"BlockedRemovalDoesNotBlockGrowth",
       [](ClusterObservation& o) {
         // Only the moved member is left: it cannot go (0 voters would remain) until the
         // cluster has grown, so growing goes on.
         Member(o, "n2")->peer_url = "http://10.9.9.9:2380";
         Member(o, "n2")->is_etcd_leader = true;
         o.members.erase(o.members.begin());
         o.members.pop_back();
         MakeSpare(o, 1);
         MakeSpare(o, 2);
         MakeSpare(o, 3);
       },
       StepKind::kAddLearner,
       0,
       "n1",
       {"adding node n1", "1 of 3"}},
      {"BlockedRemovalWaitsWhenNothingElseToDo",
       [](ClusterObservation& o) {
         o.desired_size = 1;
         Member(o, "n2")->peer_url = "http://10.9.9.9:2380";
         o.members.erase(o.members.begin());
         o.members.pop_back();
         MakeSpare(o, 1);
         MakeSpare(o, 2);
         MakeSpare(o, 3);
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "would lose quorum"}},

      // --- learners ---
      {"JoinsUnstartedLearner",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         AddLearner(o, 4);
       },
       StepKind::kJoin,
       kLearnerId,
       "n4",
       {"n4", "44a"},
       {},
       [](const Step& s) {
         std::vector<std::pair<std::string, std::string>> want = {
             {"n1", PeerUrl(1)}, {"n2", PeerUrl(2)}, {"n3", PeerUrl(3)}, {"n4", PeerUrl(4)}};
         EXPECT_EQ(s.initial_cluster, want);
       }},
      {"JoinNamesUnnamedMembersById",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         Member(o, "n3")->name = "";  // e.g. an entry whose name was lost
         AddLearner(o, 4);
       },
       StepKind::kJoin,
       kLearnerId,
       "n4",
       {},
       {},
       [](const Step& s) {
         std::vector<std::pair<std::string, std::string>> want = {
             {"n1", PeerUrl(1)}, {"n2", PeerUrl(2)}, {"m103", PeerUrl(3)}, {"n4", PeerUrl(4)}};
         EXPECT_EQ(s.initial_cluster, want);
       }},
      {"NoJoinWhileLearnersNodeHasData",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         AddLearner(o, 4);
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = kLearnerId;
         Node(o, 4).etcd_running = true;
         o.learner_age = seconds(10);
       },
       StepKind::kWait,
       0,
       "",
       {"waiting for learner", "n4", "to start"}},
      {"PromotesCaughtUpLearner",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         LearnerRunning(o, 4, 950);
       },
       StepKind::kPromote,
       kLearnerId,
       "",
       {"promoting learner", "n4", "caught up", "950 of 1000"}},
      {"PromotesLearnerExactlyAtNinetyPercent",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         LearnerRunning(o, 4, 900);
       },
       StepKind::kPromote,
       kLearnerId,
       "",
       {"caught up"}},
      {"WaitsForLearnerJustBelowNinetyPercent",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         LearnerRunning(o, 4, 899);
       },
       StepKind::kWait,
       0,
       "",
       {"catching up", "899 of 1000"}},
      {"WaitsForLaggingLearner",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         LearnerRunning(o, 4, 100);
       },
       StepKind::kWait,
       0,
       "",
       {"learner", "catching up", "100 of 1000"}},
      {"NoPromotionWithoutLeaderIndex",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         LearnerRunning(o, 4, 0);
         o.leader_raft_index = 0;
       },
       StepKind::kWait,
       0,
       "",
       {"catching up"}},
      {"RemovesLearnerThatNeverStarted",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         AddLearner(o, 4);
         NodeDown(o, 4);
         o.learner_age = seconds(60);
       },
       StepKind::kRemoveMember,
       kLearnerId,
       "",
       {"removing member", "44a", "not come up", "60s"}},
      {"WaitsForYoungLearnerToStart",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         AddLearner(o, 4);
         NodeDown(o, 4);
         o.learner_age = seconds(59);
       },
       StepKind::kWait,
       0,
       "",
       {"waiting for learner", "n4", "to start"}},
      {"RemovesLearnerOfUnconfiguredPeerUrl",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         AddLearner(o, 4).peer_url = "http://10.9.9.9:2380";
       },
       StepKind::kRemoveMember,
       kLearnerId,
       "",
       {"not a configured node"}},

      // --- dead voters ---
      {"ReplacesDeadVoterWhenSpareReady",
       [](ClusterObservation& o) { NodeDown(o, 3, seconds(60)); },
       StepKind::kRemoveMember,
       InitialId(3),
       "",
       {"removing member n3", "unreachable for 60s", "spare n4 ready"}},
      {"ReplacementNamesFirstReadySpare",
       [](ClusterObservation& o) {
         NodeDown(o, 3, seconds(90));
         NodeDown(o, 4);
       },
       StepKind::kRemoveMember,
       InitialId(3),
       "",
       {"unreachable for 90s", "spare n5 ready"}},
      {"NoReplacementBeforeReplaceAfter",
       [](ClusterObservation& o) { NodeDown(o, 3, seconds(59)); },
       StepKind::kWait,
       0,
       "",
       {"n3", "unhealthy (for 59s)", "replaced after 60s"}},
      {"HG1_NoReplacementWhileItsAgentRestartsItInPlace",
       [](ClusterObservation& o) {
         // n3's etcd runs but does not answer; its agent answers and waits out the hang bound.
         if (MemberView* m = Member(o, "n3")) {
           m->healthy = false;
           m->unhealthy_for = seconds(90);
         }
         Node(o, 3).hang = "H5: etcd on n3 has not answered a read for 20s";
       },
       StepKind::kWait,
       0,
       "",
       {"n3", "not replaced while its agent restarts it in place", "H5"}},
      {"HG1_ReplacedOnceItsWatchdogGivesUp",
       [](ClusterObservation& o) {
         if (MemberView* m = Member(o, "n3")) {
           m->healthy = false;
           m->unhealthy_for = seconds(90);
         }
         Node(o, 3).hang = "H7: etcd on n3 still does not answer reads after 2 restarts";
       },
       StepKind::kRemoveMember,
       InitialId(3),
       "",
       {"removing member n3", "spare n4 ready"}},
      // --- a member whose data differs (DV4-DV5) ---
      {"DV4_ADivergedMemberIsRemovedToBeSetAsideAndRejoined",
       [](ClusterObservation& o) {
         Member(o, "n2")->diverged =
             "at revision 90: n1, n3 agree (hash 00000007); n2 hold 00000009, which differs";
       },
       StepKind::kRemoveMember,
       InitialId(2),
       "",
       {"removing member n2", "its data differs from a majority's", "n2 hold 00000009",
        "set aside and it rejoins"}},
      {"DV4_NotRemovedWhenThatWouldLoseQuorum",
       [](ClusterObservation& o) {
         Member(o, "n2")->diverged = "n2 hold 00000009, which differs";
         Member(o, "n3")->healthy = false;
         Member(o, "n3")->unhealthy_for = seconds(5);
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "would lose quorum"}},
      {"DV4_NotRepairedWithRepairOff",
       [](ClusterObservation& o) {
         Member(o, "n2")->diverged = "n2 hold 00000009, which differs";
         o.repair_diverged = false;
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "differs", "cluster.repair_diverged is off"}},
      {"DV4_NotRepairedWhilePaused",
       [](ClusterObservation& o) {
         Member(o, "n2")->diverged = "n2 hold 00000009, which differs";
         Node(o, 2).paused = "until 2026-12-02 18:00:00Z by alice@host: disk check";
       },
       StepKind::kWait,
       0,
       "",
       {"n2", "not repaired", "paused"}},
      {"DV4_BeforeALearnerOnItsWay",
       [](ClusterObservation& o) {
         Member(o, "n2")->diverged = "n2 hold 00000009, which differs";
         o.desired_size = 4;
         MemberView l;
         l.id = kLearnerId;
         l.name = "n4";
         l.peer_url = PeerUrl(4);
         l.started = true;
         l.healthy = true;
         l.is_learner = true;
         l.raft_index = kLeaderIndex;
         o.members.push_back(l);
         Node(o, 4).etcd_running = true;
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = kLearnerId;
       },
       StepKind::kRemoveMember,
       InitialId(2),
       "",
       {"removing member n2", "differs"}},
      {"DV4_ALearnerThatDiffersIsRemoved",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         MemberView l;
         l.id = kLearnerId;
         l.name = "n4";
         l.peer_url = PeerUrl(4);
         l.started = true;
         l.healthy = true;
         l.is_learner = true;
         l.raft_index = kLeaderIndex;
         l.diverged = "n4 hold 00000009, which differs";
         o.members.push_back(l);
         Node(o, 4).etcd_running = true;
         Node(o, 4).has_data = true;
         Node(o, 4).local_member_id = kLearnerId;
       },
       StepKind::kRemoveMember,
       kLearnerId,
       "",
       {"removing member n4", "differs"}},
      {"DV5_NoMajorityNothingIsRemoved",
       [](ClusterObservation& o) {
         o.hash_split =
             "at revision 90 no majority of the 3 voting members agrees: n1 hold 00000007; n2 "
             "hold 00000008; n3 hold 00000009; nothing is repaired";
       },
       StepKind::kWait,
       0,
       "",
       {"no majority", "nothing is repaired"}},
      {"AStuckMembersWaitSaysWhatItsAgentSays",
       [](ClusterObservation& o) {
         if (MemberView* m = Member(o, "n3")) {
           m->healthy = false;
           m->unhealthy_for = seconds(40);
         }
         Node(o, 3).hang =
             "H6: etcd on n3 does not respond: its data dir's filesystem does not "
             "complete writes";
       },
       StepKind::kWait,
       0,
       "",
       {"n3", "its agent says: H6", "does not complete writes", "replaced after 60s"}},
      {"NoReplacementWithoutSpare",
       [](ClusterObservation& o) {
         NodeDown(o, 3, seconds(600));
         NodeDown(o, 4);
         NodeDown(o, 5);
       },
       StepKind::kWait,
       0,
       "",
       {"n3", "no spare node is ready"}},

      // --- growing ---
      {"AddsFirstSpareInConfigOrder",
       [](ClusterObservation& o) { o.desired_size = 5; },
       StepKind::kAddLearner,
       0,
       "n4",
       {"adding node n4 as a learner", "3 of 5"}},
      {"AddsFirstSpareSkippingDownNodes",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         NodeDown(o, 4);
       },
       StepKind::kAddLearner,
       0,
       "n5",
       {"adding node n5", "3 of 4"}},
      {"AddsBackRemovedWipedNodeFirst",
       [](ClusterObservation& o) {
         // n2's member was removed after a wipe: n2 comes before n4 and n5.
         o.members.erase(o.members.begin() + 1);
         MakeSpare(o, 2);
       },
       StepKind::kAddLearner,
       0,
       "n2",
       {"adding node n2", "2 of 3"}},
      {"WaitsToGrowWhileVoterUnhealthy",
       [](ClusterObservation& o) {
         o.desired_size = 4;
         NodeDown(o, 3, seconds(10));
       },
       StepKind::kWait,
       0,
       "",
       {"3 of 4", "n3", "unhealthy"}},
      {"WaitsToGrowWithoutSpare",
       [](ClusterObservation& o) {
         o.desired_size = 5;
         NodeDown(o, 4);
         NodeDown(o, 5);
       },
       StepKind::kWait,
       0,
       "",
       {"3 of 5", "no spare"}},

      // --- shrinking ---
      {"ShrinkRemovesUnhealthyVoterFirst",
       [](ClusterObservation& o) {
         FiveVoters(o);
         NodeDown(o, 2, seconds(10));
       },
       StepKind::kRemoveMember,
       InitialId(2),
       "",
       {"n2", "5 voting members, want 3"}},
      {"ShrinkRemovesLastConfiguredNonLeader",
       [](ClusterObservation& o) { FiveVoters(o); },
       StepKind::kRemoveMember,
       InitialId(5),
       "",
       {"n5", "want 3"}},
      {"ShrinkSparesTheEtcdLeader",
       [](ClusterObservation& o) {
         FiveVoters(o);
         o.members[0].is_etcd_leader = false;
         Member(o, "n5")->is_etcd_leader = true;
       },
       StepKind::kRemoveMember,
       InitialId(4),
       "",
       {"n4", "want 3"}},
      {"ShrinkToOneSparesTheEtcdLeader",
       [](ClusterObservation& o) {
         o.desired_size = 1;
         o.members.pop_back();
         MakeSpare(o, 3);
         o.members[0].is_etcd_leader = false;
         o.members[1].is_etcd_leader = true;
       },
       StepKind::kRemoveMember,
       InitialId(1),
       "",
       {"n1", "2 voting members, want 1"}},

      // --- nothing to do ---
      {"HealthyAtSizeDoesNothing",
       [](ClusterObservation&) {},
       StepKind::kNone,
       0,
       "",
       {"cluster at size 3", "all members healthy"}},
      {"HealthyAtSizeOneDoesNothing",
       [](ClusterObservation& o) {
         o.desired_size = 1;
         o.members.resize(1);
         MakeSpare(o, 2);
         MakeSpare(o, 3);
       },
       StepKind::kNone,
       0,
       "",
       {"cluster at size 1"}},
  };
}

class PlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlanTest, Step) {
  const Case& c = GetParam();
  ClusterObservation o = Base();
  c.setup(o);
  Step s = PlanNextStep(o);
  SCOPED_TRACE(absl::StrCat("step: ", StepKindName(s.kind), " member ", absl::Hex(s.member_id),
                            " node '", s.node, "': ", s.reason));
  ASSERT_EQ(s.kind, c.kind) << "want " << StepKindName(c.kind) << ", got " << StepKindName(s.kind);
  switch (c.kind) {
    case StepKind::kRemoveMember:
    case StepKind::kPromote:
      EXPECT_EQ(s.member_id, c.member_id);
      EXPECT_TRUE(s.node.empty());
      break;
    case StepKind::kJoin:
      EXPECT_EQ(s.member_id, c.member_id);
      EXPECT_EQ(s.node, c.node);
      break;
    case StepKind::kAddLearner:
    case StepKind::kWipe:
      EXPECT_EQ(s.node, c.node);
      EXPECT_EQ(s.member_id, 0u);
      break;
    case StepKind::kNone:
    case StepKind::kWait:
      EXPECT_EQ(s.member_id, 0u);
      EXPECT_TRUE(s.node.empty());
      break;
  }
  for (const auto& w : c.reason_has) {
    EXPECT_NE(s.reason.find(w), std::string::npos) << "reason lacks \"" << w << "\"";
  }
  for (const auto& w : c.reason_lacks) {
    EXPECT_EQ(s.reason.find(w), std::string::npos) << "reason has \"" << w << "\"";
  }
  if (c.kind != StepKind::kJoin) {
    EXPECT_TRUE(s.initial_cluster.empty());
  }
  if (c.extra) c.extra(s);
}

INSTANTIATE_TEST_SUITE_P(PlanRules, PlanTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(PlanStepKindTest, NamesEveryKind) {
  EXPECT_STREQ(StepKindName(StepKind::kNone), "none");
  EXPECT_STREQ(StepKindName(StepKind::kWait), "wait");
  EXPECT_STREQ(StepKindName(StepKind::kRemoveMember), "remove-member");
  EXPECT_STREQ(StepKindName(StepKind::kAddLearner), "add-learner");
  EXPECT_STREQ(StepKindName(StepKind::kJoin), "join");
  EXPECT_STREQ(StepKindName(StepKind::kPromote), "promote");
  EXPECT_STREQ(StepKindName(StepKind::kWipe), "wipe");
}

TEST(PlanQuorumTest, MajorityOfVoters) {
  EXPECT_EQ(Quorum(1), 1);
  EXPECT_EQ(Quorum(2), 2);
  EXPECT_EQ(Quorum(3), 2);
  EXPECT_EQ(Quorum(4), 3);
  EXPECT_EQ(Quorum(5), 3);
}

// The planner is pure: the same observation gives the same step.
TEST(PlanPurityTest, SameObservationSameStep) {
  ClusterObservation o = Base();
  NodeBackEmpty(o, 2);
  Step a = PlanNextStep(o);
  Step b = PlanNextStep(o);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.member_id, b.member_id);
  EXPECT_EQ(a.reason, b.reason);
}

}  // namespace
}  // namespace steward
