// The admin port (cluster.ports.admin) of every agent: GET /healthz, /readyz, /leader,
// /metrics, the status page / and its /status.json (admin/status_page.h) over HTTP, or HTTPS
// with the agent's server certificate when TLS is on.
//
// Health endpoints (/healthz, /readyz) answer without a client certificate, because load
// balancers rarely have one. The rest require a client certificate signed by the cluster's CA
// when TLS is on (403 otherwise). A certificate from another CA fails the TLS handshake.
// Nothing here writes, and no response holds a secret.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "config/config.h"

namespace httplib {
class Server;
}

namespace steward {

struct AdminHandlers {
  std::function<std::optional<std::string>()> not_alive;   // nullopt: 200 on /healthz
  std::function<std::optional<std::string>()> not_ready;   // nullopt: 200 on /readyz
  std::function<std::optional<std::string>()> not_leader;  // nullopt: 200 on /leader
  // Lines after "leader" in /leader's 200 answer (unset: none), such as how far the leader's
  // delta backups reach and whether they fall behind.
  std::function<std::string()> leader_detail;
  std::function<std::string()> metrics;  // Prometheus text
  // The status page's document (StatusSource::Json); unset: / and /status.json answer 404.
  std::function<std::string()> status_json;
};

class AdminServer {
 public:
  // `tls`: the agent's server certificate and the CA for client certificates; nullopt: HTTP.
  AdminServer(std::string host, int port, AdminHandlers handlers, std::optional<TlsPaths> tls);
  ~AdminServer();
  // Binds the port (an error names it) and serves on a thread of its own.
  absl::Status Start();
  void Shutdown();

 private:
  std::string host_;
  int port_;
  AdminHandlers handlers_;
  std::optional<TlsPaths> tls_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace steward
