// `stewardctl dashboard`: the status page (admin/status_page.h) for a browser that holds no
// client certificate. A local plain-HTTP server, on loopback unless told otherwise (as
// `kubectl proxy`), serves the page at / and answers /status.json by fetching it from an
// agent's admin port with the operator's client certificate. It asks the agent that answered
// last, and the next one in turn when that one does not answer, so the page keeps working
// while agents come and go.
//
// Nothing it serves changes the cluster, but the status it shows is what the admin port keeps
// behind a client certificate: anyone who can reach the listen address can read it.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace steward {

struct DashboardOptions {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 picks a free one
  std::string config_path;  // any node's config: the agents, the CA and the node's client cert
  std::string agents;       // or: comma-separated admin URLs (https://10.0.0.1:2391,...)
  std::string cacert, cert, key;  // override the config's TLS files (etcdctl's names)
  int timeout_ms = 5000;          // each fetch from an agent
};

// Registers the subcommand on `app`; its flags fill `*options`.
CLI::App* AddDashboardCommand(CLI::App& app, DashboardOptions* options);

// Serves until SIGINT or SIGTERM. Prints the URL to open on stdout once it listens. Exit
// status: 0 after a signal, 1 when the address cannot be bound, 2 for bad usage or config.
int RunDashboard(const DashboardOptions& options);

// An agent's admin URL, split ("https://10.0.0.1:2391").
struct AgentUrl {
  std::string scheme;  // http or https
  std::string host;    // without brackets
  int port = 0;
  std::string ToString() const;
};
// Parses "https://host:port" or "http://[::1]:port". InvalidArgument names what is wrong.
absl::StatusOr<AgentUrl> ParseAgentUrl(const std::string& url);

}  // namespace steward
