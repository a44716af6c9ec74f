#include "etcd/flags.h"

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
  return l;
}

}  // namespace steward
