// etcd's authentication kept by the agents (auth.mode: on) and applications confined to their
// prefixes (stewardctl access, pki issue), against real agents and etcd 3.4 on 127.0.27.x and
// 127.0.28.x; Patroni 3.0.2 (Debian's) through etcd's HTTP gateway with a password.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"
#include "pki/node_certs.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kAuthOn = 27, kPatroni = 28 };

// The harness's operator certificate is CN test-admin.
constexpr char kAuthOnYaml[] = "auth:\n  mode: on\n  admin_users: [test-admin]\n";

EtcdClient ClientAs(const TestCluster& c, const std::string& cert, const std::string& key) {
  EtcdClient::Options o;
  o.timeout = 3000ms;
  auto creds = TlsChannelCredentials(c.CaCert(), cert, key);
  EXPECT_TRUE(creds.ok()) << creds.status();
  if (creds.ok()) o.credentials = *creds;
  return EtcdClient(c.ClientUrls(), o);
}

nlohmann::json JsonIn(const std::string& out) {
  const size_t from = out.find_first_of("[{");
  if (from == std::string::npos) return nlohmann::json();
  return nlohmann::json::parse(out.substr(from), nullptr, false);
}

// Starts the three agents; true once they are voters and the leader has turned auth on.
bool StartWithAuthOn(TestCluster& c) {
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  if (!c.WaitVoters({"n1", "n2", "n3"}, 60s)) return false;
  EtcdClient admin = c.Client(c.ClientUrls());
  return WaitFor(
      [&] {
        auto on = admin.AuthEnabled();
        return on.ok() && *on;
      },
      30s);
}

TEST(AuthTest, AgentsTurnAuthOnStayInChargeAndAnApplicationIsConfinedToItsPrefix) {
  TestCluster c(kAuthOn, 3, 3, kFastLeader, absl::StrCat(kFileBackup, kAuthOnYaml));
  ASSERT_TRUE(StartWithAuthOn(c)) << c.Logs();
  EtcdClient admin = c.Client(c.ClientUrls());

  // Every agent's user and the operator's hold the root role.
  RunResult list = c.Ctl({"access", "list", "-o", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  nlohmann::json users = JsonIn(list.output);
  ASSERT_TRUE(users.is_object()) << list.output;
  EXPECT_TRUE(users.value("auth_enabled", false)) << list.output;
  std::map<std::string, std::vector<std::string>> roles;
  for (const auto& u : users["users"])
    roles[u["name"]] = u["roles"].get<std::vector<std::string>>();
  for (const char* u : {"root", "n1-client", "n2-client", "n3-client", "test-admin"}) {
    ASSERT_EQ(roles.count(u), 1u) << u << "\n" << list.output;
    EXPECT_EQ(roles[u], std::vector<std::string>{"root"}) << u;
  }

  // An application: its own certificate and a user confined to /app/.
  RunResult issued = c.Ctl({"pki", "issue", "--dir", c.Root() + "/pki", "--client", "app"}, false);
  ASSERT_EQ(issued.exit_code, 0) << issued.output;
  const std::string app_cert = c.Root() + "/pki/app.crt", app_key = c.Root() + "/pki/app.key";
  EtcdClient app = ClientAs(c, app_cert, app_key);
  // No user yet: etcd refuses it everything.
  EXPECT_FALSE(app.Put("/app/x", "1").ok());
  RunResult grant = c.Ctl({"access", "grant", "app", "--prefix", "/app/"});
  ASSERT_EQ(grant.exit_code, 0) << grant.output;
  std::cerr << "$ stewardctl access grant app --prefix /app/\n" << grant.output;
  EXPECT_TRUE(absl::StrContains(grant.output, "granted readwrite prefix /app/")) << grant.output;
  ASSERT_TRUE(app.Put("/app/x", "1").ok());
  auto mine = app.Get("/app/x");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->value_or("<absent>"), "1");
  auto theirs = app.Get("/steward/it/spec");
  EXPECT_FALSE(theirs.ok());
  EXPECT_TRUE(absl::StrContains(theirs.status().message(), "permission denied")) << theirs.status();
  EXPECT_FALSE(app.Put("/other", "1").ok());
  // A password for the certificate user (etcd keeps a password-less user password-less through
  // a change of password: the user is made again) - it logs in, and keeps its prefix.
  const std::string password_file = c.Root() + "/app.password";
  std::ofstream(password_file) << "app-password\n";
  RunResult with_password =
      c.Ctl({"access", "grant", "app", "--prefix", "/app/", "--password-file", password_file});
  ASSERT_EQ(with_password.exit_code, 0) << with_password.output;
  auto token = admin.Authenticate("app", "app-password");
  EXPECT_TRUE(token.ok()) << token.status();
  EXPECT_FALSE(admin.Authenticate("app", "wrong").ok());
  ASSERT_TRUE(app.Put("/app/x", "1").ok());

  RunResult table = c.Ctl({"access", "list"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  std::cerr << "$ stewardctl access list\n" << table.output;
  EXPECT_TRUE(absl::StrContains(table.output, "authentication: on")) << table.output;

  // The names etcd-steward needs are refused, and so are the agents' own keys.
  EXPECT_EQ(c.Ctl({"access", "grant", "n2-client", "--prefix", "/x/"}).exit_code, 2);
  EXPECT_EQ(c.Ctl({"access", "revoke", "test-admin"}).exit_code, 2);
  EXPECT_EQ(c.Ctl({"access", "grant", "app", "--prefix", "/steward/"}).exit_code, 2);
  EXPECT_EQ(c.Ctl({"access", "grant", "app", "--prefix", "/"}).exit_code, 2);

  // The agents are still in charge: a wiped node is replaced (member remove, add as a learner,
  // promote - all root's calls) and a backup is taken.
  c.SignalAgent(2, SIGKILL);
  c.KillEtcd(2);
  fs::remove_all(c.DataDir(2) + "/etcd");
  c.StartAgent(2);
  ASSERT_TRUE(WaitFor(
      [&] {
        EtcdClient n3 = c.Client(c.ClientUrl(2));
        auto v = n3.Get("/app/x");
        return v.ok() && v->value_or("") == "1";
      },
      90s))
      << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  const std::string backup = TakeBackup(c);
  ASSERT_FALSE(backup.empty());
  RunResult status = c.Ctl({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "auth:           on")) << status.output;
  // This cluster's backups are in clear: status says so.
  EXPECT_TRUE(absl::StrContains(status.output, "NOT ENCRYPTED")) << status.output;

  // A restore under auth: the restored members' own steps (revoking the backup's leases on the
  // fenced member, settling) run as the agents' users, which came back with the backup.
  ASSERT_TRUE(app.Put("/app/x", "2").ok());
  RunResult restored = c.Ctl({"restore-backup", backup, "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(restored.exit_code, 0) << restored.output << c.Logs();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = app.Get("/app/x");
        return v.ok() && v->value_or("") == "1";
      },
      30s))
      << c.Logs();
  auto still_on = admin.AuthEnabled();
  ASSERT_TRUE(still_on.ok()) << still_on.status();
  EXPECT_TRUE(*still_on);
  EXPECT_FALSE(app.Get("/steward/it/spec").ok());

  // Revoked, the application is locked out again.
  RunResult revoke = c.Ctl({"access", "revoke", "app"});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.output;
  EXPECT_FALSE(app.Get("/app/x").ok());
}

TEST(AuthTest, PatroniReachesItsPrefixThroughTheGatewayWithAPassword) {
  if (::access("/usr/bin/patronictl", X_OK) != 0) {
    GTEST_FAIL() << "patronictl is missing (scripts/install-deps.sh --test installs patroni)";
  }
  TestCluster c(kPatroni, 3, 3, kFastLeader, kAuthOnYaml);
  ASSERT_TRUE(StartWithAuthOn(c)) << c.Logs();
  EtcdClient admin = c.Client(c.ClientUrls());

  // A gateway certificate (no CN: etcd 3.4 refuses one with a CN on the gateway once auth is
  // on) and a password.
  RunResult issued = c.Ctl(
      {"pki", "issue", "--dir", c.Root() + "/pki", "--client", "patroni", "--gateway"}, false);
  ASSERT_EQ(issued.exit_code, 0) << issued.output;
  const std::string password_file = c.Root() + "/patroni.password";
  std::ofstream(password_file) << "s3cret-of-patroni\n";
  RunResult grant = c.Ctl(
      {"access", "grant", "patroni", "--prefix", "/service/", "--password-file", password_file});
  ASSERT_EQ(grant.exit_code, 0) << grant.output;

  auto patroni_yaml = [&](const std::string& cert, const std::string& key, bool with_password) {
    std::string hosts;
    for (int i = 0; i < 3; ++i) {
      hosts += absl::StrCat(i == 0 ? "" : ",", c.Host(i), ":2379");
    }
    const std::string path = c.Root() + "/patroni.yml";
    std::ofstream out(path, std::ios::trunc);
    out << "scope: pg-it\nname: pg1\netcd3:\n  hosts: " << hosts
        << "\n  protocol: https\n  cacert: " << c.CaCert() << "\n  cert: " << cert
        << "\n  key: " << key << "\n";
    if (with_password) out << "  username: patroni\n  password: s3cret-of-patroni\n";
    return path;
  };
  const std::string gw_cert = c.Root() + "/pki/patroni.crt", gw_key = c.Root() + "/pki/patroni.key";
  // patronictl lists the (empty) cluster pg-it: it read /service/pg-it/ through the gateway.
  RunResult ok =
      RunCommand({"/usr/bin/patronictl", "-c", patroni_yaml(gw_cert, gw_key, true), "list"}, 60s);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(absl::StrContains(ok.output, "Cluster: pg-it")) << ok.output;
  std::cerr << "$ patronictl -c patroni.yml list\n" << ok.output;
  // Without the password, nothing: etcd refuses the unauthenticated gateway request.
  RunResult no_password =
      RunCommand({"/usr/bin/patronictl", "-c", patroni_yaml(gw_cert, gw_key, false), "list"}, 60s);
  EXPECT_FALSE(absl::StrContains(no_password.output, "Cluster: pg-it") &&
               no_password.exit_code == 0)
      << no_password.output;
  // The password user cannot reach the agents' keys through the gateway either.
  RunResult curl_token = RunCommand(
      {"/usr/bin/curl", "-sS", "--cacert", c.CaCert(), "--cert", gw_cert, "--key", gw_key, "-X",
       "POST", absl::StrCat("https://", c.Host(0), ":2379/v3/auth/authenticate"), "-d",
       R"({"name":"patroni","password":"s3cret-of-patroni"})"},
      30s);
  ASSERT_EQ(curl_token.exit_code, 0) << curl_token.output;
  auto token = nlohmann::json::parse(curl_token.output, nullptr, false);
  ASSERT_TRUE(token.is_object() && token.contains("token")) << curl_token.output;
  // base64("/steward/") = L3N0ZXdhcmQv
  RunResult denied =
      RunCommand({"/usr/bin/curl", "-sS", "--cacert", c.CaCert(), "--cert", gw_cert, "--key",
                  gw_key, "-H", absl::StrCat("Authorization: ", token["token"].get<std::string>()),
                  "-X", "POST", absl::StrCat("https://", c.Host(0), ":2379/v3/kv/range"), "-d",
                  R"({"key":"L3N0ZXdhcmQv","range_end":"L3N0ZXdhcmQw"})"},
                 30s);
  EXPECT_TRUE(absl::StrContains(denied.output, "permission denied")) << denied.output;
}

}  // namespace
}  // namespace steward::testing
