// The config's backup, tls, auth and cluster.adopt sections (the rest is in config.cc).
#include "config/sections.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "common/files.h"
#include "config/aws_credentials.h"
#include "config/encryption_key.h"
#include "config/parse_util.h"
#include "config/schema.h"

namespace steward::config_internal {

// backup.retention: how long every backup, then hourly and daily ones, are kept.
void ParseRetention(const YAML::Node& r, BackupConfig& bc) {
  if (!r || r.IsNull()) return;
  CheckKeys(r, "backup.retention", ConfigKeysUnder("backup.retention"));
  bc.retention.keep_all_for =
      GetDuration(r, "backup.retention", "keep_all_for", bc.retention.keep_all_for);
  bc.retention.hourly_for =
      GetDuration(r, "backup.retention", "hourly_for", bc.retention.hourly_for);
  bc.retention.daily_for = GetDuration(r, "backup.retention", "daily_for", bc.retention.daily_for);
}

// backup.s3: the S3-compatible store's endpoint and credentials (as given; the environment
// and the shared credentials file fill them in later: CheckS3Store).
void ParseS3Keys(const YAML::Node& s, BackupConfig& bc) {
  if (!s || s.IsNull()) return;
  CheckKeys(s, "backup.s3", ConfigKeysUnder("backup.s3"));
  bc.s3.endpoint = GetString(s, "backup.s3", "endpoint", false, "");
  bc.s3.region = GetString(s, "backup.s3", "region", false, "");
  bc.s3.path_style = GetBool(s, "backup.s3", "path_style", false);
  bc.s3.access_key_id = GetString(s, "backup.s3", "access_key_id", false, "");
  bc.s3.secret_access_key = GetString(s, "backup.s3", "secret_access_key", false, "");
  bc.s3.session_token = GetString(s, "backup.s3", "session_token", false, "");
  bc.s3.profile = GetString(s, "backup.s3", "profile", false, "");
  bc.s3.ca_file = GetString(s, "backup.s3", "ca_file", false, "");
}

// backup.encryption: the key, and the old keys that still decrypt older backups.
void ParseEncryption(const YAML::Node& e, BackupConfig& bc) {
  if (!e || e.IsNull()) return;
  const std::string p = "backup.encryption";
  CheckKeys(e, p, ConfigKeysUnder(p));
  bc.encryption.key_file = GetString(e, p, "key_file", true, "");
  if (const YAML::Node old = e["old_key_files"]; old && !old.IsNull()) {
    if (!old.IsSequence()) Fail(p + ".old_key_files", "must be a list of key files");
    for (size_t i = 0; i < old.size(); ++i) {
      if (!old[i].IsScalar() || old[i].Scalar().empty()) {
        Fail(absl::StrCat(p, ".old_key_files[", i, "]"), "must be a file name");
      }
      bc.encryption.old_key_files.push_back(old[i].Scalar());
    }
  }
  // The key is needed by every backup and restore: a bad one is a config error now, not
  // a failed backup at 3 a.m. (Only where the agent runs: stewardctl may lack the file.)
  if (t_host_checks) {
    if (auto k = LoadEncryptionKey(bc.encryption.key_file); !k.ok()) {
      Fail(p + ".key_file", std::string(k.status().message()));
    }
    for (size_t i = 0; i < bc.encryption.old_key_files.size(); ++i) {
      if (auto k = LoadEncryptionKey(bc.encryption.old_key_files[i]); !k.ok()) {
        Fail(absl::StrCat(p, ".old_key_files[", i, "]"), std::string(k.status().message()));
      }
    }
  }
}

// S3 credentials missing from the config, from the shared credentials file, as the AWS CLI
// and SDKs read it (backup.s3.profile, AWS_PROFILE, or "default").
void SharedS3Credentials(BackupConfig& bc) {
  const bool named = !bc.s3.profile.empty() || !EnvOr("AWS_PROFILE", "").empty();
  const std::string profile =
      !bc.s3.profile.empty() ? bc.s3.profile : EnvOr("AWS_PROFILE", "default");
  const std::string path = SharedCredentialsPath();
  auto text =
      path.empty() ? absl::StatusOr<std::string>(absl::NotFoundError("no $HOME")) : ReadFile(path);
  if (text.ok()) {
    auto creds = ParseSharedCredentials(*text, profile, path);
    if (creds.ok()) {
      bc.s3.access_key_id = creds->access_key_id;
      bc.s3.secret_access_key = creds->secret_access_key;
      if (bc.s3.session_token.empty()) bc.s3.session_token = creds->session_token;
    } else if (named || !absl::IsNotFound(creds.status())) {
      Fail(bc.s3.profile.empty() ? "backup.s3" : "backup.s3.profile",
           std::string(creds.status().message()));
    }
  } else if (named) {
    Fail(bc.s3.profile.empty() ? "backup.s3" : "backup.s3.profile",
         absl::StrCat("profile ", profile, ": cannot read the shared credentials file ",
                      path.empty() ? "(no $HOME)" : path, ": ", text.status().message()));
  }
}

// An s3:// store: a bucket, a region, and credentials from the config, the environment or
// the shared credentials file; a CA file that holds a certificate.
void CheckS3Store(BackupConfig& bc) {
  std::string rest = bc.store.substr(5);
  if (rest.empty() || rest[0] == '/')
    Fail("backup.store", "an S3 store needs a bucket: s3://bucket/prefix");
  if (bc.s3.region.empty())
    bc.s3.region = EnvOr("AWS_DEFAULT_REGION", EnvOr("AWS_REGION", "us-east-1"));
  if (bc.s3.access_key_id.empty()) bc.s3.access_key_id = EnvOr("AWS_ACCESS_KEY_ID", "");
  if (bc.s3.secret_access_key.empty()) bc.s3.secret_access_key = EnvOr("AWS_SECRET_ACCESS_KEY", "");
  if (bc.s3.session_token.empty()) bc.s3.session_token = EnvOr("AWS_SESSION_TOKEN", "");
  if (bc.s3.access_key_id.empty() || bc.s3.secret_access_key.empty()) SharedS3Credentials(bc);
  if (bc.s3.access_key_id.empty() || bc.s3.secret_access_key.empty()) {
    Fail("backup.s3",
         "no credentials: set backup.s3.access_key_id/secret_access_key, "
         "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a profile in the shared "
         "credentials file (backup.s3.profile or AWS_PROFILE)");
  }
  if (!bc.s3.ca_file.empty() && t_host_checks) {
    auto pem = ReadFile(bc.s3.ca_file);
    if (!pem.ok()) {
      Fail("backup.s3.ca_file", std::string(pem.status().message()));
    } else if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      Fail("backup.s3.ca_file", absl::StrCat(bc.s3.ca_file, " holds no PEM certificate"));
    }
  }
}

void ParseBackup(const YAML::Node& b, Config* c) {
  BackupConfig& bc = c->backup;
  if (b && !b.IsNull()) {
    CheckKeys(b, "backup", ConfigKeysUnder("backup"));
    bc.store = GetString(b, "backup", "store", false, "");
    bc.interval = GetDuration(b, "backup", "interval", bc.interval);
    bc.before_change_min_interval =
        GetDuration(b, "backup", "before_change_min_interval", bc.before_change_min_interval);
    bc.auto_restore = GetBool(b, "backup", "auto_restore", bc.auto_restore);
    bc.delta_interval = GetDuration(b, "backup", "delta_interval", bc.delta_interval);
    bc.drill_interval = GetDuration(b, "backup", "drill_interval", bc.drill_interval);
    bc.drill_scratch = GetString(b, "backup", "drill_scratch", false, "");
    bc.low_memory_stream = GetBool(b, "backup", "low_memory_stream", bc.low_memory_stream);
    ParseRetention(b["retention"], bc);
    ParseS3Keys(b["s3"], bc);
    ParseEncryption(b["encryption"], bc);
  }
  if (bc.interval < std::chrono::seconds(1)) Fail("backup.interval", "must be at least 1s");
  if (bc.delta_interval.count() != 0 && bc.delta_interval < std::chrono::milliseconds(100)) {
    Fail("backup.delta_interval", "must be 0 (off) or at least 100ms");
  }
  if (bc.drill_interval.count() != 0 && bc.drill_interval < std::chrono::seconds(1)) {
    Fail("backup.drill_interval", "must be 0 (off) or at least 1s");
  }
  const std::pair<const char*, std::chrono::milliseconds> periods[] = {
      {"backup.retention.keep_all_for", bc.retention.keep_all_for},
      {"backup.retention.hourly_for", bc.retention.hourly_for},
      {"backup.retention.daily_for", bc.retention.daily_for}};
  for (const auto& [key, d] : periods) {
    if (d.count() <= 0) Fail(key, "must be greater than 0 (0 would prune good backups)");
  }
  if (bc.store.empty()) return;
  if (bc.store.rfind("file://", 0) == 0) {
    std::string dir = bc.store.substr(7);
    if (dir.empty() || dir[0] != '/') {
      Fail("backup.store", "a file store needs an absolute path: file:///path/to/dir");
    }
    CheckDataDir("backup.store", dir);
  } else if (bc.store.rfind("s3://", 0) == 0) {
    CheckS3Store(bc);
  } else {
    Fail("backup.store", absl::StrCat("\"", bc.store, "\" is not a file:// or s3:// URL"));
  }
}

void ParseAuth(const YAML::Node& a, Config* c) {
  AuthConfig& ac = c->auth;
  if (!a || a.IsNull()) return;
  CheckKeys(a, "auth", ConfigKeysUnder("auth"));
  ac.mode = GetString(a, "auth", "mode", false, ac.mode);
  if (ac.mode != "unmanaged" && ac.mode != "on" && ac.mode != "off") {
    Fail("auth.mode", absl::StrCat("\"", ac.mode, "\" is not one of unmanaged, on, off"));
  }
  if (const YAML::Node users = a["admin_users"]; users && !users.IsNull()) {
    if (!users.IsSequence()) Fail("auth.admin_users", "must be a list of certificate common names");
    ac.admin_users.clear();
    for (size_t i = 0; i < users.size(); ++i) {
      const std::string key = absl::StrCat("auth.admin_users[", i, "]");
      if (!users[i].IsScalar() || users[i].Scalar().empty()) {
        Fail(key, "must be a certificate common name");
      }
      if (users[i].Scalar() == "root") {
        Fail(key, "\"root\" is etcd's own root user, which etcd-steward keeps without a password");
      }
      ac.admin_users.push_back(users[i].Scalar());
    }
  }
  // etcd takes a client certificate's common name as the user: without TLS nobody could be
  // anybody, and the agents would be locked out.
  if (ac.mode == "on" && !c->tls.enabled()) {
    Fail("auth.mode",
         "on needs TLS (users are client certificates' common names); tls.mode is off");
  }
}

void ParseTls(const YAML::Node& t, Config* c) {
  TlsConfig& tc = c->tls;
  if (!t || t.IsNull()) {
    Fail("tls",
         "is required: give tls.ca_cert and tls.ca_key (see `stewardctl pki init`), "
         "or write tls.mode: off to run without TLS");
  }
  const std::string p = "tls";
  CheckKeys(t, p, ConfigKeysUnder(p));
  tc.mode = GetString(t, p, "mode", false, tc.mode);
  if (tc.mode != "issued" && tc.mode != "files" && tc.mode != "off") {
    Fail("tls.mode", absl::StrCat("\"", tc.mode, "\" is not one of issued, files, off"));
  }
  tc.cert_lifetime = GetDuration(t, p, "cert_lifetime", tc.cert_lifetime);
  if (tc.cert_lifetime < std::chrono::minutes(1)) Fail("tls.cert_lifetime", "must be at least 1m");
  if (const YAML::Node sans = t["extra_sans"]; sans && !sans.IsNull()) {
    if (!sans.IsSequence()) Fail("tls.extra_sans", "must be a list of DNS names or IP addresses");
    for (size_t i = 0; i < sans.size(); ++i) {
      const std::string key = absl::StrCat("tls.extra_sans[", i, "]");
      if (!sans[i].IsScalar() || sans[i].Scalar().empty())
        Fail(key, "must be a DNS name or an IP address");
      const std::string v = sans[i].Scalar();
      for (char ch : v) {
        if (!(absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
              ch == ':' || ch == '*')) {
          Fail(key, absl::StrCat("\"", v, "\" is not a DNS name or an IP address"));
        }
      }
      tc.extra_sans.push_back(v);
    }
    if (tc.mode != "issued") Fail("tls.extra_sans", "is only used with tls.mode: issued");
  }
  if (tc.mode == "issued") {
    tc.ca_cert = GetString(t, p, "ca_cert", true);
    tc.ca_key = GetString(t, p, "ca_key", true);
    CheckReadable("tls.ca_cert", tc.ca_cert);
    CheckReadable("tls.ca_key", tc.ca_key);
    struct stat st;
    if (t_host_checks && ::stat(tc.ca_key.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      Fail("tls.ca_key",
           absl::StrCat("\"", tc.ca_key, "\" is readable by others (mode ",
                        absl::StrFormat("%04o", st.st_mode & 07777), "); chmod 600 it"));
    }
  } else if (tc.mode == "files") {
    const char* keys[] = {"cert_file",       "key_file",         "peer_cert_file", "peer_key_file",
                          "trusted_ca_file", "client_cert_file", "client_key_file"};
    std::string* fields[] = {&tc.cert_file,      &tc.key_file,        &tc.peer_cert_file,
                             &tc.peer_key_file,  &tc.trusted_ca_file, &tc.client_cert_file,
                             &tc.client_key_file};
    for (size_t i = 0; i < 7; ++i) *fields[i] = GetString(t, p, keys[i], true);
  }
}

// cluster.adopt, after tls (an https endpoint needs credentials from one or the other).
void ParseAdopt(const YAML::Node& a, Config* c) {
  if (!a || a.IsNull()) return;
  const std::string p = "cluster.adopt";
  CheckKeys(a, p, ConfigKeysUnder(p));
  AdoptConfig& ac = c->cluster.adopt;
  const YAML::Node eps = a["endpoints"];
  if (!eps || eps.IsNull() || !eps.IsSequence() || eps.size() == 0) {
    Fail(p + ".endpoints", "must list the running cluster's client URLs (http(s)://host:port)");
  }
  std::set<std::string> ours;
  for (const auto& n : c->cluster.nodes) {
    ours.insert(absl::StrCat(n.host, ":", c->cluster.ports.client));
    ours.insert(absl::StrCat(n.host, ":", c->cluster.ports.peer));
    ours.insert(absl::StrCat(n.host, ":", c->cluster.ports.fence));
  }
  std::string scheme;
  for (size_t i = 0; i < eps.size(); ++i) {
    const std::string key = absl::StrCat(p, ".endpoints[", i, "]");
    if (!eps[i].IsScalar()) Fail(key, "must be a URL such as http://10.0.0.5:2379");
    const std::string url = eps[i].Scalar();
    const size_t colon = url.find("://");
    const std::string s = colon == std::string::npos ? "" : url.substr(0, colon);
    if (s != "http" && s != "https") {
      Fail(key, absl::StrCat("\"", url, "\" is not an http:// or https:// URL"));
    }
    const std::string hostport = url.substr(colon + 3);
    const size_t port_at = hostport.rfind(':');
    int port = 0;
    if (port_at == std::string::npos || port_at == 0 ||
        !absl::SimpleAtoi(hostport.substr(port_at + 1), &port) || port < 1 || port > 65535 ||
        !ValidHost(hostport.substr(0, port_at))) {
      Fail(key, absl::StrCat("\"", url, "\" needs a host and a port (http(s)://host:port)"));
    }
    if (!scheme.empty() && s != scheme) Fail(key, "mixes http and https with the other endpoints");
    scheme = s;
    if (ours.count(hostport)) {
      Fail(key, absl::StrCat("\"", url,
                             "\" is a configured node's own etcd URL; list the "
                             "running cluster's members (on other hosts or ports)"));
    }
    ac.endpoints.push_back(url);
  }
  ac.ca_file = GetString(a, p, "ca_file", false, "");
  ac.cert_file = GetString(a, p, "cert_file", false, "");
  ac.key_file = GetString(a, p, "key_file", false, "");
  if (ac.cert_file.empty() != ac.key_file.empty()) {
    Fail(p + (ac.cert_file.empty() ? ".cert_file" : ".key_file"),
         "cert_file and key_file go together");
  }
  if (!ac.cert_file.empty() && ac.ca_file.empty()) {
    Fail(p + ".ca_file",
         "is required with cert_file (the CA that signed the endpoints' certificates)");
  }
  for (const auto& [k, f] : {std::pair<const char*, std::string>{"ca_file", ac.ca_file},
                             {"cert_file", ac.cert_file},
                             {"key_file", ac.key_file}}) {
    if (f.empty()) continue;
    if (scheme != "https") Fail(p + "." + k, "is only used with https:// endpoints");
    CheckReadable(p + "." + k, f);
  }
  if (scheme == "https" && ac.ca_file.empty() && !c->tls.enabled()) {
    Fail(p + ".ca_file", "is required for https:// endpoints while tls.mode is off");
  }
}

}  // namespace steward::config_internal
