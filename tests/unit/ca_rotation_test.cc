// A node through the three phases of a CA rotation (pki/ca_rotation.h), with real certificates:
// what it trusts and what its certificates chain to after each, re-runs, and bad input.
#include "pki/ca_rotation.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "gtest/gtest.h"
#include "pki/node_certs.h"
#include "pki/pki.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

class CaRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "steward-carot-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    for (const char* ca : {"old", "new"}) {
      fs::create_directories(dir_ / ca);
      ASSERT_TRUE(CreateCa((dir_ / ca).string(), std::string(ca) + " CA").ok());
    }
    c_.cluster.name = "rot";
    c_.cluster.size = 1;
    c_.cluster.nodes = {{"n1", "127.0.0.11"}};
    c_.node.name = "n1";
    c_.node.data_dir = (dir_ / "node").string();
    c_.tls.mode = "issued";
    c_.tls.ca_cert = Old() + "/ca.crt";
    c_.tls.ca_key = Old() + "/ca.key";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Old() const { return (dir_ / "old").string(); }
  std::string New() const { return (dir_ / "new").string(); }
  std::string Read(const std::string& path) const { return ReadFile(path).value_or(""); }
  std::string NewPem() const { return Read(New() + "/ca.crt"); }
  std::string NewKeyPem() const { return Read(New() + "/ca.key"); }
  // Whether the node's `role` certificate chains to the CA at `ca`.
  bool ChainsToCa(const std::string& role, const std::string& ca) const {
    return ChainsTo(c_.Tls().*(role == "server" ? &TlsPaths::server_cert : &TlsPaths::client_cert),
                    ca + "/ca.crt", system_clock::now())
        .ok();
  }

  fs::path dir_;
  Config c_;
};

TEST_F(CaRotationTest, ANodeTrustsBothThenIssuesFromTheNewThenTrustsOnlyTheNew) {
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  const std::string old_pem = Read(Old() + "/ca.crt");
  EXPECT_EQ(Read(c_.Tls().ca), old_pem);
  EXPECT_TRUE(ChainsToCa("server", Old()));
  const std::string server_before = Read(c_.Tls().server_cert);

  // Phase 1: both trusted; nothing reissued (etcd restarts for the trust, not for certs).
  ASSERT_TRUE(StageCaRotation(c_, "r1", 1, NewPem(), NewKeyPem()).ok());
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_EQ(Read(c_.Tls().ca), old_pem + NewPem());
  EXPECT_EQ(Read(c_.Tls().server_cert), server_before);

  // Phase 2: every certificate from the new CA, both still trusted.
  ASSERT_TRUE(StageCaRotation(c_, "r1", 2, NewPem(), NewKeyPem()).ok());
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_EQ(Read(c_.Tls().ca), old_pem + NewPem());
  EXPECT_TRUE(ChainsToCa("server", New()));
  EXPECT_TRUE(ChainsToCa("client", New())) << "the client certificate too";
  EXPECT_FALSE(ChainsToCa("server", Old()));
  // Each check of the files agrees they are current: no reissue on the next pass.
  const std::string server_new = Read(c_.Tls().server_cert);
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_EQ(Read(c_.Tls().server_cert), server_new);

  // A re-run of an earlier phase changes nothing; another rotation is refused meanwhile.
  ASSERT_TRUE(StageCaRotation(c_, "r1", 1, NewPem(), NewKeyPem()).ok());
  EXPECT_EQ(ReadCaRotation(c_)->value().phase, 2);
  absl::Status other = StageCaRotation(c_, "r2", 1, NewPem(), NewKeyPem());
  EXPECT_TRUE(absl::IsFailedPrecondition(other)) << other;

  // Phase 3: only the new CA.
  ASSERT_TRUE(StageCaRotation(c_, "r1", 3, NewPem(), NewKeyPem()).ok());
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_EQ(Read(c_.Tls().ca), NewPem());
  EXPECT_EQ(Read(c_.Tls().server_cert), server_new);

  // The operator points tls.ca_cert at the new CA: the rotation's files go, the config rules.
  c_.tls.ca_cert = New() + "/ca.crt";
  c_.tls.ca_key = New() + "/ca.key";
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_FALSE(ReadCaRotation(c_)->has_value());
  EXPECT_EQ(Read(c_.Tls().server_cert), server_new) << "still current: not reissued";
}

TEST_F(CaRotationTest, BadInputIsRefusedAndChangesNothing) {
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  const std::string trusted = Read(c_.Tls().ca);
  // The old CA's key with the new certificate.
  absl::Status s = StageCaRotation(c_, "r1", 1, NewPem(), Read(Old() + "/ca.key"));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(std::string(s.message()).find("does not match"), std::string::npos) << s;
  // A certificate that is not a CA (the node's own server certificate).
  s = StageCaRotation(c_, "r1", 1, Read(c_.Tls().server_cert), Read(c_.Tls().server_key));
  EXPECT_NE(std::string(s.message()).find("is not a CA"), std::string::npos) << s;
  // Not PEM at all, and the CA the node has already.
  s = StageCaRotation(c_, "r1", 1, "garbage", NewKeyPem());
  EXPECT_NE(std::string(s.message()).find("not a PEM certificate"), std::string::npos) << s;
  s = StageCaRotation(c_, "r1", 1, Read(Old() + "/ca.crt"), Read(Old() + "/ca.key"));
  EXPECT_NE(std::string(s.message()).find("already"), std::string::npos) << s;
  EXPECT_FALSE(ReadCaRotation(c_)->has_value());
  ASSERT_TRUE(PrepareNodeTls(c_).ok());
  EXPECT_EQ(Read(c_.Tls().ca), trusted);
  EXPECT_EQ(CertFingerprint(NewPem()).size(), 64u);
}

}  // namespace
}  // namespace steward
