// Table tests of a node's own start decision (src/node/start_decision.h), one per rule.
#include "node/start_decision.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

// An empty initial node, no cluster answering, every peer empty, a readable empty store.
StartView Fresh() {
  StartView v;
  v.node = "n1";
  v.initial = true;
  v.peers_allow = true;
  v.has_store = true;
  return v;
}

TEST(StartDecisionTest, S8_AFreshInitialNodeBootstraps) {
  EXPECT_EQ(DecideStart(Fresh()).action, StartAction::kBootstrap);
  StartView no_store = Fresh();
  no_store.has_store = false;
  EXPECT_EQ(DecideStart(no_store).action, StartAction::kBootstrap);
}

TEST(StartDecisionTest, AD4_AdoptingAnEmptyNodeNeverBootstrapsButStartsItsData) {
  StartView v = Fresh();
  v.adopting = true;
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_NE(d.reason.find("cluster.adopt"), std::string::npos) << d.reason;
  v.cluster = ClusterAnswer::kInitialEntryUnstarted;
  EXPECT_EQ(DecideStart(v).action, StartAction::kWait);
  v.data = DataDirState::kMember;
  EXPECT_EQ(DecideStart(v).action, StartAction::kStartOnData);
}

TEST(StartDecisionTest, S1_APartialDataDirIsSetAsideWhateverElseHolds) {
  StartView v = Fresh();
  v.data = DataDirState::kPartial;
  v.ever_joined = true;
  EXPECT_EQ(DecideStart(v).action, StartAction::kSetPartialAside);
}

TEST(StartDecisionTest, S2_MemberDataIsStartedEvenWhenTheStoreIsDown) {
  StartView v = Fresh();
  v.data = DataDirState::kMember;
  v.store_ok = false;
  v.initial = false;
  EXPECT_EQ(DecideStart(v).action, StartAction::kStartOnData);
}

TEST(StartDecisionTest, S3_AWipedFormerMemberWaitsForTheLeader) {
  StartView v = Fresh();
  v.ever_joined = true;
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_NE(d.reason.find("was a member before"), std::string::npos) << d.reason;
}

TEST(StartDecisionTest, S4_ASpareWaits) {
  StartView v = Fresh();
  v.initial = false;
  EXPECT_NE(DecideStart(v).reason.find("spare"), std::string::npos);
}

TEST(StartDecisionTest, S5_ARunningClusterDecidesForTheLeader) {
  StartView v = Fresh();
  v.cluster = ClusterAnswer::kWithoutThisNode;
  EXPECT_EQ(DecideStart(v).action, StartAction::kWait);
  v.cluster = ClusterAnswer::kEntryHasRun;
  EXPECT_EQ(DecideStart(v).action, StartAction::kWait);
  // The initial cluster waiting for this member: starting it joins, even though the store
  // already shows the cluster (its first leader marked it) and the peers are members now.
  v.cluster = ClusterAnswer::kInitialEntryUnstarted;
  v.cluster_existed = true;
  v.peers_allow = false;
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kBootstrap);
  EXPECT_NE(d.reason.find("joining it"), std::string::npos) << d.reason;
}

// Issue 9, path 4: a re-imaged node whose peers are restarting must not bootstrap.
TEST(StartDecisionTest, S6_SilentOrMemberPeersBlockTheBootstrap) {
  StartView v = Fresh();
  v.has_store = false;
  v.peers_allow = false;
  v.peers_why = "n2 does not answer";
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_NE(d.reason.find("n2 does not answer"), std::string::npos) << d.reason;
}

// Issue 9, path 3: an unreadable store, or one that shows the cluster, is never "new".
TEST(StartDecisionTest, S7_TheStoreMustBeReadableAndShowNoCluster) {
  StartView v = Fresh();
  v.store_ok = false;
  v.store_error = "the directory does not exist (not mounted?)";
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_NE(d.reason.find("not mounted?"), std::string::npos) << d.reason;
  v = Fresh();
  v.cluster_existed = true;
  d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_NE(d.reason.find("waiting for a restore"), std::string::npos) << d.reason;
}

TEST(StartDecisionTest, J1_TheWalShowsALeaderNobodySaw) {
  EXPECT_TRUE(EverJoined(true, 0, 3)) << "the marker";
  EXPECT_FALSE(EverJoined(false, 0, 3)) << "no WAL";
  EXPECT_FALSE(EverJoined(false, 3, 3)) << "only the initial configuration entries";
  EXPECT_TRUE(EverJoined(false, 4, 3)) << "a leader's entry was committed";
  EXPECT_FALSE(EverJoined(false, 5, 5));
}

TEST(StartDecisionTest, D1_AMembersDataGoneUnderEtcdStopsIt) {
  using D = DataDirState;
  EXPECT_TRUE(DataLostUnderEtcd(true, true, false, D::kEmpty)) << "started on data, now empty";
  EXPECT_TRUE(DataLostUnderEtcd(true, true, false, D::kPartial));
  EXPECT_TRUE(DataLostUnderEtcd(true, false, true, D::kEmpty)) << "a join that had its WAL";
  EXPECT_FALSE(DataLostUnderEtcd(true, false, false, D::kEmpty)) << "a join still starting";
  EXPECT_FALSE(DataLostUnderEtcd(true, true, true, D::kMember));
  EXPECT_FALSE(DataLostUnderEtcd(false, true, true, D::kEmpty)) << "not wanted";
}

}  // namespace

// SD1: a node that stopped its etcd for a destroy stays stopped, even on member data, while the
// store marks the cluster destroyed or cannot be read; once the mark is gone it forgets.
TEST(StartDecisionTest, SD1_ADestroyedNodeStaysStoppedUntilTheMarkIsGone) {
  for (DataDirState data : {DataDirState::kEmpty, DataDirState::kMember}) {
    StartView v = Fresh();
    v.data = data;
    v.local_destroyed = "1700000000-abcd";
    v.destroy_store_ok = true;
    v.destroyed = "cluster demo was destroyed by root@h";
    StartDecision d = DecideStart(v);
    EXPECT_EQ(d.action, StartAction::kWait);
    EXPECT_EQ(d.reason, v.destroyed);
    v.destroyed.clear();
    v.destroy_store_ok = false;
    v.destroy_store_error = "connection refused";
    d = DecideStart(v);
    EXPECT_EQ(d.action, StartAction::kWait);
    EXPECT_NE(d.reason.find("connection refused"), std::string::npos) << d.reason;
    v.destroy_store_ok = true;
    EXPECT_EQ(DecideStart(v).action, StartAction::kForgetDestroyed);
  }
}

// SD2: a node without the marker, of a cluster the store marks destroyed (its agent was down
// during the destroy, or a new machine), records it, whatever its data; then SD1 holds it.
TEST(StartDecisionTest, SD2_ANodeThatMissedTheDestroyRecordsIt) {
  for (DataDirState data : {DataDirState::kEmpty, DataDirState::kPartial, DataDirState::kMember}) {
    StartView v = Fresh();
    v.data = data;
    v.destroy_store_ok = true;
    v.destroyed = "cluster demo was destroyed";
    v.destroyed_id = "1-0001";
    EXPECT_EQ(DecideStart(v).action, StartAction::kRecordDestroyed);
    v.local_destroyed = "1-0001";
    EXPECT_EQ(DecideStart(v).action, StartAction::kWait);
  }
  // A store that cannot be read does not keep a member's data from starting.
  StartView v = Fresh();
  v.data = DataDirState::kMember;
  v.destroy_store_error = "connection refused";
  EXPECT_EQ(DecideStart(v).action, StartAction::kStartOnData);
}

// RM3: a member's data is not started once its member is provably out of its cluster; a list
// from another cluster, or none, proves nothing.
TEST(StartDecisionTest, RM3_AMemberProvablyRemovedFromItsClusterIsNotStarted) {
  EXPECT_TRUE(MemberRemoved(0xa, 0xc, true, 0xc, {0xb, 0xd}));
  EXPECT_FALSE(MemberRemoved(0xa, 0xc, true, 0xc, {0xa, 0xb}));  // still a member
  EXPECT_FALSE(MemberRemoved(0xa, 0xc, true, 0xe, {0xb}));       // another cluster answered
  EXPECT_FALSE(MemberRemoved(0xa, 0xc, false, 0, {}));           // no quorum: no proof
  EXPECT_FALSE(MemberRemoved(0, 0xc, true, 0xc, {0xb}));         // the WAL said nothing
  StartView v = Fresh();
  v.data = DataDirState::kMember;
  v.member_removed = "member a is no longer in cluster c";
  StartDecision d = DecideStart(v);
  EXPECT_EQ(d.action, StartAction::kWait);
  EXPECT_EQ(d.reason, v.member_removed);
  v.member_removed.clear();
  EXPECT_EQ(DecideStart(v).action, StartAction::kStartOnData);
}

}  // namespace steward
