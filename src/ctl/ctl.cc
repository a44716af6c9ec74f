#include "ctl/ctl.h"

#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "config/config.h"
#include "ctl/status.h"
#include "etcd/client.h"
#include "nlohmann/json.hpp"
#include "reconcile/reconciler.h"

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

// The leader and the reconciler's last report, from the reserved prefix. Empty when unknown.
nlohmann::json StewardState(EtcdClient& client, const Config& config) {
  nlohmann::json j = nlohmann::json::object();
  if (auto leader = client.Get(LeaderKey(config)); leader.ok() && leader->has_value()) {
    j["leader"] = **leader;
  }
  if (auto st = client.Get(StatusKey(config)); st.ok() && st->has_value()) {
    auto parsed = nlohmann::json::parse(**st, nullptr, false);
    if (!parsed.is_discarded()) j["reconciler"] = parsed;
  }
  if (auto spec = client.Get(SpecKey(config)); spec.ok() && spec->has_value()) {
    auto parsed = nlohmann::json::parse(**spec, nullptr, false);
    if (!parsed.is_discarded()) j["spec"] = parsed;
  }
  return j;
}

std::string DescribeStewardState(const nlohmann::json& j) {
  std::string out;
  out += "steward leader: " + (j.contains("leader") ? j["leader"].get<std::string>() : "none");
  if (j.contains("reconciler")) {
    const auto& r = j["reconciler"];
    long age = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count()) -
               r.value("at", 0L);
    out += "\nreconciler:     " + r.value("detail", std::string("?")) + " (" +
           r.value("step", std::string("?")) + ", reported by " +
           r.value("leader", std::string("?")) + " " + std::to_string(age) + "s ago)";
  }
  return out + "\n";
}

int RunStatus(const Common& c) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  EtcdClient client(endpoints, o);
  ClusterView view = CollectStatus(client, o.timeout, nodes);
  nlohmann::json steward = nlohmann::json::object();
  if (!c.config_path.empty() && view.reachable) {
    if (auto config = LoadConfig(c.config_path); config.ok()) steward = StewardState(client, *config);
  }
  if (c.output == "json") {
    nlohmann::json j = StatusToJson(view);
    j["steward"] = steward;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << RenderStatusTable(view);
    if (!steward.empty()) std::cout << DescribeStewardState(steward);
  }
  return view.healthy ? 0 : 1;
}

int RunConfigureCluster(const Common& c, int size) {
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: configure-cluster needs --config FILE (any node's)\n";
    return 2;
  }
  auto config = LoadConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return 2;
  }
  const int nodes = static_cast<int>(config->cluster.nodes.size());
  if (size < 1 || size > nodes) {
    std::cerr << "stewardctl: --size must be between 1 and the number of nodes (" << nodes
              << "), got " << size << "\n";
    return 2;
  }
  if (size % 2 == 0) {
    std::cerr << "warning: an even size tolerates no more failures than size " << size - 1
              << " and needs a larger quorum (" << size / 2 + 1 << ")\n";
  }
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  EtcdClient client(config->AllClientUrls(), o);
  int previous = config->cluster.size;
  if (auto spec = client.Get(SpecKey(*config)); spec.ok() && spec->has_value()) {
    auto j = nlohmann::json::parse(**spec, nullptr, false);
    if (!j.is_discarded()) previous = j.value("size", previous);
  }
  nlohmann::json spec = {{"size", size}};
  if (absl::Status s = client.Put(SpecKey(*config), spec.dump()); !s.ok()) {
    std::cerr << "stewardctl: storing the spec: " << s.message() << "\n";
    return 1;
  }
  std::cout << "desired size: " << size << " (was " << previous
            << "); the leader adds or removes one member at a time\n";
  return 0;
}

int RunGet(const Common& c) {
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: get needs --config FILE (any node's)\n";
    return 2;
  }
  auto config = LoadConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return 2;
  }
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  EtcdClient client(config->AllClientUrls(), o);
  if (auto probe = client.Get(SpecKey(*config)); !probe.ok()) {
    std::cerr << "stewardctl: cannot read the cluster spec: " << probe.status().message() << "\n";
    return 1;
  }
  nlohmann::json j = StewardState(client, *config);
  int size = config->cluster.size;
  std::string source = "config default (cluster.size)";
  if (j.contains("spec")) {
    size = j["spec"].value("size", size);
    source = "stored by configure-cluster";
  }
  if (c.output == "json") {
    j["desired_size"] = size;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "cluster:        " << config->cluster.name << "\n"
            << "desired size:   " << size << " (" << source << ")\n"
            << DescribeStewardState(j);
  return 0;
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
  int size = 0;
  CLI::App* configure = app.add_subcommand("configure-cluster", "set the desired cluster size");
  add_common(configure);
  configure->add_option("--size", size, "desired number of voting members")->required();
  CLI::App* get = app.add_subcommand("get", "show the desired spec, the leader and what it does");
  add_common(get);
  get->add_option("-o,--output", common.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (status->parsed()) return RunStatus(common);
  if (configure->parsed()) return RunConfigureCluster(common, size);
  if (get->parsed()) return RunGet(common);
  return 2;
}

}  // namespace steward
