// A node's TLS files: issued by the agent from the operator's CA (tls.mode: issued), or the
// operator's own, checked (tls.mode: files). Run before etcd or the agent API starts.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "grpcpp/grpcpp.h"

namespace steward {

// issued: issues every missing, unreadable, expiring (two-thirds of its lifetime passed) or
// foreign-CA certificate under <data_dir>/tls (keys 0600) and copies the CA certificate there.
// files: checks the operator's files and says which check failed for which file.
// Returns InvalidArgument/FailedPrecondition/NotFound/PermissionDenied naming the file.
absl::Status PrepareNodeTls(const Config& config);

// The common name of the client certificate an agent on `node` is issued (tls.mode issued):
// its etcd user when auth.mode is on.
std::string ClientCommonName(const std::string& node);

struct CertExpiry {
  std::string role;       // server, peer, agent, client, ca (as in the expiry metric)
  int64_t not_after = 0;  // Unix seconds
};

// This node's certificates that can be read (none with TLS off): the status page, the metrics
// and the node's state for `stewardctl pki check-expiration`.
std::vector<CertExpiry> NodeCertExpiries(const Config& config);

// issued only: renews what is due. Returns true if anything was reissued. etcd reads its
// certificate files on every new TLS handshake, so renewed files apply without a restart.
absl::StatusOr<bool> RenewNodeTls(const Config& config, std::chrono::system_clock::time_point now);

// RenewNodeTls for a loop that asks every minute: the full check parses and verifies every
// certificate (OpenSSL's X.509 code, megabytes of pages an idle agent otherwise leaves alone),
// so it runs only when one of the files changed (by stat), when the earliest certificate
// falls due, or an hour after the last full check. Not thread-safe; `config` must outlive it.
class NodeTlsRenewer {
 public:
  explicit NodeTlsRenewer(const Config& config) : config_(config) {}
  // As RenewNodeTls. A failure is retried in full at the next call.
  absl::StatusOr<bool> Check(std::chrono::system_clock::time_point now);
  // How many full checks have run (for tests).
  int full_checks() const { return full_checks_; }

 private:
  std::string FilesStamp() const;

  const Config& config_;
  std::string stamp_;  // the files' stat at the last full check; "" forces one
  std::chrono::system_clock::time_point due_;
  std::chrono::steady_clock::time_point next_sweep_;
  int full_checks_ = 0;
};

// gRPC credentials from PEM files: a client that presents `cert` (none when `cert` and `key`
// are empty) and trusts `ca`; a server that
// presents `cert` and requires clients to present a certificate signed by `ca`.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const std::string& ca, const std::string& cert, const std::string& key);
// Which credentials dial an etcd `endpoint`: the agents' own for the configured nodes' URLs;
// while adopting (cluster.adopt), an adopted member's URL goes in plain text (http://), with
// cluster.adopt's files when given, else with the agents' own.
enum class EndpointCredentials { kOwn, kAdopt, kPlain };
EndpointCredentials CredentialsFor(const Config& config, const std::string& endpoint);
// The same as a function for EtcdClient::Options::credentials_for; `own` null means plain text.
absl::StatusOr<std::function<std::shared_ptr<grpc::ChannelCredentials>(const std::string&)>>
ClusterCredentials(const Config& config, std::shared_ptr<grpc::ChannelCredentials> own);
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentials(
    const std::string& ca, const std::string& cert, const std::string& key);

}  // namespace steward
