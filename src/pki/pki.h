// The PKI for etcd-steward's TLS: a private CA, certificates issued from it, and the checks that
// operator-supplied certificate files ("files" mode) are usable before etcd is started with them.
//
// Keys are EC P-256. Private keys are written PKCS#8 PEM, unencrypted, mode 0600: they are created
// with that mode (never briefly readable by others), written to a dot-prefixed temp file in the
// target's directory, fsynced, renamed into place, and the directory is fsynced. A failed call
// leaves no temp files behind.
//
// Thread safety: every function is safe to call from any thread (OpenSSL 3 needs no locking
// set-up). Two calls that write the same files concurrently race as renames do: one wins.
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace steward {

// unique_ptr deleters for OpenSSL objects, so no error path leaks one.
template <auto FreeFn>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* p) const {
    FreeFn(p);
  }
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<X509_free>>;
using X509NamePtr = std::unique_ptr<X509_NAME, OpenSslDeleter<X509_NAME_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpenSslDeleter<X509_EXTENSION_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpenSslDeleter<X509_STORE_free>>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpenSslDeleter<X509_STORE_CTX_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslDeleter<GENERAL_NAMES_free>>;
using Asn1IntegerPtr = std::unique_ptr<ASN1_INTEGER, OpenSslDeleter<ASN1_INTEGER_free>>;
using Asn1OctetStringPtr =
    std::unique_ptr<ASN1_OCTET_STRING, OpenSslDeleter<ASN1_OCTET_STRING_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslDeleter<BN_free>>;
using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<BIO_free_all>>;

// File names CreateCa writes inside its directory.
inline constexpr char kCaCertFile[] = "ca.crt";
inline constexpr char kCaKeyFile[] = "ca.key";

// How long a CA made by CreateCa is valid.
inline constexpr std::chrono::seconds kCaLifetime =
    std::chrono::duration_cast<std::chrono::seconds>(std::chrono::years(10));

// notBefore is set this far before the issue time, so that a peer whose clock is a little behind
// accepts a freshly issued certificate.
inline constexpr std::chrono::seconds kClockSkewAllowance = std::chrono::minutes(5);

// Creates a new CA in `dir`: an EC P-256 key and a self-signed certificate for `common_name`,
// valid kCaLifetime (basicConstraints critical CA:TRUE, keyUsage critical keyCertSign+cRLSign,
// subjectKeyIdentifier). Writes dir/ca.key (0600) and dir/ca.crt (0644).
// REQUIRES: `dir` exists.
// AlreadyExists (naming the file) if either file exists: a CA is never overwritten, not even by a
// concurrent call (the final rename refuses to replace). On failure neither file is left behind.
absl::Status CreateCa(const std::string& dir, const std::string& common_name);

// What to put into an issued certificate.
struct CertRequest {
  std::string common_name;  // subject CN; required (TLS peers match the SANs)
  // Put common_name into the subject's O instead of its CN, leaving no CN: etcd 3.4 refuses a
  // certificate with a CN on its HTTP gateway once authentication is on (gateway clients such
  // as Patroni authenticate with a user name and password instead).
  bool name_in_organization = false;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries, IPv4 or IPv6 literals
  // subjectAltName URI entries: etcd-steward's roles (steward://<cluster>/agent/<node>,
  // steward://operator), which the agent API checks before it obeys an order.
  std::vector<std::string> uris;
  bool server_auth = false;          // extendedKeyUsage serverAuth; needs at least one SAN
  bool client_auth = false;          // extendedKeyUsage clientAuth
  std::chrono::seconds lifetime{0};  // notAfter = issue time + lifetime; must be positive
  // The issue time; unset means now. Tests set it to place the validity window (in the past for
  // an expired certificate, in the future for one not yet valid).
  std::optional<std::chrono::system_clock::time_point> issue_time;
};

// Issues a certificate for `req` signed by the CA in ca_cert_path/ca_key_path, with a new EC P-256
// key and a random 128-bit serial; notBefore = issue time - kClockSkewAllowance, notAfter = issue
// time + lifetime, but never after the CA's own notAfter (a certificate cannot outlive its CA;
// NeedsRenewal then triggers the renewal early). Extensions: basicConstraints CA:FALSE, keyUsage
// digitalSignature, extendedKeyUsage as requested, subjectAltName, subject and authority key IDs.
// Writes key_path (0600) and cert_path (0644), replacing existing files: both are fully written
// and fsynced before either is renamed into place, so a failure leaves the old pair intact
// (only a failing rename between the two can leave a mismatched pair; a retry repairs it).
// Errors: InvalidArgument for a bad request (names the field) or a CA that does not fit its key;
// PermissionDenied if the CA key file is accessible by group or others (names the file and
// mode); NotFound if a CA file is missing.
absl::Status IssueCert(const std::string& ca_cert_path, const std::string& ca_key_path,
                       const CertRequest& req, const std::string& cert_path,
                       const std::string& key_path);

// What ReadCert reports about a certificate.
struct CertInfo {
  std::string subject;                    // RFC 2253, e.g. "CN=steward-admin"
  std::string common_name;                // the subject's CN ("" if none): etcd's user name
  std::vector<std::string> dns_names;     // subjectAltName DNS entries, in order
  std::vector<std::string> ip_addresses;  // subjectAltName IPs, canonical text ("::1")
  std::vector<std::string> uris;          // subjectAltName URIs, in order
  // Whole seconds. A date beyond system_clock's range (year 2262) reads as time_point::max().
  std::chrono::system_clock::time_point not_before, not_after;
};

// Reads the first certificate of the PEM file at `path`.
// NotFound if the file does not exist; InvalidArgument if it holds no PEM certificate.
absl::StatusOr<CertInfo> ReadCert(const std::string& path);

// Checks operator-supplied files before they are used for a TLS server on `host` (an IP literal
// or a DNS name), as of `now`. Each failure names the file and the problem:
//   NotFound          a file does not exist;
//   InvalidArgument   a file is not a PEM certificate / private key; the key does not match the
//                     certificate; the certificate does not cover `host` (the subject CN is not
//                     consulted, as Go's TLS does not); it does not chain to a certificate in
//                     `ca_path` (checked as of `now`, for the TLS server purpose, so a missing
//                     serverAuth usage fails here);
//   PermissionDenied  the key file is accessible by group or others (the message gives the mode);
//   FailedPrecondition the certificate is expired or not yet valid at `now` (gives the dates).
// `cert_path` may hold intermediates after the leaf; `ca_path` may hold several CAs, each of which
// is trusted (as etcd's --trusted-ca-file is).
// REQUIRES: `host` is not empty.
absl::Status CheckCertFiles(const std::string& cert_path, const std::string& key_path,
                            const std::string& ca_path, const std::string& host,
                            std::chrono::system_clock::time_point now);

// For a planned CA bundle (a CA rotation, `stewardctl pki check --bundle`): every certificate
// in `bundle_path` must be a CA (basicConstraints CA:TRUE) and valid at `now`. Returns each
// one's subject and notAfter ("CN=x, until 2036-01-01 00:00:00 UTC"), or InvalidArgument /
// FailedPrecondition naming the certificate that is not.
absl::StatusOr<std::vector<std::string>> CheckCaBundle(const std::string& bundle_path,
                                                       std::chrono::system_clock::time_point now);
// Whether the certificate in `cert_path` (intermediates after it) chains, at `now`, to a
// certificate in `bundle_path`, for any TLS use (as a trust file accepts it). OK with the
// subject of the anchor it chains to; InvalidArgument saying why not.
absl::StatusOr<std::string> ChainsTo(const std::string& cert_path, const std::string& bundle_path,
                                     std::chrono::system_clock::time_point now);

// True once two thirds of [not_before, not_after] have passed (so also when expired), or when the
// window is empty. False before not_before: such a certificate is not valid, but renewing it
// would not help.
bool NeedsRenewal(const CertInfo& cert, std::chrono::system_clock::time_point now);
// The first instant at which NeedsRenewal(cert, t) holds (whole seconds; time_point::min() for
// an empty window).
std::chrono::system_clock::time_point RenewalTime(const CertInfo& cert);

// Roles, carried as subjectAltName URIs. An agent of cluster C on node N holds AgentRoleUri(C, N);
// the operator's certificate (stewardctl pki init) holds kOperatorRoleUri.
inline constexpr char kOperatorRoleUri[] = "steward://operator";
std::string AgentRoleUri(const std::string& cluster, const std::string& node);
// The agent of `cluster` named in the PEM certificate `pem`, or an error that says what the
// certificate holds instead (PermissionDenied).
absl::StatusOr<std::string> AgentOfCluster(const std::string& pem, const std::string& cluster);
// OK if the PEM certificate `pem` holds kOperatorRoleUri or an agent role of `cluster`; else
// PermissionDenied saying what it holds.
absl::Status OperatorOrAgentOf(const std::string& pem, const std::string& cluster);

// Loaders for the PEM files above, for callers (and tests) that hand them to OpenSSL.
// NotFound if the file does not exist; InvalidArgument if it holds no PEM certificate / key.
absl::StatusOr<X509Ptr> LoadCert(const std::string& path);
absl::StatusOr<EvpPkeyPtr> LoadPrivateKey(const std::string& path);

}  // namespace steward
