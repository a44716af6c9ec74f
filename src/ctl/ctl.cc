#include "ctl/ctl.h"

#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "config/config.h"
#include "ctl/status.h"
#include "etcd/client.h"

namespace steward {
namespace {

struct Common {
  std::string config_path;
  std::string endpoints;
  std::string output = "table";
  int timeout_ms = 3000;
};

// Endpoints and configured nodes from --endpoints or --config. Returns 0 or an exit status.
int ResolveEndpoints(const Common& c, std::vector<std::string>* endpoints,
                     std::vector<NodeRow>* nodes) {
  if (!c.endpoints.empty()) {
    for (auto part : absl::StrSplit(c.endpoints, ',', absl::SkipEmpty())) {
      endpoints->emplace_back(part);
    }
    return 0;
  }
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: give --config FILE (any node's) or --endpoints URLS\n";
    return 2;
  }
  auto config = LoadConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return 2;
  }
  *endpoints = config->AllClientUrls();
  for (const auto& n : config->cluster.nodes) nodes->push_back({n.name, config->PeerUrl(n)});
  return 0;
}

int RunStatus(const Common& c) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  EtcdClient client(endpoints, o);
  ClusterView view = CollectStatus(client, o.timeout, nodes);
  if (c.output == "json") {
    std::cout << StatusToJson(view).dump(2) << "\n";
  } else {
    std::cout << RenderStatusTable(view);
  }
  return view.healthy ? 0 : 1;
}

}  // namespace

int CtlMain(int argc, char** argv) {
  CLI::App app{"stewardctl: inspect and operate an etcd-steward cluster"};
  app.require_subcommand(1);
  Common common;
  auto add_common = [&common](CLI::App* sub) {
    sub->add_option("--config", common.config_path, "any node's steward config file");
    sub->add_option("--endpoints", common.endpoints, "comma-separated etcd client URLs");
    sub->add_option("--timeout-ms", common.timeout_ms, "deadline for each call")
        ->check(CLI::Range(100, 600000));
  };
  CLI::App* status = app.add_subcommand("status", "show the cluster at a glance");
  add_common(status);
  status->add_option("-o,--output", common.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (status->parsed()) return RunStatus(common);
  return 2;
}

}  // namespace steward
