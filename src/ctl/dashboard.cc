#include "ctl/dashboard.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "admin/status_page.h"
#include "common/mutex.h"
#include "config/config.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace steward {

std::string AgentUrl::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(scheme, "://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

absl::StatusOr<AgentUrl> ParseAgentUrl(const std::string& url) {
  AgentUrl a;
  const size_t sep = url.find("://");
  if (sep == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent URL ", url, ": want http(s)://HOST:PORT (the admin port, 2391)"));
  }
  a.scheme = url.substr(0, sep);
  if (a.scheme != "http" && a.scheme != "https") {
    return absl::InvalidArgumentError(
        absl::StrCat("agent URL ", url, ": the scheme must be http or https"));
  }
  std::string rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("agent URL ", url, ": want [IPv6]:PORT"));
    }
    a.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else if (colon != std::string::npos) {
    a.host = rest.substr(0, colon);
  }
  if (colon == std::string::npos || a.host.empty() ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &a.port) || a.port <= 0 || a.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent URL ", url, ": want HOST:PORT after the scheme"));
  }
  return a;
}

namespace {

struct Credentials {
  std::string ca, cert, key;
};

// Fetches /status.json from the agents. Thread-safe: each fetch has its own connection.
class AgentFetcher {
 public:
  AgentFetcher(std::vector<AgentUrl> agents, Credentials creds, std::chrono::milliseconds timeout)
      : agents_(std::move(agents)), creds_(std::move(creds)), timeout_(timeout) {}

  struct Answer {
    int status = 0;
    std::string body;
    std::string content_type;
  };

  // The first 200 answer, asking the agent that answered last first. When none answers: 502
  // with {"error": ...} naming each agent's problem (the page shows it).
  Answer Fetch() {
    size_t first;
    {
      MutexLock lock(&mu_);
      first = preferred_;
    }
    std::vector<std::string> problems;
    for (size_t k = 0; k < agents_.size(); ++k) {
      const size_t i = (first + k) % agents_.size();
      std::string problem;
      if (auto body = Ask(agents_[i], &problem)) {
        MutexLock lock(&mu_);
        preferred_ = i;
        if (announced_ != agents_[i].ToString()) {
          announced_ = agents_[i].ToString();
          std::cerr << "dashboard: status from " << announced_ << "\n";
        }
        return {200, std::move(*body), "application/json"};
      }
      problems.push_back(absl::StrCat(agents_[i].ToString(), ": ", problem));
    }
    const std::string error = absl::StrCat("no agent answered: ", absl::StrJoin(problems, "; "));
    {
      MutexLock lock(&mu_);
      if (!announced_.empty()) std::cerr << "dashboard: " << error << "\n";
      announced_.clear();
    }
    return {502, nlohmann::json{{"error", error}}.dump(), "application/json"};
  }

 private:
  std::optional<std::string> Ask(const AgentUrl& agent, std::string* problem) {
    const std::string url = agent.ToString();
    std::unique_ptr<httplib::Client> cli =
        creds_.cert.empty() ? std::make_unique<httplib::Client>(url)
                            : std::make_unique<httplib::Client>(url, creds_.cert, creds_.key);
    if (agent.scheme == "https") {
      cli->set_ca_cert_path(creds_.ca);
      cli->enable_server_certificate_verification(true);
    }
    const auto connect = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(2));
    cli->set_connection_timeout(connect);
    cli->set_read_timeout(timeout_);
    auto res = cli->Get("/status.json");
    if (!res) {
      *problem = absl::StrCat("no answer (", httplib::to_string(res.error()), ")");
      return std::nullopt;
    }
    if (res->status != 200) {
      std::string body = res->body.substr(0, res->body.find('\n'));
      *problem = absl::StrCat("HTTP ", res->status, body.empty() ? "" : ": ", body);
      return std::nullopt;
    }
    return res->body;
  }

  const std::vector<AgentUrl> agents_;
  const Credentials creds_;
  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;
  std::string announced_ ABSL_GUARDED_BY(mu_);  // the agent last logged as answering
};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

CLI::App* AddDashboardCommand(CLI::App& app, DashboardOptions* o) {
  CLI::App* sub = app.add_subcommand(
      "dashboard",
      "serve the live status page on a local address, fetching it from the agents' admin "
      "ports with your client certificate (open the printed URL in a browser)");
  sub->add_option("--listen", o->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--config", o->config_path,
                  "any node's steward config: the agents' admin ports, the CA and that node's "
                  "client certificate");
  sub->add_option("--agents", o->agents,
                  "or: comma-separated admin URLs "
                  "(https://10.0.0.1:2391,https://10.0.0.2:2391,...)");
  sub->add_option("--cacert", o->cacert, "CA certificate that signed the agents' (TLS)");
  sub->add_option("--cert", o->cert, "client certificate signed by the cluster's CA (TLS)");
  sub->add_option("--key", o->key, "its key (TLS)");
  sub->add_option("--timeout-ms", o->timeout_ms, "deadline for each fetch from an agent")
      ->check(CLI::Range(500, 60000))
      ->capture_default_str();
  return sub;
}

int RunDashboard(const DashboardOptions& o) {
  std::vector<AgentUrl> agents;
  Credentials creds{o.cacert, o.cert, o.key};
  if (!o.agents.empty()) {
    for (auto part : absl::StrSplit(o.agents, ',', absl::SkipEmpty())) {
      auto a = ParseAgentUrl(std::string(part));
      if (!a.ok()) {
        std::cerr << "stewardctl: --agents: " << a.status().message() << "\n";
        return 2;
      }
      agents.push_back(*a);
    }
  } else if (!o.config_path.empty()) {
    auto config = LoadClientConfig(o.config_path);
    if (!config.ok()) {
      std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
      return 2;
    }
    for (const auto& n : config->cluster.nodes) {
      agents.push_back(
          {config->tls.enabled() ? "https" : "http", n.host, config->cluster.ports.admin});
    }
    if (config->tls.enabled()) {
      const TlsPaths t = config->Tls();
      if (creds.ca.empty()) creds.ca = t.ca;
      if (creds.cert.empty()) {
        creds.cert = t.client_cert;
        creds.key = t.client_key;
      }
    }
  } else {
    std::cerr << "stewardctl: dashboard needs --config FILE (any node's) or --agents URLS\n";
    return 2;
  }
  if (agents.empty()) {
    std::cerr << "stewardctl: dashboard: no agents to ask\n";
    return 2;
  }
  for (const auto& a : agents) {
    if (a.scheme == "https" && creds.ca.empty()) {
      std::cerr << "stewardctl: dashboard: " << a.ToString()
                << " is HTTPS: give --cacert (and --cert/--key, which its status needs)\n";
      return 2;
    }
  }
  if (creds.cert.empty() != creds.key.empty()) {
    std::cerr << "stewardctl: dashboard: give --cert and --key together\n";
    return 2;
  }

  std::string host = o.listen;
  int port = 0;
  const size_t colon = o.listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    std::cerr << "stewardctl: dashboard: --listen wants HOST:PORT, got " << o.listen << "\n";
    return 2;
  }
  host = o.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (!IsLoopback(host)) {
    std::cerr << "warning: serving on " << host << ": anyone who can reach it reads the cluster's "
              << "status without a certificate\n";
  }

  auto fetcher =
      std::make_shared<AgentFetcher>(agents, creds, std::chrono::milliseconds(o.timeout_ms));
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(4); };
  // One request per connection: no idle keep-alive connection holds up the exit on Ctrl-C.
  server.set_keep_alive_max_count(1);
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy", kStatusPageCsp);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(StatusPageHtml(), "text/html; charset=utf-8");
  });
  server.Get("/status.json", [fetcher](const httplib::Request&, httplib::Response& res) {
    AgentFetcher::Answer a = fetcher->Fetch();
    res.status = a.status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(a.body, a.content_type);
  });
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT: a second dashboard on the same port
  // would bind without an error).
  server.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int bound = -1;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    std::cerr << "stewardctl: dashboard: cannot listen on " << o.listen << "\n";
    return 1;
  }
  // SIGINT and SIGTERM end the server: blocked here (and in the server's threads, which inherit
  // the mask) and taken by sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread serve([&server] {
    pthread_setname_np(pthread_self(), "dashboard");
    server.listen_after_bind();
  });
  const bool v6 = host.find(':') != std::string::npos;
  std::cout << "http://" << (v6 ? "[" : "") << host << (v6 ? "]" : "") << ":" << bound << "/"
            << std::endl;
  std::cerr << "dashboard: serving the status page of " << agents.size()
            << " agent(s); Ctrl-C stops it\n";
  int sig = 0;
  sigwait(&signals, &sig);
  // httplib's stop() does nothing before the listen loop runs (bounded: it starts at once).
  for (int i = 0; i < 500 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server.stop();
  serve.join();
  return 0;
}

}  // namespace steward
