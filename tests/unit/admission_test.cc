// One test per rule of AdmitOrder and DecideWipe (peer/admission.h).
#include "peer/admission.h"

#include "gtest/gtest.h"

namespace steward {
namespace {

OrderView Order(uint64_t term, const std::string& leader, uint64_t newest,
                const std::string& newest_leader) {
  OrderView v;
  v.what = "wipe";
  v.term = term;
  v.leader = leader;
  v.newest_term = newest;
  v.newest_leader = newest_leader;
  return v;
}

TEST(AdmitOrder, A1_WithRolesOnlyAnAgentCertificateGivesOrders) {
  OrderView v = Order(10, "n1", 5, "n1");
  v.roles_checked = true;
  v.caller_is_agent = false;
  v.role_error = "steward://operator is not an agent";
  Admission a = AdmitOrder(v);
  EXPECT_EQ(a.rule, "A1");
  EXPECT_TRUE(absl::IsPermissionDenied(a.status));
  EXPECT_NE(a.status.message().find("operator"), std::string::npos);
  v.caller_is_agent = true;
  EXPECT_EQ(AdmitOrder(v).rule, "A6");
  v.roles_checked = false;  // TLS off: no roles
  v.caller_is_agent = false;
  EXPECT_EQ(AdmitOrder(v).rule, "A6");
}

TEST(AdmitOrder, A2_ATermBeyondAnyRealTermIsRefused) {
  Admission a = AdmitOrder(Order(kMaxTerm + 1, "x", kMaxTerm, "n1"));
  EXPECT_EQ(a.rule, "A2");
  EXPECT_TRUE(absl::IsInvalidArgument(a.status));
  EXPECT_EQ(AdmitOrder(Order(kMaxTerm, "n1", kMaxTerm - 1, "n1")).rule, "A6");
}

TEST(AdmitOrder, A3_AnAbsurdJumpIsRefused) {
  Admission a = AdmitOrder(Order(100 + kMaxTermJump + 1, "x", 100, "n1"));
  EXPECT_EQ(a.rule, "A3");
  EXPECT_TRUE(absl::IsInvalidArgument(a.status));
  EXPECT_EQ(AdmitOrder(Order(100 + kMaxTermJump, "n2", 100, "n1")).rule, "A6");
}

TEST(AdmitOrder, A4_OneTermOneLeader) {
  Admission a = AdmitOrder(Order(7, "n2", 7, "n1"));
  EXPECT_EQ(a.rule, "A4");
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status));
  EXPECT_EQ(AdmitOrder(Order(7, "n1", 7, "n1")).rule, "A6") << "the holder keeps its term";
  EXPECT_EQ(AdmitOrder(Order(7, "n2", 7, "")).rule, "A6") << "an unknown holder (old agents)";
}

TEST(AdmitOrder, A5_StaleOrdersAndNotNewerPromisesAreRefused) {
  Admission a = AdmitOrder(Order(6, "n1", 7, "n1"));
  EXPECT_EQ(a.rule, "A5");
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status));
  OrderView p = Order(7, "n1", 7, "n1");
  p.is_promise = true;
  EXPECT_EQ(AdmitOrder(p).rule, "A5") << "a promise must be strictly newer, even from the holder";
  p.term = 8;
  EXPECT_EQ(AdmitOrder(p).rule, "A6");
}

TEST(AdmitOrder, A6_ANewerTermIsAdmitted) {
  Admission a = AdmitOrder(Order(8, "n3", 7, "n1"));
  EXPECT_EQ(a.rule, "A6");
  EXPECT_TRUE(a.status.ok());
}

WipeView Wipeable() {
  WipeView v;
  v.has_member_data = true;
  v.member_id = 0xaa;
  v.list_ok = true;
  v.list_cluster_id = 0xc1;
  v.leader_cluster_id = 0xc1;
  v.member_ids = {0xbb, 0xcc};
  return v;
}

TEST(DecideWipe, W1_NoMemberDataNothingToWipe) {
  WipeView v;
  WipeDecision d = DecideWipe(v);
  EXPECT_EQ(d.rule, "W1");
  EXPECT_EQ(d.action, WipeAction::kNothing);
  EXPECT_TRUE(d.status.ok());
}

TEST(DecideWipe, W2_UnknownIdentityIsRefused) {
  WipeView v = Wipeable();
  v.member_id.reset();
  v.identity_error = "no WAL snapshot record";
  WipeDecision d = DecideWipe(v);
  EXPECT_EQ(d.rule, "W2");
  EXPECT_EQ(d.action, WipeAction::kRefuse);
  EXPECT_TRUE(absl::IsFailedPrecondition(d.status));
}

TEST(DecideWipe, W3_AnUnreadableMemberListIsRefused) {
  WipeView v = Wipeable();
  v.list_ok = false;
  v.list_error = "no member answers";
  WipeDecision d = DecideWipe(v);
  EXPECT_EQ(d.rule, "W3");
  EXPECT_TRUE(absl::IsUnavailable(d.status));
}

TEST(DecideWipe, W4_AListFromAnotherClusterProvesNothing) {
  WipeView v = Wipeable();
  v.list_cluster_id = 0xdead;
  WipeDecision d = DecideWipe(v);
  EXPECT_EQ(d.rule, "W4");
  EXPECT_EQ(d.action, WipeAction::kRefuse);
  EXPECT_NE(d.status.message().find("dead"), std::string::npos);
  v.leader_cluster_id = 0;  // a leader too old to say: the list is taken as it is
  EXPECT_EQ(DecideWipe(v).rule, "W6");
}

TEST(DecideWipe, W5_AListedMemberIsNeverWiped) {
  WipeView v = Wipeable();
  v.member_ids.push_back(0xaa);
  WipeDecision d = DecideWipe(v);
  EXPECT_EQ(d.rule, "W5");
  EXPECT_TRUE(absl::IsFailedPrecondition(d.status));
}

TEST(DecideWipe, W6_ARemovedMemberIsSetAside) {
  WipeDecision d = DecideWipe(Wipeable());
  EXPECT_EQ(d.rule, "W6");
  EXPECT_EQ(d.action, WipeAction::kSetAside);
}

}  // namespace
}  // namespace steward
