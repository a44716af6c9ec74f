#include "etcd/flags.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace steward {

std::vector<std::string> RenderEtcdFlags(const EtcdLaunch& l) {
  std::vector<std::string> cluster;
  for (const auto& [name, url] : l.initial_cluster) cluster.push_back(absl::StrCat(name, "=", url));
  std::vector<std::string> f = {
      absl::StrCat("--name=", l.name),
      absl::StrCat("--data-dir=", l.data_dir),
      absl::StrCat("--listen-client-urls=", l.client_url),
      absl::StrCat("--advertise-client-urls=", l.client_url),
      absl::StrCat("--listen-peer-urls=", l.peer_url),
      absl::StrCat("--initial-advertise-peer-urls=", l.peer_url),
      absl::StrCat("--initial-cluster=", absl::StrJoin(cluster, ",")),
      absl::StrCat("--initial-cluster-state=", l.new_cluster ? "new" : "existing"),
      absl::StrCat("--initial-cluster-token=", l.token),
  };
  if (!l.cert_file.empty()) {
    f.push_back(absl::StrCat("--cert-file=", l.cert_file));
    f.push_back(absl::StrCat("--key-file=", l.key_file));
    f.push_back(absl::StrCat("--trusted-ca-file=", l.ca_file));
    f.push_back("--client-cert-auth=true");
    f.push_back(absl::StrCat("--peer-cert-file=", l.peer_cert_file));
    f.push_back(absl::StrCat("--peer-key-file=", l.peer_key_file));
    f.push_back(absl::StrCat("--peer-trusted-ca-file=", l.ca_file));
    f.push_back("--peer-client-cert-auth=true");
  }
  if (!l.auto_compaction_mode.empty()) {
    f.push_back(absl::StrCat("--auto-compaction-mode=", l.auto_compaction_mode));
    f.push_back(absl::StrCat("--auto-compaction-retention=", l.auto_compaction_retention));
  }
  if (!l.metrics_url.empty()) f.push_back(absl::StrCat("--listen-metrics-urls=", l.metrics_url));
  const bool own_logger = std::any_of(l.extra_args.begin(), l.extra_args.end(),
                                      [](const auto& a) { return a.rfind("--logger", 0) == 0; });
  if (!own_logger && l.version.rfind("3.4.", 0) == 0) f.push_back("--logger=zap");
  f.insert(f.end(), l.extra_args.begin(), l.extra_args.end());
  return f;
}

EtcdLaunch BootstrapLaunch(const Config& c) {
  EtcdLaunch l;
  const NodeSpec& self = c.self();
  l.name = self.name;
  l.data_dir = c.EtcdDataDir();
  l.client_url = c.ClientUrl(self);
  l.peer_url = c.PeerUrl(self);
  for (int i = 0; i < c.cluster.size; ++i) {
    const NodeSpec& n = c.cluster.nodes[static_cast<size_t>(i)];
    l.initial_cluster.emplace_back(n.name, c.PeerUrl(n));
  }
  l.new_cluster = true;
  l.token = c.ClusterToken();
  l.extra_args = c.etcd.extra_args;
  l.auto_compaction_mode = c.etcd.auto_compaction_mode;
  l.auto_compaction_retention = c.etcd.auto_compaction_retention;
  if (c.cluster.ports.metrics != 0) {
    l.metrics_url = absl::StrCat("http://", self.host, ":", c.cluster.ports.metrics);
  }
  if (c.tls.enabled()) {
    TlsPaths t = c.Tls();
    l.ca_file = t.ca;
    l.cert_file = t.server_cert;
    l.key_file = t.server_key;
    l.peer_cert_file = t.peer_cert;
    l.peer_key_file = t.peer_key;
  }
  return l;
}

// name -> values, in order (a flag given twice is a different command line).
static std::map<std::string, std::vector<std::string>> FlagValues(
    const std::vector<std::string>& args) {
  std::map<std::string, std::vector<std::string>> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.size() < 2 || a[0] != '-') continue;  // etcd takes no positional arguments
    if (a[1] != '-') a.insert(a.begin(), '-');
    std::string value;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a.resize(eq);
    } else if (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) {
      value = args[++i];
    } else {
      value = "true";  // a boolean given alone
    }
    if (a.rfind("--initial-", 0) == 0) continue;
    out[a].push_back(value);
  }
  return out;
}

std::vector<std::string> PendingFlags(const std::vector<std::string>& running,
                                      const std::vector<std::string>& wanted) {
  const auto was = FlagValues(running);
  const auto now = FlagValues(wanted);
  std::vector<std::string> out;
  for (const auto& [name, values] : was) {
    auto it = now.find(name);
    if (it == now.end() || it->second != values) out.push_back(name);
  }
  for (const auto& [name, values] : now) {
    if (was.find(name) == was.end()) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace steward
