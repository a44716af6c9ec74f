// DecideAuth (reconcile/auth.h, rules AU1-AU6), the prefix arithmetic of `stewardctl access`
// and the gateway certificate of `stewardctl pki issue --gateway`. Pure: no etcd.
#include "reconcile/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "ctl/access_cmd.h"
#include "ctl/pki_cmd.h"
#include "pki/pki.h"

namespace steward {
namespace {

using ::testing::HasSubstr;
using S = AuthStep;

AuthView OnWithEverything() {
  AuthView v;
  v.mode = "on";
  v.root_role = true;
  v.users = {{"root", {"root"}},
             {"n1-client", {"root"}},
             {"n2-client", {"root"}},
             {"ops", {"root"}},
             {"app", {"app"}}};
  v.node_users = {{"n1", "n1-client"}, {"n2", "n2-client"}};
  v.admin_users = {"ops"};
  return v;
}

TEST(DecideAuthTest, OnFromNothingAddsRootThenEveryUserThenEnables) {
  AuthView v;
  v.mode = "on";
  v.node_users = {{"n1", "n1-client"}, {"n2", "n2-client"}};
  v.admin_users = {"ops"};
  AuthPlan p = DecideAuth(v);
  EXPECT_EQ(p.wait, "");
  std::vector<AuthStep> want = {{S::kAddRootRole, ""},        {S::kAddUser, "root"},
                                {S::kGrantRoot, "root"},      {S::kAddUser, "n1-client"},
                                {S::kGrantRoot, "n1-client"}, {S::kAddUser, "n2-client"},
                                {S::kGrantRoot, "n2-client"}, {S::kAddUser, "ops"},
                                {S::kGrantRoot, "ops"},       {S::kEnable, ""}};
  EXPECT_EQ(p.steps, want);
}

TEST(DecideAuthTest, NothingToDoWhenOnAndEveryUserHoldsRoot) {
  AuthView v = OnWithEverything();
  v.enabled = true;
  AuthPlan p = DecideAuth(v);
  EXPECT_TRUE(p.steps.empty());
  EXPECT_EQ(p.wait, "");
}

TEST(DecideAuthTest, AnUnknownAgentBlocksEnablingButNotTheOtherUsers) {  // AU3
  AuthView v = OnWithEverything();
  v.users.erase("n1-client");
  v.node_users["n3"] = "";
  AuthPlan p = DecideAuth(v);
  EXPECT_THAT(p.wait, HasSubstr("n3"));
  std::vector<AuthStep> want = {{S::kAddUser, "n1-client"}, {S::kGrantRoot, "n1-client"}};
  EXPECT_EQ(p.steps, want) << "users are added, auth stays off";
}

TEST(DecideAuthTest, AlreadyOnAddsAMissingAgentAndGrantsALostRootRole) {  // AU5
  AuthView v = OnWithEverything();
  v.enabled = true;
  v.node_users["n3"] = "n3-client";
  v.users["ops"] = {"readers"};  // someone took ops' root role away
  v.node_users["n4"] = "";       // unknown: nothing to do for it, no wait (auth is on)
  AuthPlan p = DecideAuth(v);
  std::vector<AuthStep> want = {
      {S::kAddUser, "n3-client"}, {S::kGrantRoot, "n3-client"}, {S::kGrantRoot, "ops"}};
  EXPECT_EQ(p.steps, want);
  EXPECT_EQ(p.wait, "");
}

TEST(DecideAuthTest, AUserNeverLosesAnythingAndOthersAreLeftAlone) {
  AuthView v = OnWithEverything();
  v.enabled = true;
  v.admin_users = {"n1-client"};  // a name twice: one step, not two
  v.users.erase("n1-client");
  AuthPlan p = DecideAuth(v);
  std::vector<AuthStep> want = {{S::kAddUser, "n1-client"}, {S::kGrantRoot, "n1-client"}};
  EXPECT_EQ(p.steps, want);
  for (const AuthStep& s : p.steps) EXPECT_NE(s.user, "app");
}

TEST(DecideAuthTest, AnAgentNamedRootIsRootOnce) {
  AuthView v;
  v.mode = "on";
  v.node_users = {{"n1", "root"}};
  v.admin_users = {"root"};
  AuthPlan p = DecideAuth(v);
  std::vector<AuthStep> want = {
      {S::kAddRootRole, ""}, {S::kAddUser, "root"}, {S::kGrantRoot, "root"}, {S::kEnable, ""}};
  EXPECT_EQ(p.steps, want);
}

TEST(DecideAuthTest, OffDisablesOnlyWhatIsOn) {  // AU1
  AuthView v = OnWithEverything();
  v.mode = "off";
  v.enabled = true;
  EXPECT_EQ(DecideAuth(v).steps, (std::vector<AuthStep>{{S::kDisable, ""}}));
  v.enabled = false;
  EXPECT_TRUE(DecideAuth(v).steps.empty());
  v.mode = "unmanaged";
  v.enabled = true;
  EXPECT_TRUE(DecideAuth(v).steps.empty());
}

TEST(AccessTest, PrefixRangeEndIsEtcdsPrefix) {
  EXPECT_EQ(PrefixRangeEnd("/app/"), "/app0");
  EXPECT_EQ(PrefixRangeEnd("a"), "b");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixRangeEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(AccessTest, AGatewayCertificateHasNoCommonNameAndRenewalKeepsTheKind) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("steward-auth-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::ostringstream out, err;
  ASSERT_EQ(RunPkiInit(dir.string(), out, err), 0) << err.str();
  PkiIssueOptions gateway;
  gateway.gateway = true;
  ASSERT_EQ(RunPkiIssueClient(dir.string(), "patroni", gateway, out, err), 0) << err.str();
  auto info = ReadCert((dir / "patroni.crt").string());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->common_name, "");
  EXPECT_THAT(info->subject, HasSubstr("O=patroni"));
  // A second issue refuses; --renew replaces the pair; --renew of the wrong kind refuses.
  EXPECT_EQ(RunPkiIssueClient(dir.string(), "patroni", gateway, out, err), 1);
  PkiIssueOptions renew = gateway;
  renew.renew = true;
  const auto before = info->not_before;
  std::ostringstream out2;
  ASSERT_EQ(RunPkiIssueClient(dir.string(), "patroni", renew, out2, err), 0) << err.str();
  EXPECT_THAT(out2.str(), HasSubstr("renewed"));
  auto renewed = ReadCert((dir / "patroni.crt").string());
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->common_name, "");
  EXPECT_GE(renewed->not_before, before);
  PkiIssueOptions wrong_kind;
  wrong_kind.renew = true;
  std::ostringstream err3;
  EXPECT_EQ(RunPkiIssueClient(dir.string(), "patroni", wrong_kind, out, err3), 1);
  EXPECT_THAT(err3.str(), HasSubstr("--gateway"));
  std::ostringstream err4;
  EXPECT_EQ(RunPkiIssueClient(dir.string(), "nobody", renew, out, err4), 1);
  EXPECT_THAT(err4.str(), HasSubstr("no "));
  // A CN certificate names its etcd user.
  ASSERT_EQ(RunPkiIssueClient(dir.string(), "app", out, err), 0) << err.str();
  auto app = ReadCert((dir / "app.crt").string());
  ASSERT_TRUE(app.ok());
  EXPECT_EQ(app->common_name, "app");
  EXPECT_EQ(RunPkiIssueClient(dir.string(), "root", out, err), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace steward
