#include "agent/agent.h"

#include <signal.h>

#include <filesystem>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "etcd/flags.h"
#include "runner/process_runner.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace steward {

Agent::Agent(Config config) : config_(std::move(config)) {
  ProcessRunner::Options o;
  o.binary = config_.etcd.binary;
  o.data_dir = config_.EtcdDataDir();
  o.pid_path = config_.EtcdPidPath();
  o.log_path = config_.EtcdLogPath();
  o.stop_timeout = config_.etcd.stop_timeout;
  o.backoff_min = config_.etcd.restart_backoff_min;
  o.backoff_max = config_.etcd.restart_backoff_max;
  runner_ = std::make_unique<ProcessRunner>(o);
  std::vector<std::string> others;
  for (const auto& n : config_.cluster.nodes) {
    if (n.name != config_.node.name) others.push_back(config_.ClientUrl(n));
  }
  EtcdClient::Options co;
  co.timeout = std::chrono::milliseconds(1000);
  peers_client_ = std::make_unique<EtcdClient>(others, co);
}

Agent::~Agent() { Shutdown(false); }

absl::Status Agent::Start() {
  if (absl::Status s = MakeDirs(config_.node.data_dir, 0700); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("node.data_dir: ", s.message()));
  }
  spdlog::info("steward {} starting: node {} ({}), cluster {} of {} node(s), size {}",
               STEWARD_VERSION, config_.node.name, config_.self().host, config_.cluster.name,
               config_.cluster.nodes.size(), config_.cluster.size);
  if (auto pid = runner_->Adopt()) {
    // Keep the member serving; only record how to start it should it exit.
    runner_->Run(RenderEtcdFlags(BootstrapLaunch(config_)));
  }
  control_ = std::thread([this] { ControlLoop(); });
  return absl::OkStatus();
}

void Agent::Shutdown(bool stop_etcd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !control_.joinable()) {
      if (!stop_etcd) return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (control_.joinable()) control_.join();
  if (stop_etcd) {
    if (absl::Status s = runner_->Stop(); !s.ok()) spdlog::error("stopping etcd: {}", s.message());
  }
}

bool Agent::HasMemberData() const {
  return std::filesystem::exists(config_.EtcdDataDir() + "/member");
}

void Agent::Note(const std::string& msg) {
  auto now = std::chrono::steady_clock::now();
  if (msg != last_note_ || now - last_note_at_ > std::chrono::minutes(1)) {
    spdlog::info("{}", msg);
    last_note_ = msg;
    last_note_at_ = now;
  }
}

void Agent::ControlLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    if (!runner_->wanted()) MaybeStartEtcd();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; });
  }
}

void Agent::MaybeStartEtcd() {
  const NodeSpec& self = config_.self();
  if (HasMemberData()) {
    spdlog::info("data dir {} holds a member; starting etcd", config_.EtcdDataDir());
    runner_->Run(RenderEtcdFlags(BootstrapLaunch(config_)));
    return;
  }
  bool initial = false;
  for (int i = 0; i < config_.cluster.size; ++i) {
    if (config_.cluster.nodes[static_cast<size_t>(i)].name == self.name) initial = true;
  }
  if (!initial) {
    Note(absl::StrCat("node ", self.name,
                      " is a spare (not among the first cluster.size nodes); waiting"));
    return;
  }
  // Does a cluster already run that knows this node? A bootstrapping etcd does not answer
  // client requests until it has a leader, so silence here means "no cluster yet".
  if (!peers_client_->endpoints().empty()) {
    auto members = peers_client_->MemberList();
    if (members.ok()) {
      const std::string my_peer = config_.PeerUrl(self);
      const MemberInfo* mine = nullptr;
      for (const auto& m : *members) {
        for (const auto& u : m.peer_urls) {
          if (u == my_peer) mine = &m;
        }
      }
      if (mine == nullptr) {
        Note(absl::StrCat("a cluster is running without node ", self.name,
                          " and this node has no data; waiting to be added"));
        return;
      }
      // Members of the initial cluster carry their names from the start; what shows that a
      // member has run is that it published client URLs (etcd's own bootstrap check).
      if (!mine->client_urls.empty()) {
        Note(absl::StrCat("the cluster has member ", mine->name, " (", HexId(mine->id),
                          ") for this node, but its data dir is empty; waiting to be re-added"));
        return;
      }
      // Our entry exists but never started: we are a late member of the initial cluster.
      spdlog::info("the initial cluster is up without this node yet; joining it");
    }
  }
  spdlog::info("starting etcd as a member of the initial cluster ({} members)",
               config_.cluster.size);
  runner_->Run(RenderEtcdFlags(BootstrapLaunch(config_)));
}

int AgentMain(int argc, char** argv) {
  CLI::App app{"steward: runs and supervises this node's etcd"};
  std::string config_path;
  bool version = false;
  app.add_option("--config", config_path, "the node's YAML config file");
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (version) {
    std::cout << "steward " << STEWARD_VERSION << "\n";
    return 0;
  }
  if (config_path.empty()) {
    std::cerr << "steward: --config FILE is required\n";
    return 2;
  }
  auto config = LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "steward: config error: " << config.status().message() << "\n";
    return 2;
  }
  auto logger = spdlog::stderr_color_mt("steward");
  logger->set_pattern(absl::StrCat("%Y-%m-%dT%H:%M:%S.%e [%^%l%$] [", config->node.name, "] %v"));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->node.log_level));

  // Signals are taken synchronously by this thread; every thread started after this inherits
  // the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Agent agent(std::move(*config));
  if (absl::Status s = agent.Start(); !s.ok()) {
    std::cerr << "steward: " << s.message() << "\n";
    return 2;
  }
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {} received; stopping", sig);
  agent.Shutdown(true);
  return 0;
}

}  // namespace steward
