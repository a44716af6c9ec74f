// TLS integration tests: mutual TLS on etcd's client and peer URLs and on the agent API, the
// checks of files mode, and renewal of issued certificates while the cluster keeps serving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "etcd/client.h"
#include "etcd/keys.h"
#include "harness.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "pki/node_certs.h"
#include "pki/pki.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kRefusals = 61, kFiles = 62, kRenewal = 63, kExpiration = 250, kRotation = 98 };

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A raw TLS client: handshakes with `host:port` presenting `cert` (none if empty), sends a byte
// and reads, and returns OpenSSL's error for whatever failed ("" if all went through). With TLS
// 1.3 the server rejects a client certificate after the client's side of the handshake is done,
// so the rejection arrives as an alert on the first read.
thread_local std::string alert_read;  // the last alert the server sent us

void OnAlert(const SSL*, int where, int ret) {
  if (where & SSL_CB_READ_ALERT) {
    alert_read = absl::StrCat("tls alert: ", SSL_alert_desc_string_long(ret));
  }
}

std::string TlsError(const std::string& host, int port, const std::string& ca,
                     const std::string& cert, const std::string& key) {
  ::signal(SIGPIPE, SIG_IGN);  // a server that hangs up must not kill the test
  alert_read.clear();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_info_callback(ctx, OnAlert);
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // Offer HTTP/2 like a gRPC client: the agent's gRPC server refuses connections without it.
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn));
  if (!cert.empty()) {
    SSL_CTX_use_certificate_file(ctx, cert.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM);
  }
  std::string err;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    err = "tcp connect failed";
  } else {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    char buf[64];
    if (SSL_connect(ssl) != 1) {
      unsigned long e = ERR_get_error();
      char text[256];
      ERR_error_string_n(e, text, sizeof(text));
      err = !alert_read.empty() ? alert_read : text;
    } else {
      // Accepted servers either speak first (HTTP/2 settings) or wait for us (the read times
      // out); a server that rejected our certificate sends an alert or hangs up.
      errno = 0;
      int n = SSL_read(ssl, buf, sizeof(buf));
      bool timed_out = n <= 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      if (n <= 0 && !timed_out) {
        err = !alert_read.empty() ? alert_read
                                  : "connection closed by the server after the handshake";
      }
    }
    SSL_free(ssl);
  }
  close(fd);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return err;
}

// A TLS failure, not merely "an error": the server's alert rejecting the client certificate.
void ExpectTlsRejection(const std::string& err, const std::string& what) {
  std::string m = Lower(err);
  EXPECT_TRUE(m.find("tls alert") != std::string::npos ||
              m.find("closed by the server after the handshake") != std::string::npos)
      << what << ": not a TLS rejection: \"" << err << "\"";
}

std::shared_ptr<grpc::ChannelCredentials> NoClientCert(const std::string& ca) {
  grpc::SslCredentialsOptions o;
  std::ifstream in(ca);
  o.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return grpc::SslCredentials(o);
}

TEST(TlsTest, ClientsWithoutOrWithForeignCertificatesAreRefusedEverywhere) {
  TestCluster c(kRefusals, 3, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  // Another CA, and a client certificate from it.
  const std::string other = c.Root() + "/other-ca";
  fs::create_directories(other);
  ASSERT_TRUE(CreateCa(other, "another CA").ok());
  CertRequest req;
  req.common_name = "intruder";
  req.client_auth = true;
  req.lifetime = std::chrono::hours(1);
  ASSERT_TRUE(
      IssueCert(other + "/ca.crt", other + "/ca.key", req, other + "/c.crt", other + "/c.key")
          .ok());
  auto foreign = TlsChannelCredentials(c.CaCert(), other + "/c.crt", other + "/c.key");
  ASSERT_TRUE(foreign.ok());
  auto none = NoClientCert(c.CaCert());

  const std::string client_url = c.ClientUrl(0);
  const std::string agent = absl::StrCat(c.Host(0), ":2390");
  const std::pair<std::string, int> endpoints[] = {
      {"etcd client URL", 2379}, {"etcd peer URL", 2380}, {"agent API", 2390}};
  for (const auto& [name, port] : endpoints) {
    ExpectTlsRejection(TlsError(c.Host(0), port, c.CaCert(), "", ""),
                       name + " with no client certificate");
    ExpectTlsRejection(TlsError(c.Host(0), port, c.CaCert(), other + "/c.crt", other + "/c.key"),
                       name + " with a foreign CA's certificate");
    // The same raw client with the cluster's own certificate gets through the TLS layer.
    EXPECT_EQ(TlsError(c.Host(0), port, c.CaCert(), c.AdminCert(), c.AdminKey()), "") << name;
  }
  // Through gRPC too: refused without the right certificate.
  for (auto creds : {none, *foreign}) {
    EtcdClient::Options o;
    o.timeout = 3000ms;
    o.credentials = creds;
    EXPECT_FALSE(EtcdClient({client_url}, o).MemberList().ok());
    EXPECT_FALSE(PeerClient(agent, creds).GetState(3000ms).ok());
  }
  // And the right certificate is accepted on each.
  EXPECT_TRUE(c.Client(client_url).MemberList().ok());
  auto admin = TlsChannelCredentials(c.CaCert(), c.AdminCert(), c.AdminKey());
  ASSERT_TRUE(admin.ok());
  PeerClient good(agent, *admin);
  EXPECT_TRUE(good.GetState(3000ms).ok());
}

// stewardctl pki rotate-ca on a running three-node cluster (issue 36): a writer that trusts both
// CAs writes with the old admin certificate through phases 1 and 2, switches to the new one, and
// writes through phase 3. No write fails; the steward leader's agent is killed at each phase
// boundary and the rotation still finishes; afterwards the old CA's certificates are refused on
// etcd's client and peer URLs and the agent API.
TEST(TlsTest, RotateCaReplacesTheCaWithoutAFailedWriteAndTheOldCaIsRefusedAfter) {
  TestCluster c(kRotation, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  const std::string fresh = c.Root() + "/newpki";
  RunResult init = c.Ctl({"pki", "init", "--dir", fresh}, false);
  ASSERT_EQ(init.exit_code, 0) << init.output;

  // Bad input changes nothing: a key that is not the certificate's.
  const std::string bad = c.Root() + "/badpki";
  fs::create_directories(bad);
  fs::copy_file(fresh + "/ca.crt", bad + "/ca.crt");
  fs::copy_file(c.Root() + "/pki/ca.key", bad + "/ca.key");
  RunResult refused = c.Ctl({"pki", "rotate-ca", "--new-ca-dir", bad, "--yes"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("does not match"), std::string::npos) << refused.output;
  RunResult plan = c.Ctl({"pki", "rotate-ca", "--new-ca-dir", fresh, "--dry-run"});
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("phase 3: trust only the new CA"), std::string::npos) << plan.output;
  for (int i = 0; i < 3; ++i) {
    auto st = PeerClient(absl::StrCat(c.Host(i), ":2390"),
                         *TlsChannelCredentials(c.CaCert(), c.AdminCert(), c.AdminKey()))
                  .GetState(3000ms);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->ca_rotation(), "") << "a refused or dry run changed node " << i;
  }

  // The application's trust: both CAs, as the runbook says, before phase 1.
  const std::string both = c.Root() + "/both.crt";
  std::ofstream(both) << *ReadFile(c.CaCert()) << *ReadFile(fresh + "/ca.crt");
  std::atomic<bool> use_new{false}, stop{false};
  std::atomic<int> written{0}, failed{0};
  std::string last_failure;
  std::mutex failure_mu;
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      const bool fresh_cert = use_new;
      auto creds = TlsChannelCredentials(both, fresh_cert ? fresh + "/admin.crt" : c.AdminCert(),
                                         fresh_cert ? fresh + "/admin.key" : c.AdminKey());
      EtcdClient::Options o;
      o.timeout = 2000ms;
      o.credentials = *creds;
      EtcdClient client(c.ClientUrls(), o);
      // An application's client retries a write a member refused while it restarted.
      absl::Status s;
      for (int attempt = 0; attempt < 5; ++attempt) {
        s = client.Put(absl::StrCat("/app/k", i), "v");
        if (s.ok()) break;
        std::this_thread::sleep_for(200ms);
      }
      if (s.ok()) {
        ++written;
      } else {
        ++failed;
        std::lock_guard<std::mutex> l(failure_mu);
        last_failure = std::string(s.message());
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  struct JoinWriter {
    std::atomic<bool>& stop;
    std::thread& t;
    ~JoinWriter() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join_writer{stop, writer};
  // The test's own client: after phase 2 the members serve certificates of the new CA, which
  // the harness's client (the old CA only) refuses.
  auto trusting_both = [&] {
    EtcdClient::Options o;
    o.timeout = 2000ms;
    o.credentials = *TlsChannelCredentials(both, c.AdminCert(), c.AdminKey());
    return EtcdClient(c.ClientUrls(), o);
  };
  auto healthy = [&] {
    return WaitFor(
        [&] {
          EtcdClient client = trusting_both();
          ClusterView v = CollectStatus(client, 2000ms);
          return v.healthy && v.members.size() == 3;
        },
        60s);
  };
  auto kill_steward_leader = [&] {
    auto leader = trusting_both().Get(LeaderKey(absl::StrCat("it", kRotation)));
    for (int i = 0; i < 3; ++i) {
      if (leader.ok() && leader->has_value() && (*leader)->find(absl::StrCat("n", i + 1)) == 0) {
        c.SignalAgent(i, SIGKILL);
        WaitFor([&] { return !c.AgentRunning(i); }, 10s);
        c.StartAgent(i);
        // Its agent answers again (a rotation needs every node's).
        return WaitFor(
            [&] {
              auto creds = TlsChannelCredentials(both, c.AdminCert(), c.AdminKey());
              return creds.ok() &&
                     PeerClient(absl::StrCat(c.Host(i), ":2390"), *creds).GetState(2000ms).ok();
            },
            30s);
      }
    }
    return false;
  };
  for (const char* through : {"1", "2"}) {
    std::vector<std::optional<pid_t>> etcd_before;
    for (int i = 0; i < 3; ++i) etcd_before.push_back(c.EtcdPid(i));
    RunResult r =
        c.Ctl({"pki", "rotate-ca", "--new-ca-dir", fresh, "--yes", "--through-phase", through},
              true, 600s);
    ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
    // Phase 2 restarts no etcd: the members read their new certificates at the next handshake.
    for (int i = 0; i < 3; ++i) {
      if (std::string(through) == "2") {
        EXPECT_EQ(c.EtcdPid(i), etcd_before[static_cast<size_t>(i)]) << "n" << i + 1;
      } else {
        EXPECT_NE(c.EtcdPid(i), etcd_before[static_cast<size_t>(i)]) << "n" << i + 1;
      }
    }
    // status and history say where it stands.
    RunResult st = c.Ctl({"status"});
    EXPECT_NE(
        st.output.find(absl::StrCat("n3: ", r.output.substr(r.output.find("CA rotation ") + 12, 16),
                                    " phase ", through)),
        std::string::npos)
        << st.output;
    RunResult history = c.Ctl({"history"});
    EXPECT_NE(history.output.find(absl::StrCat("phase ", through, " of CA rotation")),
              std::string::npos)
        << history.output;
    ASSERT_TRUE(kill_steward_leader())
        << "no steward leader found to kill, or it did not come back";
    ASSERT_TRUE(healthy()) << c.Logs();
  }
  use_new = true;  // the application switches to a certificate from the new CA
  std::this_thread::sleep_for(1s);
  RunResult done = c.Ctl({"pki", "rotate-ca", "--new-ca-dir", fresh, "--yes"}, true, 600s);
  ASSERT_EQ(done.exit_code, 0) << done.output << c.Logs();
  EXPECT_NE(done.output.find("done: every node trusts only the new CA"), std::string::npos)
      << done.output;
  std::this_thread::sleep_for(2s);
  stop = true;
  writer.join();
  EXPECT_EQ(failed.load(), 0) << "last failure: " << last_failure;
  EXPECT_GT(written.load(), 20);

  // The old CA's certificates are refused everywhere; the new CA's are accepted.
  for (int i = 0; i < 3; ++i) {
    for (const auto& [name, port] : std::vector<std::pair<std::string, int>>{
             {"etcd client URL", 2379}, {"etcd peer URL", 2380}, {"agent API", 2390}}) {
      ExpectTlsRejection(TlsError(c.Host(i), port, both, c.AdminCert(), c.AdminKey()),
                         absl::StrCat(name, " of n", i + 1, " with the old CA's certificate"));
      EXPECT_EQ(TlsError(c.Host(i), port, both, fresh + "/admin.crt", fresh + "/admin.key"), "")
          << name << " of n" << i + 1;
    }
  }
}

// A single-node config in files mode; `override` replaces one of the files.
std::string FilesConfig(const std::string& root, const std::string& host, const std::string& key,
                        const std::string& value) {
  std::map<std::string, std::string> f = {
      {"cert_file", root + "/pki/server.crt"},      {"key_file", root + "/pki/server.key"},
      {"peer_cert_file", root + "/pki/server.crt"}, {"peer_key_file", root + "/pki/server.key"},
      {"trusted_ca_file", root + "/pki/ca.crt"},    {"client_cert_file", root + "/pki/client.crt"},
      {"client_key_file", root + "/pki/client.key"}};
  if (!key.empty()) f[key] = value;
  std::string yaml =
      absl::StrCat("cluster:\n  name: files\n  size: 1\n  nodes:\n    - {name: n1, host: ", host,
                   "}\nnode:\n  name: n1\n  data_dir: ", root,
                   "/n1\netcd:\n  binary: /usr/bin/etcd\ntls:\n  mode: files\n");
  for (const auto& [k, v] : f) yaml += absl::StrCat("  ", k, ": ", v, "\n");
  return yaml;
}

TEST(TlsTest, FilesModeRefusesEachKindOfBadFileBeforeStartingEtcd) {
  TestCluster c(kFiles, 1, 1);  // only for its temp dir and CA
  const std::string root = c.Root(), host = c.Host(0);
  const std::string ca = root + "/pki/ca.crt", ca_key = root + "/pki/ca.key";
  auto issue = [&](const std::string& name, const std::string& ip, bool server,
                   std::optional<std::chrono::system_clock::time_point> at,
                   std::chrono::seconds life, bool agent_role = true) {
    CertRequest r;
    r.common_name = name;
    if (agent_role) r.uris = {AgentRoleUri("files", "n1")};
    r.ip_addresses = {ip};
    r.server_auth = server;
    r.client_auth = true;
    r.lifetime = life;
    r.issue_time = at;
    absl::Status s =
        IssueCert(ca, ca_key, r, root + "/pki/" + name + ".crt", root + "/pki/" + name + ".key");
    ASSERT_TRUE(s.ok()) << s;
  };
  issue("server", host, true, std::nullopt, std::chrono::hours(24));
  issue("client", host, false, std::nullopt, std::chrono::hours(24));
  issue("norole", host, false, std::nullopt, std::chrono::hours(24), false);
  issue("otherhost", "127.0.0.99", true, std::nullopt, std::chrono::hours(24));
  issue("expired", host, true, std::chrono::system_clock::now() - std::chrono::hours(48),
        std::chrono::hours(24));
  struct Bad {
    std::string key, value, want;
  };
  const std::vector<Bad> bad = {
      {"cert_file", root + "/pki/missing.crt", "does not exist"},
      {"key_file", root + "/pki/client.key", "does not match"},
      {"cert_file", root + "/pki/expired.crt", "expired"},
      {"cert_file", root + "/pki/otherhost.crt", "does not cover host"},
      // Other agents would refuse every order of an agent whose certificate lacks the role.
      {"client_cert_file", root + "/pki/norole.crt",
       "lacks the subjectAltName URI steward://files/agent/n1"},
      {"client_key_file", root + "/pki/server.key", "client key does not match"},
  };
  for (const Bad& b : bad) {
    std::string yaml = FilesConfig(root, host, b.key, b.value);
    // The expired certificate with its own key, so only the date is wrong.
    if (b.want == "expired") {
      yaml = absl::StrReplaceAll(yaml, {{"key_file: " + root + "/pki/server.key",
                                         "key_file: " + root + "/pki/expired.key"}});
    }
    if (b.want.find("lacks") != std::string::npos) {
      yaml = absl::StrReplaceAll(yaml, {{"client_key_file: " + root + "/pki/client.key",
                                         "client_key_file: " + root + "/pki/norole.key"}});
    }
    if (b.want == "does not cover host") {
      yaml = absl::StrReplaceAll(yaml, {{"key_file: " + root + "/pki/server.key",
                                         "key_file: " + root + "/pki/otherhost.key"}});
    }
    std::ofstream(root + "/node.yaml") << yaml;
    RunResult r = RunCommand({STEWARD_BIN, "--config", root + "/node.yaml"}, 30s);
    EXPECT_EQ(r.exit_code, 2) << b.want << "\n" << r.output;
    EXPECT_NE(r.output.find(b.want), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("tls"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(root + "/n1/etcd.log")) << "etcd was started despite: " << b.want;
  }
}

TEST(TlsTest, IssuedCertificatesAreRenewedWhileTheClusterKeepsServing) {
  TestCluster c(kRenewal, 3, 3, "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n");
  // Short lifetimes: renewal is due after two-thirds of a minute.
  for (int i = 0; i < 3; ++i) {
    std::ofstream(c.ConfigPath(i), std::ios::app) << "  cert_lifetime: 1m\n";
  }
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  auto first = ReadCert(c.DataDir(0) + "/tls/server.crt");
  ASSERT_TRUE(first.ok());
  EtcdClient w = c.Client(c.ClientUrls());
  int failures = 0;
  const auto until = std::chrono::steady_clock::now() + 60s;
  int i = 0;
  while (std::chrono::steady_clock::now() < until) {
    // Every write must be acknowledged within a few retries (elections may bounce one).
    bool ok = WaitFor([&] { return w.Put(absl::StrCat("/renew/k", i), "v").ok(); }, 5s);
    if (!ok) ++failures;
    ++i;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(failures, 0) << "writes failed while certificates were renewed\n" << c.Logs();
  auto renewed = ReadCert(c.DataDir(0) + "/tls/server.crt");
  ASSERT_TRUE(renewed.ok());
  EXPECT_GT(renewed->not_after, first->not_after) << "the server certificate was not renewed\n"
                                                  << c.Logs();
  EXPECT_TRUE(c.WaitHealthy(3, 30s)) << c.Logs();
  EXPECT_NE(c.Logs().find("renewed this node's certificates"), std::string::npos) << c.Logs();
  for (int n = 0; n < 3; ++n) EXPECT_TRUE(c.AgentRunning(n)) << c.Logs();
}

// Issue 36, part 2: `pki check-expiration` lists every node's certificates as its agent reports
// them, and the client certificates of the `pki init` directory, with who renews each; it exits
// 1 under the threshold and says which agent did not answer. `pki renew` reissues one node's
// certificates, or every node's, while the cluster keeps serving.
TEST(TlsTest, CheckExpirationListsEveryCertificateAndRenewRenewsThemNow) {
  TestCluster c(kExpiration, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  // (The test's admin certificate lives a day.)
  RunResult ok = c.Ctl({"pki", "check-expiration", "--dir", c.Root() + "/pki", "--warn", "12h"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  for (const char* want : {"n1", "n2", "n3", "server", "peer", "agent", "client", "admin.crt",
                           "the agent, at two-thirds", "--client admin --renew"}) {
    EXPECT_NE(ok.output.find(want), std::string::npos) << want << "\n" << ok.output;
  }
  RunResult json = c.Ctl({"pki", "check-expiration", "-o", "json", "--warn", "100000d"});
  EXPECT_EQ(json.exit_code, 1) << "every certificate is under a threshold of 100000 days\n"
                               << json.output;
  const size_t brace = json.output.find('{');
  ASSERT_NE(brace, std::string::npos) << json.output;
  // (stderr's summary line follows the document in the output.)
  auto j = nlohmann::json::parse(json.output.substr(brace, json.output.rfind('}') - brace + 1),
                                 nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.output;
  // 3 nodes x (server, peer, agent, client, ca).
  EXPECT_EQ(j["certificates"].size(), 15u) << json.output;
  for (const auto& cert : j["certificates"]) EXPECT_TRUE(cert["under_threshold"].get<bool>());

  // pki check --bundle: the cluster's own CA accepts every certificate n1 uses; a new CA alone
  // would refuse them all, and drop the CA trusted now; both together accept them.
  RunResult same = c.Ctl({"pki", "check", "--bundle", c.CaCert()});
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("accepts every certificate this node uses now"), std::string::npos)
      << same.output;
  RunResult init = c.Ctl({"pki", "init", "--dir", c.Root() + "/newpki"}, false);
  ASSERT_EQ(init.exit_code, 0) << init.output;
  RunResult other = c.Ctl({"pki", "check", "--bundle", c.Root() + "/newpki/ca.crt"});
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("4 certificate(s) this node uses now would be refused"),
            std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("NOT in the bundle"), std::string::npos) << other.output;
  {
    std::ofstream both(c.Root() + "/both.pem");
    both << *ReadFile(c.CaCert()) << *ReadFile(c.Root() + "/newpki/ca.crt");
  }
  RunResult planned = c.Ctl({"pki", "check", "--bundle", c.Root() + "/both.pem"});
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_EQ(planned.output.find("NOT in the bundle"), std::string::npos) << planned.output;

  // pki renew is the operator's or an agent's: an application's certificate from the same CA
  // is refused.
  RunResult app = c.Ctl({"pki", "issue", "--dir", c.Root() + "/pki", "--client", "app"}, false);
  ASSERT_EQ(app.exit_code, 0) << app.output;
  RunResult by_app = c.Ctl({"pki", "renew", "--node", "n1", "--cacert", c.CaCert(), "--cert",
                            c.Root() + "/pki/app.crt", "--key", c.Root() + "/pki/app.key"});
  EXPECT_NE(by_app.exit_code, 0) << by_app.output;
  EXPECT_NE(by_app.output.find("neither the operator"), std::string::npos) << by_app.output;

  // pki renew: one node's certificates now, then every node's, while the cluster serves.
  auto n1_before = ReadCert(c.DataDir(0) + "/tls/server.crt");
  auto n2_before = ReadCert(c.DataDir(1) + "/tls/server.crt");
  ASSERT_TRUE(n1_before.ok() && n2_before.ok());
  std::this_thread::sleep_for(1100ms);  // certificates are dated to the second
  RunResult one = c.Ctl({"pki", "renew", "--node", "n2"}, true, 120s);
  EXPECT_EQ(one.exit_code, 0) << one.output << c.Logs();
  EXPECT_NE(one.output.find("node n2: certificates renewed"), std::string::npos) << one.output;
  auto n1_after = ReadCert(c.DataDir(0) + "/tls/server.crt");
  auto n2_after = ReadCert(c.DataDir(1) + "/tls/server.crt");
  ASSERT_TRUE(n1_after.ok() && n2_after.ok());
  EXPECT_GT(n2_after->not_after, n2_before->not_after) << "n2 renewed";
  EXPECT_EQ(n1_after->not_after, n1_before->not_after) << "n1 left alone";
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  RunResult all = c.Ctl({"pki", "renew", "--all"}, true, 240s);
  EXPECT_EQ(all.exit_code, 0) << all.output << c.Logs();
  for (const char* node : {"node n1: certificates renewed", "node n2: certificates renewed",
                           "node n3: certificates renewed"}) {
    EXPECT_NE(all.output.find(node), std::string::npos) << all.output;
  }
  EXPECT_GT(ReadCert(c.DataDir(0) + "/tls/server.crt")->not_after, n1_before->not_after);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/it/after-renewal", "v");
  RunResult refused = c.Ctl({"pki", "renew"});
  EXPECT_EQ(refused.exit_code, 2) << "neither --node nor --all\n" << refused.output;

  c.SignalAgent(2, SIGTERM);
  RunResult silent = c.Ctl({"pki", "check-expiration"});
  EXPECT_NE(silent.output.find("node n3: its agent does not answer"), std::string::npos)
      << silent.output;
}

}  // namespace
}  // namespace steward::testing
