// The PKI library (CA, issuing, file checks, renewal) and `stewardctl pki init`, against real
// OpenSSL. TLS is exercised by an in-memory handshake (a BIO pair): no ports, no processes.
#include "pki/pki.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/files.h"
#include "common/status.h"
#include "ctl/pki_cmd.h"
#include "pki/node_certs.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using std::chrono::days;
using std::chrono::hours;
using std::chrono::seconds;
using std::chrono::system_clock;
using ::testing::HasSubstr;

using SslCtxPtr = std::unique_ptr<SSL_CTX, OpenSslDeleter<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpenSslDeleter<SSL_free>>;

unsigned ModeOf(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return 0xFFFF;
  return st.st_mode & 07777;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "steward-pki-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "ca");
    ASSERT_TRUE(CreateCa((dir_ / "ca").string(), "Test CA").ok());
    ca_cert_ = (dir_ / "ca" / "ca.crt").string();
    ca_key_ = (dir_ / "ca" / "ca.key").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  static CertRequest ServerRequest() {
    CertRequest req;
    req.common_name = "n1";
    req.dns_names = {"localhost", "n1.example"};
    req.ip_addresses = {"127.0.0.11", "::1", "fd00::11"};
    req.server_auth = true;
    req.client_auth = true;
    req.lifetime = days(90);
    return req;
  }

  // A one-node cluster whose agent issues its certificates from the test CA.
  Config IssuedNodeConfig() const {
    Config c;
    c.cluster.name = "k8s";
    c.cluster.size = 1;
    c.cluster.nodes = {{"n1", "127.0.0.11"}};
    c.node.name = "n1";
    c.node.data_dir = (dir_ / "node").string();
    c.tls.mode = "issued";
    c.tls.ca_cert = ca_cert_;
    c.tls.ca_key = ca_key_;
    return c;
  }

  // Issues `req` from the test CA into dir/<name>.crt and dir/<name>.key.
  void Issue(const CertRequest& req, const std::string& name) {
    absl::Status s = IssueCert(ca_cert_, ca_key_, req, P(name + ".crt"), P(name + ".key"));
    ASSERT_TRUE(s.ok()) << s;
  }

  absl::Status Check(const std::string& name, const std::string& host) {
    return CheckCertFiles(P(name + ".crt"), P(name + ".key"), ca_cert_, host, system_clock::now());
  }

  fs::path dir_;
  std::string ca_cert_, ca_key_;
};

TEST_F(PkiTest, CreateCaWritesCaCertAndPrivateKeyAndRefusesToOverwrite) {
  const fs::path ca_dir = dir_ / "fresh";
  fs::create_directories(ca_dir);
  // Even with a permissive umask, the key must come out 0600 and the certificate 0644.
  const mode_t old_umask = ::umask(0);
  absl::Status s = CreateCa(ca_dir.string(), "Fresh CA");
  ::umask(old_umask);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ModeOf(ca_dir / "ca.crt"), 0644u);
  EXPECT_EQ(ModeOf(ca_dir / "ca.key"), 0600u);
  EXPECT_EQ(Entries(ca_dir), (std::vector<std::string>{"ca.crt", "ca.key"}))
      << "no temp files may be left behind";

  auto cert = LoadCert((ca_dir / "ca.crt").string());
  ASSERT_TRUE(cert.ok()) << cert.status();
  auto key = LoadPrivateKey((ca_dir / "ca.key").string());
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(X509_check_private_key(cert->get(), key->get()), 1);
  EXPECT_EQ(EVP_PKEY_get_bits(key->get()), 256);
  EXPECT_TRUE(EVP_PKEY_is_a(key->get(), "EC"));
  EXPECT_EQ(X509_check_ca(cert->get()), 1);
  int crit = -1;
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert->get(), NID_basic_constraints, &crit, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  EXPECT_EQ(crit, 1) << "basicConstraints must be critical";
  BASIC_CONSTRAINTS_free(bc);
  EXPECT_EQ(X509_get_key_usage(cert->get()), static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_NE(X509_get0_subject_key_id(cert->get()), nullptr);
  EXPECT_EQ(X509_check_issued(cert->get(), cert->get()), X509_V_OK) << "self-signed";

  auto info = ReadCert((ca_dir / "ca.crt").string());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->subject, "CN=Fresh CA");
  const auto lifetime = info->not_after - info->not_before;
  EXPECT_GT(lifetime, days(3650));
  EXPECT_LT(lifetime, days(3654));

  const std::string before = Slurp(ca_dir / "ca.key");
  s = CreateCa(ca_dir.string(), "Other CA");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_THAT(Msg(s), HasSubstr((ca_dir / "ca.crt").string() + " already exists"));
  EXPECT_EQ(Slurp(ca_dir / "ca.key"), before) << "the CA key must not be touched";

  // A lone key is an existing CA too.
  fs::remove(ca_dir / "ca.crt");
  s = CreateCa(ca_dir.string(), "Other CA");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_THAT(Msg(s), HasSubstr((ca_dir / "ca.key").string() + " already exists"));
  EXPECT_EQ(Entries(ca_dir), (std::vector<std::string>{"ca.key"}));
}

TEST_F(PkiTest, IssueCertWritesTheRequestedCertificate) {
  CertRequest req = ServerRequest();
  const auto t = system_clock::time_point(seconds(1750000000));
  req.issue_time = t;
  Issue(req, "n1");
  EXPECT_EQ(ModeOf(P("n1.crt")), 0644u);
  EXPECT_EQ(ModeOf(P("n1.key")), 0600u);

  auto info = ReadCert(P("n1.crt"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->subject, "CN=n1");
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"localhost", "n1.example"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"127.0.0.11", "::1", "fd00::11"}));
  EXPECT_EQ(info->not_before, t - std::chrono::minutes(5));
  EXPECT_EQ(info->not_after, t + days(90));

  auto cert = LoadCert(P("n1.crt"));
  auto ca = LoadCert(ca_cert_);
  ASSERT_TRUE(cert.ok() && ca.ok());
  EXPECT_EQ(X509_check_issued(ca->get(), cert->get()), X509_V_OK);
  EXPECT_EQ(X509_check_ca(cert->get()), 0);
  EXPECT_EQ(X509_get_extended_key_usage(cert->get()),
            static_cast<uint32_t>(XKU_SSL_SERVER | XKU_SSL_CLIENT));
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(cert->get()),
                                  X509_get0_subject_key_id(ca->get())),
            0)
      << "authorityKeyIdentifier must name the CA's key";
  BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert->get()), nullptr));
  EXPECT_GT(BN_num_bits(serial.get()), 100) << "a random 128-bit serial";

  // Client-only, and issuing again over existing files (renewal) replaces them.
  CertRequest client;
  client.common_name = "steward-admin";
  client.client_auth = true;
  client.lifetime = days(365);
  Issue(client, "n1");
  auto renewed = LoadCert(P("n1.crt"));
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(X509_get_extended_key_usage(renewed->get()), static_cast<uint32_t>(XKU_SSL_CLIENT));
  EXPECT_NE(
      ASN1_INTEGER_cmp(X509_get0_serialNumber(renewed->get()), X509_get0_serialNumber(cert->get())),
      0);
  EXPECT_EQ(ModeOf(P("n1.key")), 0600u);
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"ca", "n1.crt", "n1.key"}))
      << "no temp files may be left behind";
}

TEST_F(PkiTest, IssueCertNeverOutlivesTheCa) {
  CertRequest req = ServerRequest();
  req.lifetime = days(365 * 20);
  Issue(req, "long");
  auto leaf = ReadCert(P("long.crt"));
  auto ca = ReadCert(ca_cert_);
  ASSERT_TRUE(leaf.ok() && ca.ok());
  EXPECT_EQ(leaf->not_after, ca->not_after);
}

TEST_F(PkiTest, IssueCertRefusesACaKeyReadableByOthers) {
  fs::permissions(ca_key_, fs::perms(0640));
  absl::Status s = IssueCert(ca_cert_, ca_key_, ServerRequest(), P("n1.crt"), P("n1.key"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(Msg(s), HasSubstr(ca_key_));
  EXPECT_THAT(Msg(s), HasSubstr("mode 0640"));
  EXPECT_FALSE(fs::exists(P("n1.crt")));
  EXPECT_FALSE(fs::exists(P("n1.key")));
}

TEST_F(PkiTest, IssueCertRejectsBadRequests) {
  auto expect_invalid = [&](CertRequest req, const std::string& want) {
    absl::Status s = IssueCert(ca_cert_, ca_key_, req, P("x.crt"), P("x.key"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(Msg(s), HasSubstr(want));
    EXPECT_FALSE(fs::exists(P("x.key")));
  };
  CertRequest r = ServerRequest();
  r.ip_addresses = {"127.0.0.300"};
  expect_invalid(r, "\"127.0.0.300\" is not an IPv4 or IPv6 address");
  r = ServerRequest();
  r.dns_names = {"a b"};
  expect_invalid(r, "\"a b\" is not a DNS name");
  r = ServerRequest();
  r.common_name = "";
  expect_invalid(r, "common_name is empty");
  r = ServerRequest();
  r.lifetime = seconds(0);
  expect_invalid(r, "lifetime must be positive");
  r = ServerRequest();
  r.dns_names.clear();
  r.ip_addresses.clear();
  expect_invalid(r, "needs dns_names or ip_addresses");

  absl::Status s = IssueCert(ca_cert_, ca_key_, ServerRequest(), P("x.crt"), ca_key_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("is a CA file"));
}

TEST_F(PkiTest, CheckCertFilesAcceptsTheIssuedServerCertForItsNames) {
  Issue(ServerRequest(), "n1");
  for (const char* host : {"127.0.0.11", "::1", "fd00:0::11", "localhost", "n1.example"}) {
    absl::Status s = Check("n1", host);
    EXPECT_TRUE(s.ok()) << host << ": " << s;
  }
}

TEST_F(PkiTest, CheckCertFilesRejectsAnotherHost) {
  Issue(ServerRequest(), "n1");
  absl::Status s = Check("n1", "127.0.0.12");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("certificate " + P("n1.crt") + " does not cover host 127.0.0.12"));
  EXPECT_THAT(Msg(s), HasSubstr("IP:127.0.0.11"));
  // The CN is not a name TLS clients accept.
  s = Check("n1", "n1");
  EXPECT_THAT(Msg(s), HasSubstr("does not cover host n1 "));
}

TEST_F(PkiTest, CheckCertFilesRejectsAMismatchedKey) {
  Issue(ServerRequest(), "n1");
  Issue(ServerRequest(), "n2");
  absl::Status s =
      CheckCertFiles(P("n1.crt"), P("n2.key"), ca_cert_, "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("key file " + P("n2.key") + " does not match certificate " + P("n1.crt")));
}

TEST_F(PkiTest, CheckCertFilesRejectsExpiredAndNotYetValidCerts) {
  CertRequest req = ServerRequest();
  req.issue_time = system_clock::time_point(seconds(1700000000));  // 2023-11-14T22:13:20Z
  req.lifetime = days(365);
  Issue(req, "old");
  absl::Status s = Check("old", "127.0.0.11");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("certificate " + P("old.crt") + " expired at 2024-11-13T22:13:20Z"));

  req.issue_time = system_clock::now() + days(2);
  Issue(req, "future");
  s = Check("future", "127.0.0.11");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Msg(s), HasSubstr("certificate " + P("future.crt") + " is not valid until "));
  // ...but it is fine as of a time inside its window: `now` is honoured, also by the chain check.
  s = CheckCertFiles(P("future.crt"), P("future.key"), ca_cert_, "127.0.0.11",
                     system_clock::now() + days(3));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(PkiTest, CheckCertFilesRejectsAKeyReadableByOthers) {
  Issue(ServerRequest(), "n1");
  fs::permissions(P("n1.key"), fs::perms(0644));
  absl::Status s = Check("n1", "127.0.0.11");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(Msg(s), HasSubstr("key file " + P("n1.key") + " has mode 0644"));
}

TEST_F(PkiTest, CheckCertFilesNamesAMissingFile) {
  Issue(ServerRequest(), "n1");
  absl::Status s =
      CheckCertFiles(P("n1.crt"), P("nope.key"), ca_cert_, "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr("key file " + P("nope.key") + " does not exist"));

  s = CheckCertFiles(P("nope.crt"), P("n1.key"), ca_cert_, "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr("certificate " + P("nope.crt") + " does not exist"));

  s = CheckCertFiles(P("n1.crt"), P("n1.key"), P("nope-ca.crt"), "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr("CA file " + P("nope-ca.crt") + " does not exist"));
}

TEST_F(PkiTest, CheckCertFilesRejectsFilesThatAreNotPem) {
  Issue(ServerRequest(), "n1");
  std::ofstream(P("junk")) << "not a certificate\n";
  fs::permissions(P("junk"), fs::perms(0600));
  absl::Status s =
      CheckCertFiles(P("junk"), P("n1.key"), ca_cert_, "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("certificate " + P("junk") + " does not contain a PEM certificate"));

  // A certificate is not a private key.
  fs::copy_file(P("n1.crt"), P("crt-as.key"));
  fs::permissions(P("crt-as.key"), fs::perms(0600));
  s = CheckCertFiles(P("n1.crt"), P("crt-as.key"), ca_cert_, "127.0.0.11", system_clock::now());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("key file " + P("crt-as.key") + " does not contain a PEM private key"));
}

TEST_F(PkiTest, CheckCertFilesRejectsACertFromAnotherCa) {
  fs::create_directories(dir_ / "other");
  ASSERT_TRUE(CreateCa((dir_ / "other").string(), "Other CA").ok());
  absl::Status s =
      IssueCert((dir_ / "other" / "ca.crt").string(), (dir_ / "other" / "ca.key").string(),
                ServerRequest(), P("n1.crt"), P("n1.key"));
  ASSERT_TRUE(s.ok()) << s;
  s = Check("n1", "127.0.0.11");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("certificate " + P("n1.crt") + " is not signed by the CA in " + ca_cert_));
}

// Issue 36: `pki check --bundle`, before a trust file is replaced. A bundle of the old and the
// new CA accepts a certificate of either; the new CA alone refuses the old one's, saying so;
// a bundle holding a certificate that is not a CA is refused as a bundle.
TEST_F(PkiTest, APlannedBundleAcceptsWhatChainsToItsCasAndRefusesTheRest) {
  fs::create_directories(dir_ / "new");
  ASSERT_TRUE(CreateCa((dir_ / "new").string(), "New CA").ok());
  const std::string new_ca = (dir_ / "new" / "ca.crt").string();
  Issue(ServerRequest(), "old-issued");
  ASSERT_TRUE(IssueCert(new_ca, (dir_ / "new" / "ca.key").string(), ServerRequest(),
                        P("new-issued.crt"), P("new-issued.key"))
                  .ok());
  std::ofstream(P("both.pem")) << *ReadFile(ca_cert_) << *ReadFile(new_ca);
  const auto now = system_clock::now();
  auto cas = CheckCaBundle(P("both.pem"), now);
  ASSERT_TRUE(cas.ok()) << cas.status();
  ASSERT_EQ(cas->size(), 2u);
  EXPECT_THAT((*cas)[0], HasSubstr("CN=Test CA, until "));
  auto old_in_both = ChainsTo(P("old-issued.crt"), P("both.pem"), now);
  ASSERT_TRUE(old_in_both.ok()) << old_in_both.status();
  EXPECT_EQ(*old_in_both, "CN=Test CA");
  auto new_in_both = ChainsTo(P("new-issued.crt"), P("both.pem"), now);
  ASSERT_TRUE(new_in_both.ok()) << new_in_both.status();
  EXPECT_EQ(*new_in_both, "CN=New CA");
  auto old_in_new = ChainsTo(P("old-issued.crt"), new_ca, now);
  EXPECT_EQ(old_in_new.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(old_in_new.status()), HasSubstr("not signed by a CA in the bundle"));
  EXPECT_THAT(Msg(old_in_new.status()), HasSubstr("issuer CN=Test CA"));
  // A leaf in the bundle, an unreadable bundle.
  std::ofstream(P("leaf.pem")) << *ReadFile(new_ca) << *ReadFile(P("new-issued.crt"));
  auto leaf = CheckCaBundle(P("leaf.pem"), now);
  EXPECT_EQ(leaf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(leaf.status()), HasSubstr("certificate 2 of " + P("leaf.pem")));
  EXPECT_THAT(Msg(leaf.status()), HasSubstr("is not a CA"));
  EXPECT_FALSE(CheckCaBundle(P("missing.pem"), now).ok());
}

TEST_F(PkiTest, CheckCertFilesRejectsAClientOnlyCertForAServer) {
  CertRequest req = ServerRequest();
  req.server_auth = false;
  Issue(req, "client");
  absl::Status s = Check("client", "127.0.0.11");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("certificate " + P("client.crt") +
                                " is not a TLS server certificate (its extendedKeyUsage "
                                "lacks serverAuth)"));
}

TEST_F(PkiTest, ReadCertNamesAMissingOrBrokenFile) {
  auto info = ReadCert(P("nope.crt"));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(info.status()), HasSubstr(P("nope.crt") + " does not exist"));
  info = ReadCert(ca_key_);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(info.status()), HasSubstr("does not contain a PEM certificate"));
}

TEST(PkiRenewalTest, NeedsRenewalAfterTwoThirdsOfTheLifetime) {
  const auto t0 = system_clock::time_point(seconds(1750000000));
  CertInfo c;
  c.not_before = t0;
  c.not_after = t0 + hours(3);
  EXPECT_FALSE(NeedsRenewal(c, t0 - hours(1)));
  EXPECT_FALSE(NeedsRenewal(c, t0));
  EXPECT_FALSE(NeedsRenewal(c, t0 + hours(2) - std::chrono::nanoseconds(1)));
  EXPECT_TRUE(NeedsRenewal(c, t0 + hours(2)));
  EXPECT_TRUE(NeedsRenewal(c, t0 + hours(3)));
  EXPECT_TRUE(NeedsRenewal(c, t0 + days(365)));
  EXPECT_EQ(RenewalTime(c), t0 + hours(2));
  c.not_after = t0 + seconds(10);  // 2/3 of 10 s: due at 7 s, the first whole second
  EXPECT_EQ(RenewalTime(c), t0 + seconds(7));
  EXPECT_FALSE(NeedsRenewal(c, t0 + seconds(7) - std::chrono::nanoseconds(1)));
  EXPECT_TRUE(NeedsRenewal(c, t0 + seconds(7)));

  // An empty or inverted window can only be replaced.
  c.not_after = t0;
  EXPECT_TRUE(NeedsRenewal(c, t0 - hours(1)));
  EXPECT_EQ(RenewalTime(c), system_clock::time_point::min());

  // Dates beyond the clock's range do not overflow.
  c.not_after = system_clock::time_point::max();
  EXPECT_FALSE(NeedsRenewal(c, t0 + days(365)));
  c.not_before = system_clock::time_point::min();
  EXPECT_FALSE(NeedsRenewal(c, t0));
  EXPECT_FALSE(NeedsRenewal(c, RenewalTime(c) - seconds(1)));
  EXPECT_TRUE(NeedsRenewal(c, RenewalTime(c)));
}

// Real TLS, in memory: a client and a server SSL joined by a BIO pair.
class PkiTlsTest : public PkiTest {
 protected:
  static SslCtxPtr Context(bool server, const std::string& cert, const std::string& key,
                           const std::string& ca) {
    SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
    EXPECT_NE(ctx, nullptr);
    EXPECT_EQ(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION), 1);
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM), 1);
    EXPECT_EQ(SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr), 1);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       nullptr);
    return ctx;
  }

  struct Outcome {
    bool ok = false;
    long client_verify = X509_V_OK;  // the client's verdict on the server certificate
    long server_verify = X509_V_OK;  // the server's verdict on the client certificate
    std::string received;            // what the server read after the handshake
  };

  // Mutual TLS: the server presents server.crt; the client presents client.crt and expects the
  // server to be `ip`.
  Outcome Handshake(const std::string& server, const std::string& client, const std::string& ip) {
    SslCtxPtr sctx = Context(true, P(server + ".crt"), P(server + ".key"), ca_cert_);
    SslCtxPtr cctx = Context(false, P(client + ".crt"), P(client + ".key"), ca_cert_);
    SslPtr s(SSL_new(sctx.get()));
    SslPtr c(SSL_new(cctx.get()));
    BIO* sbio = nullptr;
    BIO* cbio = nullptr;
    EXPECT_EQ(BIO_new_bio_pair(&sbio, 0, &cbio, 0), 1);
    SSL_set_bio(s.get(), sbio, sbio);  // each SSL now owns its end
    SSL_set_bio(c.get(), cbio, cbio);
    SSL_set_accept_state(s.get());
    SSL_set_connect_state(c.get());
    EXPECT_EQ(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.get()), ip.c_str()), 1);

    Outcome out;
    bool c_done = false, s_done = false, failed = false;
    for (int i = 0; i < 50 && !(c_done && s_done) && !failed; ++i) {
      for (auto [ssl, done] : {std::pair{c.get(), &c_done}, {s.get(), &s_done}}) {
        if (*done) continue;
        int rc = SSL_do_handshake(ssl);
        if (rc == 1) {
          *done = true;
        } else {
          int e = SSL_get_error(ssl, rc);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) failed = true;
        }
      }
    }
    out.client_verify = SSL_get_verify_result(c.get());
    out.server_verify = SSL_get_verify_result(s.get());
    ERR_clear_error();
    if (failed || !c_done || !s_done) return out;
    // Application data flows, and the server's reads are what finish TLS 1.3's client auth.
    EXPECT_EQ(SSL_write(c.get(), "ping", 4), 4);
    char buf[16];
    int n = SSL_read(s.get(), buf, sizeof(buf));
    if (n > 0) out.received.assign(buf, static_cast<size_t>(n));
    out.server_verify = SSL_get_verify_result(s.get());
    out.ok =
        out.received == "ping" && out.client_verify == X509_V_OK && out.server_verify == X509_V_OK;
    return out;
  }
};

TEST_F(PkiTlsTest, IssuedServerCertVerifiesAgainstTheCaForTlsServers) {
  Issue(ServerRequest(), "n1");
  auto leaf = LoadCert(P("n1.crt"));
  auto ca = LoadCert(ca_cert_);
  ASSERT_TRUE(leaf.ok() && ca.ok());
  X509StorePtr store(X509_STORE_new());
  ASSERT_EQ(X509_STORE_add_cert(store.get(), ca->get()), 1);
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  ASSERT_EQ(X509_STORE_CTX_init(ctx.get(), store.get(), leaf->get(), nullptr), 1);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set1_ip_asc(X509_STORE_CTX_get0_param(ctx.get()), "127.0.0.11");
  EXPECT_EQ(X509_verify_cert(ctx.get()), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

TEST_F(PkiTlsTest, MutualTlsHandshakeWithIssuedCerts) {
  Issue(ServerRequest(), "n1");
  CertRequest admin;
  admin.common_name = "steward-admin";
  admin.client_auth = true;
  admin.lifetime = days(365);
  Issue(admin, "admin");

  Outcome good = Handshake("n1", "admin", "127.0.0.11");
  EXPECT_TRUE(good.ok) << "client verify: " << X509_verify_cert_error_string(good.client_verify)
                       << ", server verify: " << X509_verify_cert_error_string(good.server_verify);
  EXPECT_EQ(good.received, "ping");

  Outcome wrong_host = Handshake("n1", "admin", "127.0.0.12");
  EXPECT_FALSE(wrong_host.ok);
  EXPECT_EQ(wrong_host.client_verify, X509_V_ERR_IP_ADDRESS_MISMATCH);

  // A client-only certificate cannot serve.
  Outcome admin_as_server = Handshake("admin", "n1", "127.0.0.11");
  EXPECT_FALSE(admin_as_server.ok);
  EXPECT_EQ(admin_as_server.client_verify, X509_V_ERR_INVALID_PURPOSE);
}

TEST_F(PkiTest, PkiInitCreatesCaAndAdminCertAndPrintsConfig) {
  const fs::path pki = dir_ / "new" / "pki";
  std::ostringstream out, err;
  ASSERT_EQ(RunPkiInit(pki.string(), out, err), 0) << err.str();
  EXPECT_EQ(ModeOf(pki), 0700u);
  EXPECT_EQ(Entries(pki), (std::vector<std::string>{"admin.crt", "admin.key", "ca.crt", "ca.key"}));
  EXPECT_EQ(ModeOf(pki / "ca.key"), 0600u);
  EXPECT_EQ(ModeOf(pki / "admin.key"), 0600u);
  EXPECT_EQ(ModeOf(pki / "admin.crt"), 0644u);

  const std::string p = pki.string();
  EXPECT_THAT(out.str(), HasSubstr("tls:\n  mode: issued\n  ca_cert: " + p +
                                   "/ca.crt\n  ca_key: " + p + "/ca.key\n"));
  EXPECT_THAT(out.str(), HasSubstr("--cacert " + p + "/ca.crt --cert " + p + "/admin.crt --key " +
                                   p + "/admin.key"));

  auto admin = ReadCert((pki / "admin.crt").string());
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(admin->subject, "CN=steward-admin");
  EXPECT_GT(admin->not_after - system_clock::now(), days(364));
  EXPECT_LT(admin->not_after - system_clock::now(), days(367));
  auto cert = LoadCert((pki / "admin.crt").string());
  ASSERT_TRUE(cert.ok());
  EXPECT_EQ(X509_get_extended_key_usage(cert->get()), static_cast<uint32_t>(XKU_SSL_CLIENT));

  // A second run refuses and leaves the CA alone.
  const std::string ca_key = Slurp(pki / "ca.key");
  std::ostringstream out2, err2;
  EXPECT_EQ(RunPkiInit(pki.string(), out2, err2), 1);
  EXPECT_THAT(err2.str(), HasSubstr("refusing to overwrite the CA in " + p));
  EXPECT_EQ(out2.str(), "");
  EXPECT_EQ(Slurp(pki / "ca.key"), ca_key);
}

// Issue 11: a Kubernetes API server's etcd client certificate from the cluster's CA.
TEST_F(PkiTest, PkiIssueClientWritesAClientOnlyCertificateAndNeverOverwrites) {
  const fs::path pki = dir_ / "k8s";
  std::ostringstream out, err;
  ASSERT_EQ(RunPkiInit(pki.string(), out, err), 0) << err.str();
  std::ostringstream out2, err2;
  ASSERT_EQ(RunPkiIssueClient(pki.string(), "kube-apiserver-etcd-client", out2, err2), 0)
      << err2.str();
  EXPECT_THAT(out2.str(),
              HasSubstr("--etcd-certfile " + (pki / "kube-apiserver-etcd-client.crt").string()));
  auto info = ReadCert((pki / "kube-apiserver-etcd-client.crt").string());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->subject, "CN=kube-apiserver-etcd-client");
  EXPECT_TRUE(info->uris.empty()) << "no steward role: an application, not an operator or agent";
  EXPECT_EQ(ModeOf(pki / "kube-apiserver-etcd-client.key"), 0600u);
  auto cert = LoadCert((pki / "kube-apiserver-etcd-client.crt").string());
  ASSERT_TRUE(cert.ok());
  EXPECT_EQ(X509_get_extended_key_usage(cert->get()), static_cast<uint32_t>(XKU_SSL_CLIENT));
  const std::string before = Slurp(pki / "kube-apiserver-etcd-client.crt");
  std::ostringstream out3, err3;
  EXPECT_EQ(RunPkiIssueClient(pki.string(), "kube-apiserver-etcd-client", out3, err3), 1);
  EXPECT_THAT(err3.str(), HasSubstr("refusing to overwrite"));
  EXPECT_EQ(Slurp(pki / "kube-apiserver-etcd-client.crt"), before);
  std::ostringstream out4, err4;
  EXPECT_EQ(RunPkiIssueClient(pki.string(), "../evil", out4, err4), 2);
  EXPECT_EQ(RunPkiIssueClient(pki.string(), "ca", out4, err4), 2);
}

// tls.extra_sans: the names a Kubernetes API server (or a load balancer) dials etcd by are in
// the server certificates, and a changed list is issued again.
TEST_F(PkiTest, ExtraSansAreInTheNodesServerCertificates) {
  Config c = IssuedNodeConfig();
  c.tls.extra_sans = {"etcd.example.com", "10.9.9.9"};
  ASSERT_TRUE(PrepareNodeTls(c).ok());
  auto server = ReadCert(c.Tls().server_cert);
  ASSERT_TRUE(server.ok());
  EXPECT_THAT(server->dns_names, ::testing::Contains("etcd.example.com"));
  EXPECT_THAT(server->ip_addresses, ::testing::Contains("10.9.9.9"));
  EXPECT_THAT(server->ip_addresses, ::testing::Contains("127.0.0.11"));
  auto client = ReadCert(c.Tls().client_cert);
  ASSERT_TRUE(client.ok());
  EXPECT_THAT(client->dns_names, ::testing::Not(::testing::Contains("etcd.example.com")));
  c.tls.extra_sans.push_back("etcd-lb.example.com");
  ASSERT_TRUE(PrepareNodeTls(c).ok());
  server = ReadCert(c.Tls().server_cert);
  ASSERT_TRUE(server.ok());
  EXPECT_THAT(server->dns_names, ::testing::Contains("etcd-lb.example.com"));
}

// The agent asks every minute; only a changed file, a certificate falling due or the hourly
// sweep makes it parse and verify the certificates again.
TEST_F(PkiTest, RenewerChecksInFullOnlyWhenAFileChangesOrACertificateFallsDue) {
  Config c = IssuedNodeConfig();
  c.tls.cert_lifetime = std::chrono::hours(3);
  ASSERT_TRUE(PrepareNodeTls(c).ok());
  const auto now = std::chrono::system_clock::now();
  NodeTlsRenewer renewer(c);
  auto r = renewer.Check(now);  // the first call always looks
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(renewer.full_checks(), 1);
  const std::string server_before = Slurp(c.Tls().server_cert);
  for (int i = 1; i <= 3; ++i) {
    r = renewer.Check(now + std::chrono::minutes(i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(*r);
  }
  EXPECT_EQ(renewer.full_checks(), 1);
  EXPECT_EQ(Slurp(c.Tls().server_cert), server_before);

  // A file removed behind the agent's back: noticed at the next call, and issued again.
  fs::remove(c.Tls().client_cert);
  r = renewer.Check(now + std::chrono::minutes(4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(renewer.full_checks(), 2);
  EXPECT_TRUE(fs::exists(c.Tls().client_cert));
  r = renewer.Check(now + std::chrono::minutes(5));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(renewer.full_checks(), 2);

  // Two hours into three: every certificate is due, and is renewed on the first call after.
  auto server = ReadCert(c.Tls().server_cert);
  ASSERT_TRUE(server.ok());
  const auto due = RenewalTime(*server);
  EXPECT_FALSE(NeedsRenewal(*server, due - std::chrono::seconds(1)));
  EXPECT_TRUE(NeedsRenewal(*server, due));
  r = renewer.Check(due - std::chrono::seconds(1));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(renewer.full_checks(), 2);
  r = renewer.Check(due + std::chrono::seconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_NE(Slurp(c.Tls().server_cert), server_before);
}

TEST_F(PkiTest, PkiInitPrintsAnAbsoluteDir) {
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir_);
  std::ostringstream out, err;
  int rc = RunPkiInit("./rel/../rel", out, err);
  fs::current_path(old_cwd);
  ASSERT_EQ(rc, 0) << err.str();
  const std::string want = (dir_ / "rel").lexically_normal().string();
  EXPECT_THAT(out.str(), HasSubstr("ca_cert: " + want + "/ca.crt"));
}

}  // namespace
}  // namespace steward
