// The agent's main(): flags, config, logging, signals.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "agent/agent.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

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
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Agent agent(std::move(*config));
  if (absl::Status s = agent.Start(); !s.ok()) {
    std::cerr << "steward: " << s.message() << "\n";
    return 2;
  }
  int sig = 0;
  sigwait(&set, &sig);
  if (sig == SIGHUP) {
    // Reload: restart the agent in place; etcd keeps serving and the new agent adopts it.
    spdlog::info("SIGHUP: restarting the agent (etcd keeps running)");
    agent.Shutdown(false);
    spdlog::default_logger()->flush();
    ::execv("/proc/self/exe", argv);
    std::cerr << "steward: re-exec failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  spdlog::info("signal {} received; stopping", sig);
  agent.Shutdown(true);
  return 0;
}

}  // namespace steward
