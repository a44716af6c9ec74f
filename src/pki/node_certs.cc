#include "pki/node_certs.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/status.h"
#include "pki/ca_rotation.h"
#include "pki/pki.h"

namespace steward {

std::string ClientCommonName(const std::string& node) { return absl::StrCat(node, "-client"); }

namespace {
namespace fs = std::filesystem;

bool IsIp(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

struct Role {
  const char* name;
  std::string cert, key;
  bool server;
};

std::vector<Role> Roles(const TlsPaths& p) {
  return {{"server", p.server_cert, p.server_key, true},
          {"peer", p.peer_cert, p.peer_key, true},
          {"agent", p.agent_cert, p.agent_key, true},
          {"client", p.client_cert, p.client_key, false}};
}

CertRequest RequestFor(const Config& c, const Role& r) {
  CertRequest req;
  const NodeSpec& self = c.self();
  req.common_name = r.server ? self.name : ClientCommonName(self.name);
  req.dns_names = {self.name, "localhost"};
  req.ip_addresses = {"127.0.0.1"};
  if (IsIp(self.host)) {
    if (self.host != "127.0.0.1") req.ip_addresses.push_back(self.host);
  } else {
    req.dns_names.push_back(self.host);
  }
  if (r.server) {
    for (const std::string& san : c.tls.extra_sans) {
      auto& list = IsIp(san) ? req.ip_addresses : req.dns_names;
      if (std::find(list.begin(), list.end(), san) == list.end()) list.push_back(san);
    }
  }
  // etcd dials its own and its peers' URLs with the same certificate: serve and be a client.
  req.server_auth = r.server;
  req.client_auth = true;
  // Every certificate of the node carries its role: the agent API obeys orders only from it.
  req.uris = {AgentRoleUri(c.cluster.name, self.name)};
  req.lifetime = std::chrono::duration_cast<std::chrono::seconds>(c.tls.cert_lifetime);
  return req;
}

// Is the issued certificate for `r` usable as it is (present, ours, from the CA at
// `issuer_cert`, not due)?
bool Current(const Config& c, const std::string& issuer_cert, const Role& r,
             std::chrono::system_clock::time_point now) {
  auto info = ReadCert(r.cert);
  if (!info.ok() || NeedsRenewal(*info, now)) return false;
  // Issued before certificates carried roles: issue again.
  const std::string role = AgentRoleUri(c.cluster.name, c.self().name);
  if (std::find(info->uris.begin(), info->uris.end(), role) == info->uris.end()) return false;
  // From another CA (tls.ca_cert changed, or a CA rotation's phase 2): issue again.
  if (!ChainsTo(r.cert, issuer_cert, now).ok()) return false;
  if (!r.server) return fs::exists(r.key);
  // tls.extra_sans changed: issue again with them.
  for (const std::string& san : c.tls.extra_sans) {
    const auto& have = IsIp(san) ? info->ip_addresses : info->dns_names;
    if (std::find(have.begin(), have.end(), san) == have.end()) return false;
  }
  return CheckCertFiles(r.cert, r.key, issuer_cert, c.self().host, now).ok();
}

absl::StatusOr<bool> Issue(const Config& c, std::chrono::system_clock::time_point now) {
  const TlsPaths p = c.Tls();
  if (absl::Status s = MakeDirs(fs::path(p.ca).parent_path().string(), 0700); !s.ok()) return s;
  // What the node trusts is its own file (the operator's may live elsewhere): tls.ca_cert's
  // CA, or during a CA rotation the old and the new one (ca_rotation.h).
  auto trust = TrustFor(c);
  if (!trust.ok()) return trust.status();
  auto have = ReadFile(p.ca);
  if (!have.ok() || *have != trust->trusted_pem) {
    if (absl::Status s = WriteFileAtomic(p.ca, trust->trusted_pem, 0644); !s.ok()) return s;
  }
  bool issued = false;
  for (const Role& r : Roles(p)) {
    // Reissue only what is missing, from another CA, or due (two-thirds of its lifetime gone).
    if (Current(c, trust->issuer_cert, r, now)) continue;
    if (absl::Status s =
            IssueCert(trust->issuer_cert, trust->issuer_key, RequestFor(c, r), r.cert, r.key);
        !s.ok()) {
      return Annotate(s, absl::StrCat("issuing the ", r.name, " certificate"));
    }
    issued = true;
  }
  return issued;
}

}  // namespace

absl::Status PrepareNodeTls(const Config& c) {
  if (!c.tls.enabled()) return absl::OkStatus();
  const auto now = std::chrono::system_clock::now();
  if (c.tls.mode == "issued") return Issue(c, now).status();
  const TlsPaths p = c.Tls();
  const std::string host = c.self().host;
  if (absl::Status s = CheckCertFiles(p.server_cert, p.server_key, p.ca, host, now); !s.ok()) {
    return Annotate(s, "tls.cert_file");
  }
  if (absl::Status s = CheckCertFiles(p.peer_cert, p.peer_key, p.ca, host, now); !s.ok()) {
    return Annotate(s, "tls.peer_cert_file");
  }
  // The client certificate needs no server role or host: check it parses, matches, is current.
  auto info = ReadCert(p.client_cert);
  if (!info.ok()) return Annotate(info.status(), "tls.client_cert_file");
  if (now > info->not_after) {
    return absl::FailedPreconditionError(
        absl::StrCat("tls.client_cert_file: ", p.client_cert, " has expired"));
  }
  auto key = LoadPrivateKey(p.client_key);
  if (!key.ok()) return Annotate(key.status(), "tls.client_key_file");
  if (auto cert = LoadCert(p.client_cert);
      !cert.ok() || X509_check_private_key(cert->get(), key->get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.client_key_file: the client key does not match ", p.client_cert));
  }
  struct stat st;
  if (::stat(p.client_key.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "tls.client_key_file: %s is accessible by group or others (mode %04o); chmod 600 it",
        p.client_key, st.st_mode & 07777));
  }
  // Other agents obey this agent's orders only if its client certificate says it is one.
  const std::string role = AgentRoleUri(c.cluster.name, c.self().name);
  if (std::find(info->uris.begin(), info->uris.end(), role) == info->uris.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls.client_cert_file: ", p.client_cert, " lacks the subjectAltName URI ", role,
        ": the other agents would refuse this agent's orders (add it when issuing the "
        "certificate)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RenewNodeTls(const Config& c, std::chrono::system_clock::time_point now) {
  if (c.tls.mode != "issued") return false;
  return Issue(c, now);
}

std::string NodeTlsRenewer::FilesStamp() const {
  const TlsPaths p = config_.Tls();
  std::vector<std::string> files = {config_.tls.ca_cert, p.ca};
  for (const Role& r : Roles(p)) {
    files.push_back(r.cert);
    files.push_back(r.key);
  }
  std::string out;
  for (const std::string& f : files) {
    struct stat st;
    if (::stat(f.c_str(), &st) != 0) {
      absl::StrAppend(&out, "-;");
      continue;
    }
    absl::StrAppend(&out, st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                    st.st_mtim.tv_nsec, ";");
  }
  return out;
}

absl::StatusOr<bool> NodeTlsRenewer::Check(std::chrono::system_clock::time_point now) {
  if (config_.tls.mode != "issued") return false;
  const auto steady = std::chrono::steady_clock::now();
  if (!stamp_.empty() && now < due_ && steady < next_sweep_ && FilesStamp() == stamp_) {
    return false;
  }
  ++full_checks_;
  stamp_.clear();
  auto renewed = RenewNodeTls(config_, now);
  if (!renewed.ok()) return renewed;
  // The earliest certificate's renewal time; one that does not parse is looked at again next.
  due_ = std::chrono::system_clock::time_point::max();
  for (const Role& r : Roles(config_.Tls())) {
    auto info = ReadCert(r.cert);
    due_ = std::min(due_, info.ok() ? RenewalTime(*info) : now);
  }
  next_sweep_ = steady + std::chrono::hours(1);
  stamp_ = FilesStamp();
  return renewed;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const std::string& ca, const std::string& cert, const std::string& key) {
  grpc::SslCredentialsOptions o;
  auto a = ReadFile(ca);
  if (!a.ok()) return Annotate(a.status(), "CA certificate");
  o.pem_root_certs = *a;
  if (cert.empty() && key.empty()) return grpc::SslCredentials(o);  // no client certificate
  auto c = ReadFile(cert);
  if (!c.ok()) return Annotate(c.status(), "client certificate");
  auto k = ReadFile(key);
  if (!k.ok()) return Annotate(k.status(), "client key");
  o.pem_cert_chain = *c;
  o.pem_private_key = *k;
  return grpc::SslCredentials(o);
}

EndpointCredentials CredentialsFor(const Config& config, const std::string& endpoint) {
  const AdoptConfig& a = config.cluster.adopt;
  if (!a.enabled()) return EndpointCredentials::kOwn;
  // The nodes' own etcd URLs (client and fence) carry the agents' TLS.
  for (const auto& n : config.cluster.nodes) {
    if (endpoint == config.ClientUrl(n) || endpoint == config.FenceUrl(n)) {
      return EndpointCredentials::kOwn;
    }
  }
  // Anything else is one of the adopted cluster's members: its URLs as the member list has them.
  if (endpoint.rfind("http://", 0) == 0) return EndpointCredentials::kPlain;
  if (!a.ca_file.empty()) return EndpointCredentials::kAdopt;
  return EndpointCredentials::kOwn;
}

absl::StatusOr<std::function<std::shared_ptr<grpc::ChannelCredentials>(const std::string&)>>
ClusterCredentials(const Config& config, std::shared_ptr<grpc::ChannelCredentials> own) {
  std::shared_ptr<grpc::ChannelCredentials> adopt;
  const AdoptConfig& a = config.cluster.adopt;
  if (!a.ca_file.empty()) {
    auto c = TlsChannelCredentials(a.ca_file, a.cert_file, a.key_file);
    if (!c.ok()) return Annotate(c.status(), "cluster.adopt");
    adopt = *c;
  }
  if (!own) own = grpc::InsecureChannelCredentials();
  auto plain = grpc::InsecureChannelCredentials();
  return [config, own, adopt, plain](const std::string& endpoint) {
    switch (CredentialsFor(config, endpoint)) {
      case EndpointCredentials::kAdopt:
        return adopt;
      case EndpointCredentials::kPlain:
        return plain;
      case EndpointCredentials::kOwn:
        break;
    }
    return own;
  };
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentials(
    const std::string& ca, const std::string& cert, const std::string& key) {
  auto a = ReadFile(ca);
  if (!a.ok()) return Annotate(a.status(), "CA certificate");
  auto c = ReadFile(cert);
  if (!c.ok()) return Annotate(c.status(), "agent certificate");
  auto k = ReadFile(key);
  if (!k.ok()) return Annotate(k.status(), "agent key");
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = *a;
  o.pem_key_cert_pairs.push_back({*k, *c});
  return grpc::SslServerCredentials(o);
}

std::vector<CertExpiry> NodeCertExpiries(const Config& config) {
  std::vector<CertExpiry> out;
  if (!config.tls.enabled()) return out;
  const TlsPaths t = config.Tls();
  const std::pair<const char*, std::string> certs[] = {{"server", t.server_cert},
                                                       {"peer", t.peer_cert},
                                                       {"agent", t.agent_cert},
                                                       {"client", t.client_cert},
                                                       {"ca", t.ca}};
  for (const auto& [role, path] : certs) {
    if (auto info = ReadCert(path); info.ok()) {
      out.push_back({role, std::chrono::duration_cast<std::chrono::seconds>(
                               info->not_after.time_since_epoch())
                               .count()});
    }
  }
  return out;
}

}  // namespace steward
