#include "pki/ca_rotation.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "pki/pki.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

std::string TlsDir(const Config& c) { return c.node.data_dir + "/tls/"; }
std::string StatePath(const Config& c) { return TlsDir(c) + "ca-rotation.json"; }
std::string OldCert(const Config& c) { return TlsDir(c) + "ca-old.crt"; }
std::string NewCert(const Config& c) { return TlsDir(c) + "ca-new.crt"; }
std::string NewKey(const Config& c) { return TlsDir(c) + "ca-new.key"; }

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

std::string WithNewline(std::string pem) {
  if (!pem.empty() && pem.back() != '\n') pem += '\n';
  return pem;
}

}  // namespace

std::string CertFingerprint(const std::string& pem) {
  X509Ptr x = ParseCert(pem);
  if (!x) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(x.get(), EVP_sha256(), md, &n) != 1) return "";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) absl::StrAppendFormat(&out, "%02x", md[i]);
  return out;
}

absl::Status CheckCaPair(const std::string& cert_pem, const std::string& key_pem) {
  X509Ptr x = ParseCert(cert_pem);
  if (!x) return absl::InvalidArgumentError("the new CA certificate is not a PEM certificate");
  if (X509_check_ca(x.get()) < 1) {
    return absl::InvalidArgumentError(
        "the new CA certificate is not a CA (no basicConstraints CA:TRUE)");
  }
  const time_t now = time(nullptr);
  time_t now_t = now;
  if (X509_cmp_time(X509_get0_notAfter(x.get()), &now_t) <= 0) {
    return absl::FailedPreconditionError("the new CA certificate has expired");
  }
  if (X509_cmp_time(X509_get0_notBefore(x.get()), &now_t) >= 0) {
    return absl::FailedPreconditionError("the new CA certificate is not valid yet");
  }
  BioPtr bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  EvpPkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return absl::InvalidArgumentError("the new CA key is not a PEM private key");
  if (X509_check_private_key(x.get(), key.get()) != 1) {
    return absl::InvalidArgumentError("the new CA key does not match the new CA certificate");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CaRotation>> ReadCaRotation(const Config& config) {
  std::error_code ec;
  if (!fs::exists(StatePath(config), ec)) return std::optional<CaRotation>();
  auto text = ReadFile(StatePath(config));
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j.contains("phase")) {
    return absl::DataLossError(absl::StrCat(StatePath(config), " is not a CA rotation state"));
  }
  CaRotation r;
  r.id = j.value("id", std::string());
  r.phase = j.value("phase", 0);
  if (r.phase < 1 || r.phase > 3) {
    return absl::DataLossError(absl::StrCat(StatePath(config), ": phase ", r.phase, " is not 1-3"));
  }
  return std::optional<CaRotation>(r);
}

absl::Status StageCaRotation(const Config& config, const std::string& id, int phase,
                             const std::string& cert_pem, const std::string& key_pem) {
  if (config.tls.mode != "issued") {
    return absl::FailedPreconditionError(absl::StrCat(
        "tls.mode is ", config.tls.mode, " on node ", config.node.name,
        ": only issued certificates are rotated by the agents (docs/tls.md: files mode)"));
  }
  if (phase < 1 || phase > 3) return absl::InvalidArgumentError("the phase must be 1, 2 or 3");
  if (absl::Status s = CheckCaPair(cert_pem, key_pem); !s.ok()) return s;
  auto current = ReadCaRotation(config);
  if (!current.ok()) return current.status();
  if (current->has_value()) {
    const CaRotation& r = **current;
    if (r.id != id) {
      return absl::FailedPreconditionError(absl::StrCat("node ", config.node.name, " is in phase ",
                                                        r.phase, " of another CA rotation (", r.id,
                                                        "): finish that one first"));
    }
    auto staged = ReadFile(NewCert(config));
    if (!staged.ok() || CertFingerprint(*staged) != CertFingerprint(cert_pem)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rotation ", id, " on node ", config.node.name, " is to another CA than this one"));
    }
    if (phase <= r.phase) return absl::OkStatus();  // done already: a re-run
  } else {
    // The CA trusted before, kept for phases 1 and 2 (tls.ca_cert may change under us).
    auto old = ReadFile(config.tls.ca_cert);
    if (!old.ok()) return Annotate(old.status(), "tls.ca_cert");
    if (CertFingerprint(*old) == CertFingerprint(cert_pem)) {
      return absl::FailedPreconditionError("the new CA is the one tls.ca_cert names already");
    }
    if (absl::Status s = MakeDirs(TlsDir(config), 0700); !s.ok()) return s;
    if (absl::Status s = WriteFileAtomic(OldCert(config), WithNewline(*old), 0644); !s.ok()) {
      return s;
    }
  }
  // The new CA first, the phase last: a crash in between leaves the phase before, re-run.
  if (absl::Status s = WriteFileAtomic(NewKey(config), WithNewline(key_pem), 0600); !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteFileAtomic(NewCert(config), WithNewline(cert_pem), 0644); !s.ok()) {
    return s;
  }
  const nlohmann::json state = {{"id", id}, {"phase", phase}};
  return WriteFileAtomic(StatePath(config), state.dump() + "\n", 0644);
}

absl::StatusOr<NodeTrust> TrustFor(const Config& config) {
  NodeTrust t;
  auto configured = ReadFile(config.tls.ca_cert);
  if (!configured.ok()) return Annotate(configured.status(), "tls.ca_cert");
  auto rotation = ReadCaRotation(config);
  if (!rotation.ok()) return rotation.status();
  if (rotation->has_value() && (*rotation)->phase == 3) {
    // Finished once the config names the new CA: the config rules again.
    auto staged = ReadFile(NewCert(config));
    if (staged.ok() && CertFingerprint(*staged) == CertFingerprint(*configured)) {
      std::error_code ec;
      for (const std::string& f :
           {StatePath(config), NewKey(config), NewCert(config), OldCert(config)}) {
        fs::remove(f, ec);
      }
      rotation->reset();
    }
  }
  if (!rotation->has_value()) {
    t.trusted_pem = WithNewline(*configured);
    t.issuer_cert = config.tls.ca_cert;
    t.issuer_key = config.tls.ca_key;
    return t;
  }
  const CaRotation& r = **rotation;
  t.rotation = r;
  auto old = ReadFile(OldCert(config));
  if (!old.ok()) return Annotate(old.status(), "the CA trusted before the rotation");
  auto fresh = ReadFile(NewCert(config));
  if (!fresh.ok()) return Annotate(fresh.status(), "the new CA");
  t.trusted_pem = r.phase < 3 ? WithNewline(*old) + WithNewline(*fresh) : WithNewline(*fresh);
  t.issuer_cert = r.phase >= 2 ? NewCert(config) : config.tls.ca_cert;
  t.issuer_key = r.phase >= 2 ? NewKey(config) : config.tls.ca_key;
  return t;
}

}  // namespace steward
