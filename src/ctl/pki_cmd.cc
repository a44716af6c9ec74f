#include "ctl/pki_cmd.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "absl/status/status.h"
#include "common/files.h"
#include "pki/pki.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

constexpr char kAdminCommonName[] = "steward-admin";
constexpr char kCaCommonName[] = "etcd-steward CA";
constexpr std::chrono::seconds kAdminLifetime =
    std::chrono::duration_cast<std::chrono::seconds>(std::chrono::years(1));

bool IsPlain(const std::string& s) {
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == ',';
    if (!ok) return false;
  }
  return !s.empty();
}

// The printed lines are meant to be pasted, so a path with spaces or quotes is quoted: for a
// POSIX shell, and for YAML (single quotes, '' inside).
std::string ShellQuote(const std::string& s) {
  if (IsPlain(s)) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string YamlQuote(const std::string& s) {
  if (IsPlain(s)) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string DateOf(std::chrono::system_clock::time_point t) {
  time_t tt = std::chrono::system_clock::to_time_t(t);
  struct tm tm;
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

int RunPkiInit(const std::string& dir_arg, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  const fs::path abs = fs::absolute(dir_arg, ec);
  if (ec) {
    err << "stewardctl pki init: resolving " << dir_arg << ": " << ec.message() << "\n";
    return 1;
  }
  const std::string dir = abs.lexically_normal().string();
  // The CA key is 0600 either way; a private directory also hides which files exist.
  if (auto s = MakeDirs(dir, 0700); !s.ok()) {
    err << "stewardctl pki init: " << s.message() << "\n";
    return 1;
  }
  const std::string ca_cert = (fs::path(dir) / kCaCertFile).string();
  const std::string ca_key = (fs::path(dir) / kCaKeyFile).string();
  const std::string admin_cert = (fs::path(dir) / "admin.crt").string();
  const std::string admin_key = (fs::path(dir) / "admin.key").string();

  if (auto s = CreateCa(dir, kCaCommonName); !s.ok()) {
    if (absl::IsAlreadyExists(s)) {
      err << "stewardctl pki init: refusing to overwrite the CA in " << dir << " (" << s.message()
          << ")\n";
    } else {
      err << "stewardctl pki init: " << s.message() << "\n";
    }
    return 1;
  }
  CertRequest req;
  req.common_name = kAdminCommonName;
  req.client_auth = true;
  // The operator's role: etcdctl and stewardctl may read, but the agent API refuses orders
  // from it (they come only from agents, whose certificates carry the agent role).
  req.uris = {kOperatorRoleUri};
  req.lifetime = kAdminLifetime;
  if (auto s = IssueCert(ca_cert, ca_key, req, admin_cert, admin_key); !s.ok()) {
    err << "stewardctl pki init: created the CA in " << dir
        << ", but not the admin certificate: " << s.message() << "\n";
    return 1;
  }
  std::string valid_until = "?";
  if (auto info = ReadCert(admin_cert); info.ok()) valid_until = DateOf(info->not_after);

  out << "Created a CA in " << dir << " (" << kCaCertFile << ", " << kCaKeyFile
      << ") and an admin client certificate (admin.crt, admin.key, valid until " << valid_until
      << ").\n"
      << "Keep " << kCaKeyFile << " secret: whoever holds it can join the cluster.\n\n"
      << "Config section for every node (copy both CA files to each node, ca.key with mode "
         "0600):\n\n"
      << "tls:\n"
      << "  mode: issued\n"
      << "  ca_cert: " << YamlQuote(ca_cert) << "\n"
      << "  ca_key: " << YamlQuote(ca_key) << "\n\n"
      << "etcdctl flags:\n\n"
      << "  --cacert " << ShellQuote(ca_cert) << " --cert " << ShellQuote(admin_cert) << " --key "
      << ShellQuote(admin_key) << "\n";
  return 0;
}

int RunPkiInit(const std::string& dir) { return RunPkiInit(dir, std::cout, std::cerr); }

int RunPkiIssueClient(const std::string& dir, const std::string& name,
                      const PkiIssueOptions& options, std::ostream& out, std::ostream& err) {
  const bool valid =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
      });
  if (!valid || name == "ca" || name == "admin" || name == "root") {
    err << "stewardctl pki issue: --client \"" << name
        << "\" must be 1-64 letters, digits, '-', '_' or '.', and not ca, admin or root\n";
    return 2;
  }
  const std::string ca_cert = (fs::path(dir) / "ca.crt").string();
  const std::string ca_key = (fs::path(dir) / "ca.key").string();
  const std::string cert = (fs::path(dir) / (name + ".crt")).string();
  const std::string key = (fs::path(dir) / (name + ".key")).string();
  std::error_code ec;
  const bool exists = fs::exists(cert, ec);
  if (exists && !options.renew) {
    err << "stewardctl pki issue: refusing to overwrite " << cert << " (--renew replaces it)\n";
    return 1;
  }
  if (!exists && options.renew) {
    err << "stewardctl pki issue: --renew: there is no " << cert << " to renew\n";
    return 1;
  }
  if (exists) {
    // A renewal keeps the kind: a gateway certificate that grew a CN would be refused by etcd.
    auto old = ReadCert(cert);
    if (!old.ok()) {
      err << "stewardctl pki issue: --renew: " << old.status().message() << "\n";
      return 1;
    }
    if (old->common_name.empty() != options.gateway) {
      err << "stewardctl pki issue: --renew: " << cert << " is "
          << (old->common_name.empty() ? "a gateway certificate (no CN): add --gateway"
                                       : "a CN certificate: drop --gateway")
          << "\n";
      return 1;
    }
  }
  CertRequest req;
  req.common_name = name;
  req.name_in_organization = options.gateway;
  req.client_auth = true;
  req.lifetime = kAdminLifetime;
  if (auto s = IssueCert(ca_cert, ca_key, req, cert, key); !s.ok()) {
    err << "stewardctl pki issue: " << s.message() << "\n";
    return 1;
  }
  std::string valid_until = "?";
  if (auto info = ReadCert(cert); info.ok()) valid_until = DateOf(info->not_after);
  out << (exists ? "renewed" : "issued") << " the client certificate " << ShellQuote(cert)
      << " and its key " << ShellQuote(key) << " (" << (options.gateway ? "O " : "CN ") << name
      << ", valid until " << valid_until << ")\n"
      << "for a Kubernetes API server: --etcd-cafile " << ShellQuote(ca_cert) << " --etcd-certfile "
      << ShellQuote(cert) << " --etcd-keyfile " << ShellQuote(key) << "\n";
  return 0;
}

}  // namespace steward
