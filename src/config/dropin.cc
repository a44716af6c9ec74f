#include "config/dropin.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "yaml-cpp/yaml.h"

namespace steward {
namespace {

// etcd's settings a node config is built from (flag names without dashes).
const std::set<std::string>& Known() {
  static const std::set<std::string> k = {"name",
                                          "initial-cluster",
                                          "initial-cluster-token",
                                          "data-dir",
                                          "listen-client-urls",
                                          "advertise-client-urls",
                                          "listen-peer-urls",
                                          "initial-advertise-peer-urls",
                                          "cert-file",
                                          "key-file",
                                          "peer-cert-file",
                                          "peer-key-file",
                                          "trusted-ca-file",
                                          "peer-trusted-ca-file",
                                          "other-peers-client-urls"};
  return k;
}

// etcd settings the agent renders itself from the others: accepted, with a warning.
const std::set<std::string>& Rendered() {
  static const std::set<std::string> k = {"initial-cluster-state", "client-cert-auth",
                                          "peer-client-cert-auth"};
  return k;
}

struct Url {
  std::string scheme, host;
  int port = 0;
};

absl::StatusOr<Url> ParseUrl(const std::string& text) {
  Url u;
  const size_t sep = text.find("://");
  if (sep == std::string::npos) return absl::InvalidArgumentError("\"" + text + "\" is not a URL");
  u.scheme = text.substr(0, sep);
  std::string rest = text.substr(sep + 3);
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(rest.substr(colon + 1), &u.port)) {
    return absl::InvalidArgumentError("\"" + text + "\" has no port");
  }
  u.host = rest.substr(0, colon);
  if (u.host.size() > 2 && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.scheme != "http" && u.scheme != "https") {
    return absl::InvalidArgumentError("\"" + text + "\" is neither http nor https");
  }
  return u;
}

std::vector<std::string> List(const std::string& v) {
  return absl::StrSplit(v, ',', absl::SkipWhitespace());
}

absl::Status Bad(const EtcdStyle& s, const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(s.From(key), ": ", why));
}

}  // namespace

const std::string& EtcdStyle::Get(const std::string& key) const {
  static const std::string kEmpty;
  auto it = values.find(key);
  return it == values.end() ? kEmpty : it->second.value;
}

std::string EtcdStyle::From(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? "--" + key : it->second.from;
}

EtcdStyle EtcdStyleFromEnvironment(const std::map<std::string, std::string>& env) {
  EtcdStyle s;
  for (const auto& [name, value] : env) {
    if (name.rfind("ETCD_", 0) != 0 || name.rfind("ETCDCTL_", 0) == 0) continue;
    std::string key = absl::AsciiStrToLower(name.substr(5));
    std::replace(key.begin(), key.end(), '_', '-');
    if (Known().count(key)) {
      s.values[key] = {value, name};
    } else if (Rendered().count(key)) {
      s.warnings.push_back(name + " is ignored: steward renders it itself");
    } else {
      // Any other etcd setting is passed on as its flag (etcd.extra_args), where the config's
      // checks refuse the ones that would fight the agent.
      s.values["extra:" + key] = {value, name};
    }
  }
  return s;
}

absl::StatusOr<EtcdStyle> EtcdStyleFromWrapperFlags(const std::vector<std::string>& args) {
  // etcd-wrapper's flags. Those with no meaning here are accepted with a warning that says why.
  static const std::map<std::string, std::string> kIgnored = {
      {"backup-file", "steward names its backups itself (one directory per backup)"},
      {"tls-dir", "steward reads the TLS files where --cert-file and the others say"},
      {"healthcheck-interval", "the agent checks etcd on its own schedule"},
      {"pod-update-interval", "the agent rewrites the static pod only when etcd's flags change"},
  };
  static const std::set<std::string> kSteward = {"backup-dir",  "s3-backup-path", "backup-interval",
                                                 "image",       "pod-spec-file",  "etcd-servers",
                                                 "manifest-dir"};
  EtcdStyle s;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat("\"", a, "\" is not a flag"));
    }
    std::string key = a.substr(2), value;
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      value = args[++i];
    }
    const std::string flag = "--" + key;
    if (Known().count(key) && key != "other-peers-client-urls") {
      s.values[key] = {value, flag};
    } else if (key == "etcd-servers") {
      s.values["other-peers-client-urls"] = {value, flag};
    } else if (kSteward.count(key)) {
      s.values["steward:" + key] = {value, flag};
    } else if (auto it = kIgnored.find(key); it != kIgnored.end()) {
      s.warnings.push_back(absl::StrCat(flag, " is accepted and ignored: ", it->second));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", flag,
                       " (steward takes --config FILE, or etcd-wrapper's flags: "
                       "see docs/drop-in.md)"));
    }
  }
  return s;
}

namespace {

// The cluster as etcd's settings describe it: the nodes and their hosts, one peer port and one
// client port for every node, the scheme, and this node's entry.
struct EtcdStyleCluster {
  std::vector<std::pair<std::string, std::string>> nodes;  // name, host
  int peer_port = 0;
  int client_port = 2379;
  std::string scheme;
  std::string self_host;
};

// initial-cluster (and this node's advertised peer URL in it).
absl::Status ReadInitialCluster(const EtcdStyle& s, const std::string& name, EtcdStyleCluster* c) {
  // The nodes, their hosts and the peer port (one port for every node, as steward's config has).
  for (const std::string& entry : List(s.Get("initial-cluster"))) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    auto url = ParseUrl(kv.second);
    if (kv.first.empty() || !url.ok()) {
      return Bad(s, "initial-cluster", absl::StrCat("\"", entry, "\" is not name=URL"));
    }
    if (c->peer_port != 0 && url->port != c->peer_port) {
      return Bad(s, "initial-cluster",
                 "the peer ports differ between nodes; steward uses one peer port on every node");
    }
    c->peer_port = url->port;
    if (!c->scheme.empty() && url->scheme != c->scheme) {
      return Bad(s, "initial-cluster", "mixes http and https");
    }
    c->scheme = url->scheme;
    c->nodes.emplace_back(kv.first, url->host);
  }
  const auto self = std::find_if(c->nodes.begin(), c->nodes.end(),
                                 [&](const auto& n) { return n.first == name; });
  if (self == c->nodes.end()) {
    return Bad(s, "name", absl::StrCat("\"", name, "\" is not in ", s.From("initial-cluster")));
  }
  if (const std::string& adv = s.Get("initial-advertise-peer-urls"); !adv.empty()) {
    auto u = ParseUrl(List(adv).front());
    if (!u.ok() || u->host != self->second || u->port != c->peer_port) {
      return Bad(s, "initial-advertise-peer-urls",
                 absl::StrCat("does not match this node's entry in ", s.From("initial-cluster")));
    }
  }
  c->self_host = self->second;
  return absl::OkStatus();
}

// The client port, from this node's advertised client URL; the other nodes' (if given) must
// use the same.
absl::Status ReadClientPort(const EtcdStyle& s, EtcdStyleCluster* c) {
  if (const std::string& adv = s.Get("advertise-client-urls"); !adv.empty()) {
    auto u = ParseUrl(List(adv).front());
    if (!u.ok()) return Bad(s, "advertise-client-urls", Msg(u.status()));
    if (u->host != c->self_host) {
      return Bad(s, "advertise-client-urls",
                 absl::StrCat("names host ", u->host, ", not this node's ", c->self_host));
    }
    c->client_port = u->port;
  }
  for (const std::string& other : List(s.Get("other-peers-client-urls"))) {
    auto u = ParseUrl(other);
    if (!u.ok()) return Bad(s, "other-peers-client-urls", Msg(u.status()));
    if (u->port != c->client_port) {
      return Bad(s, "other-peers-client-urls",
                 "the client ports differ between nodes; steward uses one client port on "
                 "every node");
    }
  }
  return absl::OkStatus();
}

// initial-cluster-token names the cluster; "etcd" (warned) when it is unset or no valid name.
std::string ClusterName(const EtcdStyle& s, std::vector<std::string>* warnings) {
  std::string cluster = s.Get("initial-cluster-token");
  const bool valid = !cluster.empty() && cluster.size() <= 63 &&
                     std::all_of(cluster.begin(), cluster.end(), [](char c) {
                       return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                              c == '_' || c == '.';
                     });
  if (!valid) {
    warnings->push_back(
        absl::StrCat(s.From("initial-cluster-token"),
                     cluster.empty() ? " is not set"
                                     : " is not a valid "
                                       "cluster name",
                     ": the cluster is named \"etcd\"; clusters that share a backup store "
                     "need distinct names (set it)"));
    cluster = "etcd";
  }

  return cluster;
}

// The node's etcd extra arguments, the static-pod runner and the backup store, as given.
void EmitEtcdRunnerBackup(const EtcdStyle& s, YAML::Emitter& y) {
  std::vector<std::string> extra;
  for (const auto& [key, v] : s.values) {
    if (key.rfind("extra:", 0) == 0)
      extra.push_back(absl::StrCat("--", key.substr(6), "=", v.value));
  }
  if (!extra.empty()) {
    y << YAML::Key << "etcd" << YAML::Value << YAML::BeginMap << YAML::Key << "extra_args"
      << YAML::Value << YAML::Flow << extra << YAML::EndMap;
  }

  if (const std::string& image = s.Get("steward:image"); !image.empty()) {
    y << YAML::Key << "runner" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "kind" << YAML::Value << "static-pod";
    y << YAML::Key << "image" << YAML::Value << image;
    if (!s.Get("steward:manifest-dir").empty()) {
      y << YAML::Key << "manifest_dir" << YAML::Value << s.Get("steward:manifest-dir");
    }
    if (!s.Get("steward:pod-spec-file").empty()) {
      y << YAML::Key << "pod_spec_file" << YAML::Value << s.Get("steward:pod-spec-file");
    }
    y << YAML::EndMap;
  }

  std::string store;
  if (!s.Get("steward:s3-backup-path").empty()) {
    store = s.Get("steward:s3-backup-path");
    if (store.rfind("s3://", 0) != 0) store = "s3://" + store;
  } else if (!s.Get("steward:backup-dir").empty()) {
    store = "file://" + s.Get("steward:backup-dir");
  }
  if (!store.empty() || !s.Get("steward:backup-interval").empty()) {
    y << YAML::Key << "backup" << YAML::Value << YAML::BeginMap;
    if (!store.empty()) y << YAML::Key << "store" << YAML::Value << store;
    if (!s.Get("steward:backup-interval").empty()) {
      y << YAML::Key << "interval" << YAML::Value << s.Get("steward:backup-interval");
    }
    y << YAML::EndMap;
  }
}

// TLS: etcd's certificate files, or plain text as the URLs say.
absl::Status EmitTls(const EtcdStyle& s, const std::string& scheme, YAML::Emitter& y) {
  const bool certs = !s.Get("cert-file").empty();
  if (scheme == "https" && !certs) {
    return Bad(s, "initial-cluster", "uses https, and no certificate is given (cert-file)");
  }
  y << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
  if (!certs) {
    y << YAML::Key << "mode" << YAML::Value << "off";
  } else {
    for (const char* k : {"key-file", "peer-cert-file", "peer-key-file", "trusted-ca-file"}) {
      if (s.Get(k).empty()) return Bad(s, k, "is required with " + s.From("cert-file"));
    }
    if (!s.Get("peer-trusted-ca-file").empty() &&
        s.Get("peer-trusted-ca-file") != s.Get("trusted-ca-file")) {
      return Bad(s, "peer-trusted-ca-file",
                 absl::StrCat("differs from ", s.From("trusted-ca-file"),
                              "; steward uses one CA for clients, peers and agents"));
    }
    y << YAML::Key << "mode" << YAML::Value << "files";
    y << YAML::Key << "cert_file" << YAML::Value << s.Get("cert-file");
    y << YAML::Key << "key_file" << YAML::Value << s.Get("key-file");
    y << YAML::Key << "peer_cert_file" << YAML::Value << s.Get("peer-cert-file");
    y << YAML::Key << "peer_key_file" << YAML::Value << s.Get("peer-key-file");
    y << YAML::Key << "trusted_ca_file" << YAML::Value << s.Get("trusted-ca-file");
    // The agent presents the server certificate as its client certificate too (etcd-wrapper
    // uses one certificate for everything): it needs the clientAuth usage.
    y << YAML::Key << "client_cert_file" << YAML::Value << s.Get("cert-file");
    y << YAML::Key << "client_key_file" << YAML::Value << s.Get("key-file");
  }
  y << YAML::EndMap;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ConfigYamlFromEtcdStyle(const EtcdStyle& s,
                                                    std::vector<std::string>* warnings) {
  const std::string& name = s.Get("name");
  if (name.empty()) return Bad(s, "name", "is required");
  if (s.Get("initial-cluster").empty()) return Bad(s, "initial-cluster", "is required");
  EtcdStyleCluster c;
  if (absl::Status st = ReadInitialCluster(s, name, &c); !st.ok()) return st;
  if (absl::Status st = ReadClientPort(s, &c); !st.ok()) return st;
  // etcd listens where it advertises (steward renders both from the node's host and ports).
  for (const char* key : {"listen-client-urls", "listen-peer-urls"}) {
    if (!s.Get(key).empty()) {
      warnings->push_back(
          absl::StrCat(s.From(key),
                       " is accepted and ignored: etcd listens on the URL it advertises, on "
                       "this node's host (loopback clients use that address too)"));
    }
  }
  const std::string cluster = ClusterName(s, warnings);

  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << cluster;
  y << YAML::Key << "size" << YAML::Value << static_cast<int>(c.nodes.size());
  y << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& [n, host] : c.nodes) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << n << YAML::Key
      << "host" << YAML::Value << host << YAML::EndMap;
  }
  y << YAML::EndSeq;
  y << YAML::Key << "ports" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "client"
    << YAML::Value << c.client_port << YAML::Key << "peer" << YAML::Value << c.peer_port
    << YAML::EndMap;
  y << YAML::EndMap;

  y << YAML::Key << "node" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << name;
  if (!s.Get("data-dir").empty()) y << YAML::Key << "data_dir" << YAML::Value << s.Get("data-dir");
  y << YAML::EndMap;

  EmitEtcdRunnerBackup(s, y);
  if (absl::Status st = EmitTls(s, c.scheme, y); !st.ok()) return st;
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

std::vector<std::string> Contradictions(const Config& dropin, const Config& file) {
  std::vector<std::string> out;
  auto check = [&](const std::string& key, const std::string& a, const std::string& b) {
    if (a != b) {
      out.push_back(absl::StrCat(key, ": \"", a, "\" from the flags contradicts \"", b, "\" in ",
                                 file.source));
    }
  };
  check("node.name", dropin.node.name, file.node.name);
  check("cluster.size", std::to_string(dropin.cluster.size), std::to_string(file.cluster.size));
  auto hosts = [](const Config& c) {
    std::vector<std::string> v;
    for (const auto& n : c.cluster.nodes) v.push_back(n.name + "=" + n.host);
    return absl::StrJoin(v, ",");
  };
  // The flags name only the initial cluster: compare the first cluster.size nodes.
  Config f = file;
  if (f.cluster.nodes.size() > static_cast<size_t>(f.cluster.size)) {
    f.cluster.nodes.resize(static_cast<size_t>(f.cluster.size));
  }
  check("cluster.nodes", hosts(dropin), hosts(f));
  check("cluster.ports.client", std::to_string(dropin.cluster.ports.client),
        std::to_string(file.cluster.ports.client));
  check("cluster.ports.peer", std::to_string(dropin.cluster.ports.peer),
        std::to_string(file.cluster.ports.peer));
  if (dropin.tls.mode == "files") {
    check("tls.cert_file", dropin.tls.cert_file, file.tls.cert_file);
    check("tls.peer_cert_file", dropin.tls.peer_cert_file, file.tls.peer_cert_file);
    check("tls.trusted_ca_file", dropin.tls.trusted_ca_file, file.tls.trusted_ca_file);
  }
  if (!dropin.backup.store.empty()) check("backup.store", dropin.backup.store, file.backup.store);
  if (dropin.runner.kind == "static-pod") {
    check("runner.kind", dropin.runner.kind, file.runner.kind);
    check("runner.image", dropin.runner.image, file.runner.image);
  }
  return out;
}

}  // namespace steward
