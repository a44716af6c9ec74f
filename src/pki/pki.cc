#include "pki/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

struct X509StackDeleter {
  void operator()(STACK_OF(X509) * s) const { sk_X509_free(s); }  // the certs are owned elsewhere
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackDeleter>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpenSslDeleter<GENERAL_NAME_free>>;

// `what` failed inside OpenSSL; the message carries OpenSSL's error queue, which is drained so the
// next call starts clean.
absl::Status OpenSslError(const std::string& what) {
  std::vector<std::string> reasons;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    reasons.emplace_back(buf);
  }
  if (reasons.empty()) return absl::InternalError(what);
  return absl::InternalError(absl::StrCat(what, ": ", absl::StrJoin(reasons, "; ")));
}

std::string FormatTime(time_t t) {
  struct tm tm;
  if (gmtime_r(&t, &tm) == nullptr) return absl::StrCat(t, "s since the epoch");
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatAsn1Time(const ASN1_TIME* t) {
  struct tm tm;
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "(unreadable date)";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Clamped to system_clock's range (about 1678..2262 with nanosecond ticks).
system_clock::time_point Asn1TimeToTimePoint(const ASN1_TIME* t) {
  struct tm tm;
  if (ASN1_TIME_to_tm(t, &tm) != 1) return system_clock::time_point();
  const int64_t secs = timegm(&tm);
  constexpr int64_t kMax =
      std::chrono::duration_cast<std::chrono::seconds>(system_clock::duration::max()).count();
  if (secs >= kMax) return system_clock::time_point::max();
  if (secs <= -kMax) return system_clock::time_point::min();
  return system_clock::time_point(std::chrono::seconds(secs));
}

// Stat of `path`; NotFound names the file as `what path does not exist`.
absl::StatusOr<struct stat> StatFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(what, " ", path, " does not exist"));
    return ErrnoStatus(err, absl::StrCat("reading ", what, " ", path));
  }
  return st;
}

// A private key readable (or writable) by anyone but its owner is compromised, or soon will be:
// refuse it rather than use it.
absl::Status CheckKeyFileMode(const std::string& path, const std::string& what) {
  auto st = StatFile(path, what);
  if (!st.ok()) return st.status();
  const unsigned mode = st->st_mode & 07777;
  if ((mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s %s has mode %04o: it must not be accessible by group or others "
                        "(chmod 600 %s)",
                        what, path, mode, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  if (auto st = StatFile(path, what); !st.ok()) return st.status();
  auto content = ReadFile(path);
  if (!content.ok()) return Annotate(content.status(), absl::StrCat("reading ", what));
  return content;
}

// Every certificate in the PEM file at `path`, in order (other PEM blocks are skipped).
absl::StatusOr<std::vector<X509Ptr>> LoadCertChain(const std::string& path,
                                                   const std::string& what) {
  auto content = ReadPemFile(path, what);
  if (!content.ok()) return content.status();
  BioPtr bio(BIO_new_mem_buf(content->data(), static_cast<int>(content->size())));
  if (!bio) return OpenSslError("allocating a BIO");
  std::vector<X509Ptr> certs;
  ERR_clear_error();
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(x);
  }
  // Running out of PEM blocks ends the loop with "no start line"; anything else is a broken block.
  const unsigned long err = ERR_peek_last_error();
  const bool clean_end =
      err == 0 || (ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE);
  ERR_clear_error();
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " does not contain a PEM certificate"));
  }
  if (!clean_end) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", path, " holds a malformed PEM block after certificate ", certs.size()));
  }
  return certs;
}

absl::StatusOr<X509Ptr> LoadFirstCert(const std::string& path, const std::string& what) {
  auto chain = LoadCertChain(path, what);
  if (!chain.ok()) return chain.status();
  return std::move(chain->front());
}

// Never prompts on the terminal for a passphrase: encrypted keys fail to load instead.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<EvpPkeyPtr> LoadKey(const std::string& path, const std::string& what) {
  auto content = ReadPemFile(path, what);
  if (!content.ok()) return content.status();
  BioPtr bio(BIO_new_mem_buf(content->data(), static_cast<int>(content->size())));
  if (!bio) return OpenSslError("allocating a BIO");
  ERR_clear_error();
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  const bool encrypted = content->find("ENCRYPTED") != std::string::npos;
  OPENSSL_cleanse(content->data(), content->size());
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " does not contain a PEM private key",
                     encrypted ? " (it is encrypted; etcd needs an unencrypted key)" : ""));
  }
  return key;
}

// A key or certificate file written whole or not at all, committed by the caller.
using PendingFile = AtomicFile;

absl::StatusOr<PendingFile> WritePending(const std::string& target, const std::string& content,
                                         int mode) {
  auto file = AtomicFile::Create(target, mode, /*exact_mode=*/true);
  if (!file.ok()) return file.status();
  if (absl::Status s = file->Write(content); !s.ok()) return s;
  return std::move(*file);
}

absl::StatusOr<EvpPkeyPtr> NewKey() {
  EvpPkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generating an EC P-256 key");
  return key;
}

absl::StatusOr<std::string> CertPem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) return OpenSslError("encoding a certificate");
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

// The caller should OPENSSL_cleanse the result once written.
absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("encoding a private key");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, static_cast<size_t>(len));
  OPENSSL_cleanse(data, static_cast<size_t>(len));
  return pem;
}

// Writes a key (0600, its PEM wiped from memory after) and its certificate (0644) to pending
// temp files; nothing is visible under the final names until the caller commits them.
absl::StatusOr<std::pair<PendingFile, PendingFile>> WritePair(X509* cert, EVP_PKEY* key,
                                                              const std::string& cert_path,
                                                              const std::string& key_path) {
  auto cert_pem = CertPem(cert);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = KeyPem(key);
  if (!key_pem.ok()) return key_pem.status();
  auto key_file = WritePending(key_path, *key_pem, 0600);
  OPENSSL_cleanse(key_pem->data(), key_pem->size());
  if (!key_file.ok()) return key_file.status();
  auto cert_file = WritePending(cert_path, *cert_pem, 0644);
  if (!cert_file.ok()) return cert_file.status();
  return std::make_pair(std::move(*key_file), std::move(*cert_file));
}

// A v3 certificate with a random 128-bit serial, subject CN=`cn`, `key`'s public key and the given
// validity. Issuer, extensions and signature are the caller's.
absl::StatusOr<X509Ptr> NewCert(const std::string& cn, EVP_PKEY* key,
                                system_clock::time_point not_before,
                                system_clock::time_point not_after, const char* name_field = "CN") {
  X509Ptr x(X509_new());
  if (!x) return OpenSslError("allocating a certificate");
  BignumPtr bn(BN_new());
  if (!bn || BN_rand(bn.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1) {
    return OpenSslError("generating a serial number");
  }
  if (BN_is_zero(bn.get())) BN_one(bn.get());  // RFC 5280 wants a positive serial
  Asn1IntegerPtr serial(BN_to_ASN1_INTEGER(bn.get(), nullptr));
  if (!serial || X509_set_version(x.get(), X509_VERSION_3) != 1 ||
      X509_set_serialNumber(x.get(), serial.get()) != 1) {
    return OpenSslError("setting the serial number");
  }
  if (ASN1_TIME_set(X509_getm_notBefore(x.get()), system_clock::to_time_t(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), system_clock::to_time_t(not_after)) == nullptr) {
    return OpenSslError("setting the validity");
  }
  if (X509_NAME_add_entry_by_txt(X509_get_subject_name(x.get()), name_field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1) {
    return OpenSslError(
        absl::StrCat("setting the common name \"", cn, "\" (at most 64 characters)"));
  }
  if (X509_set_pubkey(x.get(), key) != 1) return OpenSslError("setting the public key");
  return x;
}

// Adds an extension from OpenSSL's config syntax. Only for our constant values: names from
// callers go through AddSubjectAltNames, where no character can change the meaning.
absl::Status AddExtension(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509ExtensionPtr ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) {
    return OpenSslError(absl::StrCat("adding extension ", OBJ_nid2sn(nid), " = ", value));
  }
  return absl::OkStatus();
}

// A parsed IP literal as the 4 or 16 bytes of a SAN entry; nullptr if `ip` is not one.
Asn1OctetStringPtr ParseIp(const std::string& ip) {
  Asn1OctetStringPtr oct(a2i_IPADDRESS(ip.c_str()));
  ERR_clear_error();
  return oct;
}

bool IsIpLiteral(const std::string& s) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

absl::Status AddSubjectAltNames(X509* x, const CertRequest& req) {
  if (req.dns_names.empty() && req.ip_addresses.empty() && req.uris.empty()) {
    return absl::OkStatus();
  }
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return OpenSslError("allocating subjectAltName");
  auto push = [&](int type, ASN1_STRING* value) -> absl::Status {
    GeneralNamePtr gn(GENERAL_NAME_new());
    if (!gn) {
      ASN1_STRING_free(value);
      return OpenSslError("allocating a subjectAltName entry");
    }
    GENERAL_NAME_set0_value(gn.get(), type, value);  // gn owns value from here
    if (sk_GENERAL_NAME_push(names.get(), gn.get()) == 0) {
      return OpenSslError("adding a subjectAltName entry");
    }
    gn.release();  // now owned by names
    return absl::OkStatus();
  };
  for (const auto& dns : req.dns_names) {
    ASN1_IA5STRING* s = ASN1_IA5STRING_new();
    if (s == nullptr || ASN1_STRING_set(s, dns.data(), static_cast<int>(dns.size())) != 1) {
      ASN1_IA5STRING_free(s);
      return OpenSslError("encoding a DNS name");
    }
    if (auto st = push(GEN_DNS, s); !st.ok()) return st;
  }
  for (const auto& ip : req.ip_addresses) {
    Asn1OctetStringPtr oct = ParseIp(ip);
    if (!oct) return absl::InvalidArgumentError(absl::StrCat("bad IP address \"", ip, "\""));
    if (auto st = push(GEN_IPADD, oct.release()); !st.ok()) return st;
  }
  for (const auto& uri : req.uris) {
    ASN1_IA5STRING* s = ASN1_IA5STRING_new();
    if (s == nullptr || ASN1_STRING_set(s, uri.data(), static_cast<int>(uri.size())) != 1) {
      ASN1_IA5STRING_free(s);
      return OpenSslError("encoding a URI");
    }
    if (auto st = push(GEN_URI, s); !st.ok()) return st;
  }
  if (X509_add1_ext_i2d(x, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return OpenSslError("adding subjectAltName");
  }
  return absl::OkStatus();
}

// Letters, digits, '-', '.', '_' and a leading "*." wildcard: what a DNS SAN may sensibly hold.
bool IsValidDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  std::string_view rest(name);
  if (rest.substr(0, 2) == "*.") rest.remove_prefix(2);
  if (rest.empty()) return false;
  for (char c : rest) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateRequest(const CertRequest& req) {
  if (req.common_name.empty()) return absl::InvalidArgumentError("common_name is empty");
  if (req.lifetime <= std::chrono::seconds(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lifetime must be positive, got ", req.lifetime.count(), "s"));
  }
  if (!req.server_auth && !req.client_auth) {
    return absl::InvalidArgumentError("neither server_auth nor client_auth is requested");
  }
  if (req.server_auth && req.dns_names.empty() && req.ip_addresses.empty()) {
    // TLS clients match only the subjectAltNames, so such a server certificate is useless.
    return absl::InvalidArgumentError("a server certificate needs dns_names or ip_addresses");
  }
  for (const auto& dns : req.dns_names) {
    if (!IsValidDnsName(dns)) {
      return absl::InvalidArgumentError(absl::StrCat("dns_names: \"", dns, "\" is not a DNS name"));
    }
  }
  for (const auto& ip : req.ip_addresses) {
    if (!IsIpLiteral(ip) || !ParseIp(ip)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ip_addresses: \"", ip, "\" is not an IPv4 or IPv6 address"));
    }
  }
  return absl::OkStatus();
}

bool SamePath(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  const fs::path pa = fs::weakly_canonical(a, ec1);
  const fs::path pb = fs::weakly_canonical(b, ec2);
  if (ec1 || ec2) return a == b;
  return pa == pb;
}

std::string Subject(X509_NAME* name) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "";
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

void ReadSubjectAltNames(X509* x, std::vector<std::string>* dns, std::vector<std::string>* ips,
                         std::vector<std::string>* uris = nullptr) {
  GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type == GEN_DNS) {
      const ASN1_IA5STRING* s = gn->d.dNSName;
      dns->emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                        static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_URI && uris != nullptr) {
      const ASN1_IA5STRING* s = gn->d.uniformResourceIdentifier;
      uris->emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = gn->d.iPAddress;
      const int len = ASN1_STRING_length(s);
      char buf[INET6_ADDRSTRLEN];
      const int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
      if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(s), buf, sizeof(buf))) {
        ips->emplace_back(buf);
      }
    }
  }
}

// "DNS:a, IP:127.0.0.11" for error messages.
std::string DescribeNames(X509* x) {
  std::vector<std::string> dns, ips;
  ReadSubjectAltNames(x, &dns, &ips);
  std::vector<std::string> all;
  for (const auto& d : dns) all.push_back("DNS:" + d);
  for (const auto& i : ips) all.push_back("IP:" + i);
  if (all.empty()) return "it has no subjectAltName";
  return absl::StrCat("its subjectAltNames: ", absl::StrJoin(all, ", "));
}

absl::Status IssueCertImpl(const std::string& ca_cert_path, const std::string& ca_key_path,
                           const CertRequest& req, const std::string& cert_path,
                           const std::string& key_path) {
  if (auto s = ValidateRequest(req); !s.ok()) return s;
  for (const auto& [out, what] : {std::pair{cert_path, "cert_path"}, {key_path, "key_path"}}) {
    if (SamePath(out, ca_cert_path) || SamePath(out, ca_key_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", out, " is a CA file; refusing to overwrite it"));
    }
  }
  if (SamePath(cert_path, key_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cert_path and key_path are the same file ", cert_path));
  }

  if (auto s = CheckKeyFileMode(ca_key_path, "CA key"); !s.ok()) return s;
  auto ca_cert = LoadFirstCert(ca_cert_path, "CA certificate");
  if (!ca_cert.ok()) return ca_cert.status();
  auto ca_key = LoadKey(ca_key_path, "CA key");
  if (!ca_key.ok()) return ca_key.status();
  if (X509_check_private_key(ca_cert->get(), ca_key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("CA key ", ca_key_path, " does not match CA certificate ", ca_cert_path));
  }
  if (X509_check_ca(ca_cert->get()) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CA certificate ", ca_cert_path, " is not a CA certificate"));
  }

  const auto issued = req.issue_time.value_or(system_clock::now());
  auto not_after = issued + req.lifetime;
  const auto ca_not_after = Asn1TimeToTimePoint(X509_get0_notAfter(ca_cert->get()));
  if (not_after > ca_not_after) not_after = ca_not_after;

  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto x = NewCert(req.common_name, key->get(), issued - kClockSkewAllowance, not_after,
                   req.name_in_organization ? "O" : "CN");
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  if (X509_set_issuer_name(cert, X509_get_subject_name(ca_cert->get())) != 1) {
    return OpenSslError("setting the issuer");
  }
  const char* eku = req.server_auth && req.client_auth ? "serverAuth,clientAuth"
                    : req.server_auth                  ? "serverAuth"
                                                       : "clientAuth";
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature"},
                            {NID_ext_key_usage, eku},
                            {NID_subject_key_identifier, "hash"},
                            {NID_authority_key_identifier, "keyid:always"}}) {
    if (auto s = AddExtension(cert, ca_cert->get(), nid, value); !s.ok()) return s;
  }
  if (auto s = AddSubjectAltNames(cert, req); !s.ok()) return s;
  if (X509_sign(cert, ca_key->get(), EVP_sha256()) == 0) return OpenSslError("signing");

  auto files = WritePair(cert, key->get(), cert_path, key_path);
  if (!files.ok()) return files.status();
  auto& [key_file, cert_file] = *files;
  // Both renamed before either directory is synced: an error there leaves a matching pair.
  if (auto s = key_file.Commit(/*replace=*/true, /*sync_dir=*/false); !s.ok()) return s;
  if (auto s = cert_file.Commit(/*replace=*/true, /*sync_dir=*/false); !s.ok()) return s;
  if (auto s = SyncDir(fs::path(key_path).parent_path().string()); !s.ok()) return s;
  return SyncDir(fs::path(cert_path).parent_path().string());
}

absl::Status CreateCaImpl(const std::string& dir, const std::string& common_name) {
  if (common_name.empty()) return absl::InvalidArgumentError("common_name is empty");
  const std::string cert_path = (fs::path(dir) / kCaCertFile).string();
  const std::string key_path = (fs::path(dir) / kCaKeyFile).string();
  for (const auto& p : {cert_path, key_path}) {
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0) {
      return absl::AlreadyExistsError(absl::StrCat(p, " already exists"));
    }
  }

  const auto now = system_clock::now();
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto x = NewCert(common_name, key->get(), now - kClockSkewAllowance, now + kCaLifetime);
  if (!x.ok()) return x.status();
  X509* cert = x->get();
  if (X509_set_issuer_name(cert, X509_get_subject_name(cert)) != 1) {
    return OpenSslError("setting the issuer");
  }
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
                            {NID_key_usage, "critical,keyCertSign,cRLSign"},
                            {NID_subject_key_identifier, "hash"}}) {
    if (auto s = AddExtension(cert, cert, nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert, key->get(), EVP_sha256()) == 0) return OpenSslError("signing");

  auto files = WritePair(cert, key->get(), cert_path, key_path);
  if (!files.ok()) return files.status();
  auto& [key_file, cert_file] = *files;
  if (auto s = key_file.Commit(/*replace=*/false, /*sync_dir=*/false); !s.ok()) return s;
  if (auto s = cert_file.Commit(/*replace=*/false, /*sync_dir=*/false); !s.ok()) {
    // Without its certificate the new key is useless, and it would make the next attempt
    // refuse; the key is ours (the no-replace rename just created it).
    ::unlink(key_path.c_str());
    return s;
  }
  return SyncDir(fs::path(key_path).parent_path().string());
}

// The chain check's failures that mean "this CA did not sign it" rather than something else
// (expiry of the CA, a missing usage...).
bool IsWrongIssuer(int err) {
  switch (err) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return true;
    default:
      return false;
  }
}

absl::Status CheckCertFilesImpl(const std::string& cert_path, const std::string& key_path,
                                const std::string& ca_path, const std::string& host,
                                system_clock::time_point now) {
  if (host.empty()) return absl::InvalidArgumentError("host is empty");
  auto chain = LoadCertChain(cert_path, "certificate");
  if (!chain.ok()) return chain.status();
  X509* leaf = chain->front().get();
  if (auto s = CheckKeyFileMode(key_path, "key file"); !s.ok()) return s;
  auto key = LoadKey(key_path, "key file");
  if (!key.ok()) return key.status();
  auto cas = LoadCertChain(ca_path, "CA file");
  if (!cas.ok()) return cas.status();

  if (X509_check_private_key(leaf, key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("key file ", key_path, " does not match certificate ", cert_path));
  }

  time_t now_t = system_clock::to_time_t(now);
  if (X509_cmp_time(X509_get0_notAfter(leaf), &now_t) <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("certificate ", cert_path, " expired at ",
                                                      FormatAsn1Time(X509_get0_notAfter(leaf)),
                                                      " (now is ", FormatTime(now_t), ")"));
  }
  if (X509_cmp_time(X509_get0_notBefore(leaf), &now_t) >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "certificate ", cert_path, " is not valid until ",
        FormatAsn1Time(X509_get0_notBefore(leaf)), " (now is ", FormatTime(now_t), ")"));
  }

  // Like Go's crypto/tls (etcd's), only subjectAltNames count; the subject CN does not.
  const int covered = IsIpLiteral(host)
                          ? X509_check_ip_asc(leaf, host.c_str(), 0)
                          : X509_check_host(leaf, host.data(), host.size(),
                                            X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr);
  if (covered != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate ", cert_path, " does not cover host ", host, " (", DescribeNames(leaf), ")"));
  }

  X509StorePtr store(X509_STORE_new());
  if (!store) return OpenSslError("allocating a certificate store");
  for (const auto& ca : *cas) {
    if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
      return OpenSslError(absl::StrCat("adding ", ca_path, " to a certificate store"));
    }
  }
  // Every certificate in the CA file is a trust anchor, as in Go, even an intermediate.
  X509_STORE_set_flags(store.get(), X509_V_FLAG_PARTIAL_CHAIN);
  X509StackPtr untrusted(sk_X509_new_null());
  if (!untrusted) return OpenSslError("allocating a certificate stack");
  for (size_t i = 1; i < chain->size(); ++i) {
    if (sk_X509_push(untrusted.get(), (*chain)[i].get()) == 0) {
      return OpenSslError("building the chain");
    }
  }
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf, untrusted.get()) != 1) {
    return OpenSslError("setting up certificate verification");
  }
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  X509_STORE_CTX_set_time(ctx.get(), 0, now_t);
  if (X509_verify_cert(ctx.get()) == 1) return absl::OkStatus();
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  const char* reason = X509_verify_cert_error_string(err);
  if (IsWrongIssuer(err)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate ", cert_path, " is not signed by the CA in ", ca_path, " (", reason, ")"));
  }
  if (err == X509_V_ERR_INVALID_PURPOSE && X509_STORE_CTX_get_error_depth(ctx.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate ", cert_path,
                     " is not a TLS server certificate (its extendedKeyUsage lacks serverAuth)"));
  }
  X509* at = X509_STORE_CTX_get_current_cert(ctx.get());
  return absl::InvalidArgumentError(absl::StrCat(
      "certificate ", cert_path, " does not verify against the CA in ", ca_path,
      " for a TLS server: ", reason, " (at depth ", X509_STORE_CTX_get_error_depth(ctx.get()),
      at ? absl::StrCat(", ", Subject(X509_get_subject_name(at))) : std::string(), ")"));
}

}  // namespace

absl::Status CreateCa(const std::string& dir, const std::string& common_name) {
  ERR_clear_error();
  return Annotate(CreateCaImpl(dir, common_name), absl::StrCat("creating a CA in ", dir));
}

absl::Status IssueCert(const std::string& ca_cert_path, const std::string& ca_key_path,
                       const CertRequest& req, const std::string& cert_path,
                       const std::string& key_path) {
  ERR_clear_error();
  return Annotate(IssueCertImpl(ca_cert_path, ca_key_path, req, cert_path, key_path),
                  absl::StrCat("issuing a certificate for \"", req.common_name, "\""));
}

absl::StatusOr<CertInfo> ReadCert(const std::string& path) {
  auto x = LoadFirstCert(path, "certificate");
  if (!x.ok()) return x.status();
  CertInfo info;
  info.subject = Subject(X509_get_subject_name(x->get()));
  X509_NAME* subject = X509_get_subject_name(x->get());
  // The last CN, as Go's crypto/x509 (and so etcd) takes it.
  int last_cn = -1;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    last_cn = i;
  }
  if (int i = last_cn; i >= 0) {
    const ASN1_STRING* d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    unsigned char* utf8 = nullptr;
    if (int n = ASN1_STRING_to_UTF8(&utf8, d); n >= 0) {
      info.common_name.assign(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
    }
  }
  ReadSubjectAltNames(x->get(), &info.dns_names, &info.ip_addresses, &info.uris);
  info.not_before = Asn1TimeToTimePoint(X509_get0_notBefore(x->get()));
  info.not_after = Asn1TimeToTimePoint(X509_get0_notAfter(x->get()));
  return info;
}

absl::Status CheckCertFiles(const std::string& cert_path, const std::string& key_path,
                            const std::string& ca_path, const std::string& host,
                            system_clock::time_point now) {
  ERR_clear_error();
  return Annotate(CheckCertFilesImpl(cert_path, key_path, ca_path, host, now),
                  absl::StrCat("checking TLS files for ", host));
}

bool NeedsRenewal(const CertInfo& cert, system_clock::time_point now) {
  if (cert.not_after <= cert.not_before || now >= cert.not_after) return true;
  // In whole seconds since the epoch: dates clamped to the clock's range cannot overflow here.
  auto secs = [](system_clock::time_point t) {
    return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  const int64_t window = secs(cert.not_after) - secs(cert.not_before);
  const int64_t elapsed = secs(now) - secs(cert.not_before);
  return elapsed * 3 >= window * 2;
}

system_clock::time_point RenewalTime(const CertInfo& cert) {
  if (cert.not_after <= cert.not_before) return system_clock::time_point::min();
  const auto nb = std::chrono::floor<std::chrono::seconds>(cert.not_before);
  const int64_t window = (std::chrono::floor<std::chrono::seconds>(cert.not_after) - nb).count();
  // elapsed * 3 >= window * 2, the least whole `elapsed` that holds; also before not_after.
  const int64_t elapsed = (window * 2 + 2) / 3;
  return std::min<system_clock::time_point>(nb + std::chrono::seconds(elapsed), cert.not_after);
}

absl::StatusOr<X509Ptr> LoadCert(const std::string& path) {
  return LoadFirstCert(path, "certificate");
}

absl::StatusOr<EvpPkeyPtr> LoadPrivateKey(const std::string& path) {
  return LoadKey(path, "key file");
}

std::string AgentRoleUri(const std::string& cluster, const std::string& node) {
  return absl::StrCat("steward://", cluster, "/agent/", node);
}

namespace {

// A caller's certificate (PEM, as gRPC hands it over): its subject and URI SANs.
struct Caller {
  std::string subject;
  std::vector<std::string> uris;
};
absl::StatusOr<Caller> ReadCaller(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr x(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!x) return absl::PermissionDeniedError("the caller presented no readable certificate");
  Caller c;
  std::vector<std::string> dns, ips;
  ReadSubjectAltNames(x.get(), &dns, &ips, &c.uris);
  c.subject = Subject(X509_get_subject_name(x.get()));
  return c;
}

}  // namespace

absl::StatusOr<std::string> AgentOfCluster(const std::string& pem, const std::string& cluster) {
  auto caller = ReadCaller(pem);
  if (!caller.ok()) return caller.status();
  const std::vector<std::string>& uris = caller->uris;
  const std::string prefix = AgentRoleUri(cluster, "");
  for (const auto& u : uris) {
    if (u.size() > prefix.size() && u.rfind(prefix, 0) == 0) return u.substr(prefix.size());
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the caller's certificate (", caller->subject,
      ", URIs: ", uris.empty() ? "none" : absl::StrJoin(uris, " "), ") lacks the agent role ",
      prefix, "<node>: only agents of this cluster give orders"));
}

absl::Status OperatorOrAgentOf(const std::string& pem, const std::string& cluster) {
  auto caller = ReadCaller(pem);
  if (!caller.ok()) return caller.status();
  for (const auto& u : caller->uris) {
    if (u == kOperatorRoleUri) return absl::OkStatus();
  }
  if (AgentOfCluster(pem, cluster).ok()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "the caller's certificate (", caller->subject,
      ", URIs: ", caller->uris.empty() ? "none" : absl::StrJoin(caller->uris, " "),
      ") is neither the operator's (", kOperatorRoleUri, ") nor an agent's of this cluster"));
}

absl::StatusOr<std::vector<std::string>> CheckCaBundle(const std::string& bundle_path,
                                                       system_clock::time_point now) {
  auto cas = LoadCertChain(bundle_path, "CA bundle");
  if (!cas.ok()) return cas.status();
  time_t now_t = system_clock::to_time_t(now);  // (X509_cmp_time takes it non-const)
  std::vector<std::string> out;
  for (size_t i = 0; i < cas->size(); ++i) {
    X509* ca = (*cas)[i].get();
    const std::string who = absl::StrCat("certificate ", i + 1, " of ", bundle_path, " (",
                                         Subject(X509_get_subject_name(ca)), ")");
    if (X509_check_ca(ca) < 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat(who, " is not a CA (no basicConstraints CA:TRUE)"));
    }
    if (X509_cmp_time(X509_get0_notAfter(ca), &now_t) <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " expired at ", FormatAsn1Time(X509_get0_notAfter(ca))));
    }
    if (X509_cmp_time(X509_get0_notBefore(ca), &now_t) >= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " is not valid until ", FormatAsn1Time(X509_get0_notBefore(ca))));
    }
    out.push_back(absl::StrCat(Subject(X509_get_subject_name(ca)), ", until ",
                               FormatAsn1Time(X509_get0_notAfter(ca))));
  }
  return out;
}

absl::StatusOr<std::string> ChainsTo(const std::string& cert_path, const std::string& bundle_path,
                                     system_clock::time_point now) {
  auto chain = LoadCertChain(cert_path, "certificate");
  if (!chain.ok()) return chain.status();
  auto cas = LoadCertChain(bundle_path, "CA bundle");
  if (!cas.ok()) return cas.status();
  X509StorePtr store(X509_STORE_new());
  if (!store) return OpenSslError("allocating a certificate store");
  for (const auto& ca : *cas) {
    if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
      return OpenSslError(absl::StrCat("adding ", bundle_path, " to a certificate store"));
    }
  }
  X509_STORE_set_flags(store.get(), X509_V_FLAG_PARTIAL_CHAIN);  // every bundle entry an anchor
  X509StackPtr untrusted(sk_X509_new_null());
  if (!untrusted) return OpenSslError("allocating a certificate stack");
  for (size_t i = 1; i < chain->size(); ++i) {
    if (sk_X509_push(untrusted.get(), (*chain)[i].get()) == 0)
      return OpenSslError("building the chain");
  }
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx ||
      X509_STORE_CTX_init(ctx.get(), store.get(), chain->front().get(), untrusted.get()) != 1) {
    return OpenSslError("setting up certificate verification");
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, system_clock::to_time_t(now));
  if (X509_verify_cert(ctx.get()) == 1) {
    STACK_OF(X509)* verified = X509_STORE_CTX_get0_chain(ctx.get());
    X509* anchor = sk_X509_value(verified, sk_X509_num(verified) - 1);
    return Subject(X509_get_subject_name(anchor));
  }
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return absl::InvalidArgumentError(absl::StrCat(
      IsWrongIssuer(err) ? "not signed by a CA in the bundle" : X509_verify_cert_error_string(err),
      " (issuer ", Subject(X509_get_issuer_name(chain->front().get())), ")"));
}

}  // namespace steward
