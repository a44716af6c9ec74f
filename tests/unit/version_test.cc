// Versions and binaries (etcd/version.h, rules EV0-EV2 and U2/U8 in reconcile/plan.h): which
// binary a join uses, when a node cannot join, what etcd's log says when it exits, and a roll
// that checks every node's binary first.
#include "etcd/version.h"

#include <gtest/gtest.h>

#include "reconcile/plan.h"

namespace steward {
namespace {

const std::vector<EtcdBinary> kDebian34 = {{"", "/usr/bin/etcd", "3.4.23", ""}};
const std::vector<EtcdBinary> kBoth = {{"", "/usr/bin/etcd", "3.4.23", ""},
                                       {"3.4.23", "/usr/bin/etcd", "3.4.23", ""},
                                       {"3.5.16", "/opt/etcd-3.5.16", "3.5.16", ""}};

TEST(VersionTest, EV1_ExactVersionFirstThenTheNewestPatchOfTheMinorNeverAnotherMinor) {
  ASSERT_NE(PickBinary(kBoth, "3.5.16"), nullptr);
  EXPECT_EQ(PickBinary(kBoth, "3.5.16")->path, "/opt/etcd-3.5.16");
  EXPECT_EQ(PickBinary(kBoth, "3.4.23")->key, "") << "etcd.binary, listed first";
  // Another patch of the same minor runs the cluster's minor.
  ASSERT_NE(PickBinary(kBoth, "3.5.9"), nullptr);
  EXPECT_EQ(PickBinary(kBoth, "3.5.9")->reported, "3.5.16");
  // Never a lower minor (etcd refuses it), never a higher one (an unasked upgrade).
  EXPECT_EQ(PickBinary(kDebian34, "3.5.16"), nullptr);
  EXPECT_EQ(PickBinary(kBoth, "3.3.25"), nullptr);
  // A binary that reported nothing is never picked.
  EXPECT_EQ(PickBinary({{"3.5.16", "/bin/true", "", "not etcd"}}, "3.5.16"), nullptr);
}

TEST(VersionTest, EV2_TheMessageNamesTheVersionWhatTheNodeHasAndTheKey) {
  const std::string m = NoBinaryFor("n3", "3.5.16", kDebian34);
  EXPECT_NE(m.find("n3 needs etcd 3.5.16"), std::string::npos) << m;
  EXPECT_NE(m.find("etcd.binary is 3.4.23"), std::string::npos) << m;
  EXPECT_NE(m.find("etcd.versions"), std::string::npos) << m;
}

TEST(VersionTest, VersionsFromOutputAndImages) {
  EXPECT_EQ(VersionFromOutput("etcd Version: 3.4.23\nGit SHA: Not provided\n"), "3.4.23");
  EXPECT_EQ(VersionFromOutput("this etcd does not start\n"), "");
  EXPECT_EQ(VersionFromOutput("etcd Version: banana\n"), "");
  EXPECT_EQ(VersionFromImage("registry.k8s.io/etcd:3.5.16-0"), "3.5.16");
  EXPECT_EQ(VersionFromImage("quay.io/coreos/etcd:v3.4.23"), "3.4.23");
  EXPECT_EQ(VersionFromImage("localhost:5000/etcd"), "");
  EXPECT_EQ(VersionFromImage("etcd:latest"), "");
}

// Lines as etcd 3.4 (capnslog) and 3.5 (JSON) wrote them here when refused.
TEST(VersionTest, ExitReasonFromEtcdsOwnLog) {
  EXPECT_EQ(ExitReasonFromLog(
                "2026-11-28 06:23:50.167151 I | etcdmain: setting maximum number of CPUs to 2\n"
                "2026-11-28 06:23:50.167402 C | etcdmain: listen tcp 127.0.250.1:2380: bind: "
                "address already in use\n"),
            "listen tcp 127.0.250.1:2380: bind: address already in use");
  EXPECT_EQ(ExitReasonFromLog(
                "2026-11-28 06:30:00.1 E | etcdserver: the running cluster version(3.5.0) is "
                "higher than the maximum cluster version(3.4.0) supported\n"
                "2026-11-28 06:30:00.2 C | etcdmain: incompatible with current running cluster\n"),
            "incompatible with current running cluster");
  EXPECT_EQ(
      ExitReasonFromLog(
          R"({"level":"info","msg":"closing etcd server"})"
          "\n"
          R"({"level":"warn","msg":"failed to start etcd","error":"listen tcp: x"})"
          "\n"
          R"({"level":"fatal","msg":"discovery failed","error":"listen tcp: bind: address already in use","stacktrace":"..."})"
          "\n"),
      "discovery failed: listen tcp: bind: address already in use");
  EXPECT_EQ(ExitReasonFromLog("panic: runtime error\ngoroutine 1 [running]:\n"),
            "panic: runtime error")
      << "a Go panic, not the stack below it";
  EXPECT_EQ(ExitReasonFromLog("this etcd does not start\n"), "this etcd does not start");
  EXPECT_EQ(ExitReasonFromLog(""), "");
}

// Three voters on `versions`; n3 is back empty and a spare that can run `binaries`.
ClusterObservation WipedNode(std::vector<std::string> versions, std::string desired,
                             std::vector<EtcdBinary> binaries) {
  ClusterObservation o;
  o.desired_size = 3;
  o.member_list_ok = true;
  o.desired_version = std::move(desired);
  o.available_versions = {"3.4.23", "3.5.16"};
  for (int i = 0; i < 3; ++i) {
    NodeView n;
    n.name = "n" + std::to_string(i + 1);
    n.peer_url = "https://127.0.0." + std::to_string(11 + i) + ":2380";
    n.agent_up = true;
    n.etcd_running = i < 2;
    n.has_data = i < 2;
    n.local_member_id = i < 2 ? 100 + i : 0;
    n.binaries = binaries;
    o.nodes.push_back(n);
    if (i == 2) continue;  // its old entry is gone already
    MemberView m;
    m.id = 100 + i;
    m.name = n.name;
    m.peer_url = n.peer_url;
    m.started = true;
    m.healthy = true;
    m.is_etcd_leader = i == 0;
    m.version = versions[static_cast<size_t>(i)];
    o.members.push_back(m);
  }
  o.desired_size = 3;
  return o;
}

TEST(VersionTest, EV0_TheClustersVersionIsTheDesiredOnceEveryoneRunsItElseTheHighest) {
  EXPECT_EQ(ClusterVersion(WipedNode({"3.5.16", "3.5.16"}, "3.5.16", kBoth)), "3.5.16");
  EXPECT_EQ(ClusterVersion(WipedNode({"3.5.16", "3.5.16"}, "", kBoth)), "3.5.16");
  // In the middle of a roll: never a lower minor than any member.
  EXPECT_EQ(ClusterVersion(WipedNode({"3.4.23", "3.5.16"}, "3.5.16", kBoth)), "3.5.16");
  EXPECT_EQ(ClusterVersion(WipedNode({"", ""}, "", kBoth)), "");
}

TEST(VersionTest, EV2_ANodeWithoutTheClustersVersionIsNoSpareAndTheWaitSaysWhy) {
  Step s = PlanNextStep(WipedNode({"3.5.16", "3.5.16"}, "3.5.16", kDebian34));
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("n3 needs etcd 3.5.16"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("3.4.23"), std::string::npos) << s.reason;
  // With the binary, the node is added.
  s = PlanNextStep(WipedNode({"3.5.16", "3.5.16"}, "3.5.16", kBoth));
  EXPECT_EQ(s.kind, StepKind::kAddLearner) << s.reason;
  // An agent that did not say what it runs is not held back (nothing is assumed).
  s = PlanNextStep(WipedNode({"3.5.16", "3.5.16"}, "3.5.16", {}));
  EXPECT_EQ(s.kind, StepKind::kAddLearner) << s.reason;
}

TEST(VersionTest, EV1_AJoinCarriesTheClustersVersionAndALearnerThatCannotRunItWaits) {
  for (const auto& binaries : {kBoth, kDebian34}) {
    ClusterObservation o = WipedNode({"3.5.16", "3.5.16"}, "3.5.16", binaries);
    MemberView l;
    l.id = 300;
    l.peer_url = o.nodes[2].peer_url;
    l.is_learner = true;
    o.members.push_back(l);
    Step s = PlanNextStep(o);
    if (binaries.size() > 1) {
      EXPECT_EQ(s.kind, StepKind::kJoin) << s.reason;
      EXPECT_EQ(s.version, "3.5.16");
    } else {
      EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
      EXPECT_NE(s.reason.find("needs etcd 3.5.16"), std::string::npos) << s.reason;
      o.learner_age = o.learner_timeout;
      EXPECT_EQ(PlanNextStep(o).kind, StepKind::kRemoveMember) << "not kept for good";
    }
  }
}

TEST(VersionTest, ALearnerWhoseNodeBacksOffAfterARefusedJoinIsNotOrderedAgainYet) {
  ClusterObservation o = WipedNode({"3.5.16", "3.5.16"}, "3.5.16", kBoth);
  MemberView l;
  l.id = 300;
  l.peer_url = o.nodes[2].peer_url;
  l.is_learner = true;
  o.members.push_back(l);
  o.nodes[2].join_error = "listen tcp 127.0.0.13:2380: bind: address already in use";
  o.nodes[2].join_retry_in = std::chrono::milliseconds(3500);
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("address already in use"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("backs off"), std::string::npos) << s.reason;
  o.learner_age = o.learner_timeout;  // not waited on for good
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kRemoveMember);
  o.learner_age = std::chrono::milliseconds(0);
  o.nodes[2].join_retry_in = std::chrono::milliseconds(0);
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kJoin);
}

// Three healthy voters on 3.4.23 asked for `desired`; every node reports `binaries`.
ClusterObservation Roll(std::string desired, std::vector<EtcdBinary> n2_binaries) {
  ClusterObservation o = WipedNode({"3.4.23", "3.4.23"}, desired, kBoth);
  o.nodes[2].etcd_running = true;
  o.nodes[2].has_data = true;
  o.nodes[2].local_member_id = 102;
  MemberView m = o.members[1];
  m.id = 102;
  m.name = "n3";
  m.peer_url = o.nodes[2].peer_url;
  o.members.push_back(m);
  o.nodes[1].binaries = std::move(n2_binaries);
  return o;
}

TEST(VersionTest, U2_ARollWaitsForABinaryThatIsNotEtcdOrAnotherVersionBeforeAnySwitch) {
  Step ok = PlanNextStep(Roll("3.5.16", kBoth));
  EXPECT_EQ(ok.kind, StepKind::kSwitchVersion) << ok.reason;
  std::vector<EtcdBinary> broken = kBoth;
  broken[2] = {"3.5.16", "/opt/not-etcd", "", "`--version` exited with status 1 (not etcd?)"};
  Step s = PlanNextStep(Roll("3.5.16", broken));
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("node n2"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("/opt/not-etcd"), std::string::npos) << s.reason;
  std::vector<EtcdBinary> other = kBoth;
  other[2].reported = "3.4.23";
  s = PlanNextStep(Roll("3.5.16", other));
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("reports etcd 3.4.23"), std::string::npos) << s.reason;
}

TEST(VersionTest, U8_ARollStoppedOnAMemberThatExitsSaysSoWithTheWayBack) {
  ClusterObservation o = Roll("3.5.16", kBoth);
  o.members[2].healthy = false;
  o.members[2].version = "";
  o.members[2].unhealthy_for = std::chrono::seconds(5);
  o.nodes[2].switched_version = "3.5.16";
  o.nodes[2].etcd_exit = "exit status 3";
  Step s = PlanNextStep(o);
  EXPECT_EQ(s.kind, StepKind::kWait) << s.reason;
  EXPECT_NE(s.reason.find("rolling upgrade to etcd 3.5.16 stopped: n3"), std::string::npos)
      << s.reason;
  EXPECT_NE(s.reason.find("exit status 3"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("configure-cluster --etcd-version 3.4.23"), std::string::npos)
      << s.reason;
  // Going back (the spec says 3.4.23 again): U7 switches it back.
  o.desired_version = "3.4.23";
  EXPECT_EQ(PlanNextStep(o).kind, StepKind::kSwitchVersion);
}

}  // namespace
// Issue 37: 3.6 and later were never run here; configure-cluster asks for --untested.
TEST(VersionTest, ReleasesFrom36OnAreUntested) {
  EXPECT_FALSE(UntestedEtcd("3.4.23"));
  EXPECT_FALSE(UntestedEtcd("3.5.16"));
  EXPECT_TRUE(UntestedEtcd("3.6.0"));
  EXPECT_TRUE(UntestedEtcd("3.7.1"));
  EXPECT_TRUE(UntestedEtcd("4.0.0"));
  EXPECT_FALSE(UntestedEtcd("latest")) << "not a version: other checks refuse it";
}

}  // namespace steward
