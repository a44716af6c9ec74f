// The Config struct's own accessors (config.h): URLs, TLS paths and etcd's file names, derived
// from a parsed config. Parsing is in parse.cc and sections.cc.
#include "config/config.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace steward {

const NodeSpec& Config::self() const {
  for (const auto& n : cluster.nodes) {
    if (n.name == node.name) return n;
  }
  std::abort();  // impossible for a validated config
}

std::string Config::ClientUrl(const NodeSpec& n) const {
  return absl::StrCat(Scheme(), "://", n.host, ":", cluster.ports.client);
}
std::string Config::FenceUrl(const NodeSpec& n) const {
  return absl::StrCat(Scheme(), "://", n.host, ":", cluster.ports.fence);
}
std::string Config::PeerUrl(const NodeSpec& n) const {
  return absl::StrCat(Scheme(), "://", n.host, ":", cluster.ports.peer);
}
TlsPaths Config::Tls() const {
  TlsPaths p;
  if (tls.mode == "files") {
    p.ca = tls.trusted_ca_file;
    p.server_cert = p.agent_cert = tls.cert_file;
    p.server_key = p.agent_key = tls.key_file;
    p.peer_cert = tls.peer_cert_file;
    p.peer_key = tls.peer_key_file;
    p.client_cert = tls.client_cert_file;
    p.client_key = tls.client_key_file;
    return p;
  }
  const std::string d = node.data_dir + "/tls/";
  p.ca = d + "ca.crt";
  p.server_cert = d + "server.crt";
  p.server_key = d + "server.key";
  p.peer_cert = d + "peer.crt";
  p.peer_key = d + "peer.key";
  p.agent_cert = d + "agent.crt";
  p.agent_key = d + "agent.key";
  p.client_cert = d + "client.crt";
  p.client_key = d + "client.key";
  return p;
}
std::string Config::AgentAddress(const NodeSpec& n) const {
  return absl::StrCat(n.host, ":", cluster.ports.agent);
}
std::vector<std::string> Config::AllClientUrls() const {
  std::vector<std::string> out;
  for (const auto& n : cluster.nodes) out.push_back(ClientUrl(n));
  return out;
}
std::vector<std::string> Config::ClusterClientUrls() const {
  std::vector<std::string> out = AllClientUrls();
  out.insert(out.end(), cluster.adopt.endpoints.begin(), cluster.adopt.endpoints.end());
  return out;
}
std::string Config::ClusterToken() const { return absl::StrCat("steward-", cluster.name); }
std::string Config::EtcdDataDir() const { return node.data_dir + "/etcd"; }
std::string Config::EtcdLogPath() const { return node.data_dir + "/etcd.log"; }
std::string Config::EtcdPidPath() const { return node.data_dir + "/etcd.pid"; }

}  // namespace steward
