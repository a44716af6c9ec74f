// The agent's main(): flags, config, logging, signals.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "agent/agent.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "systemd/sd-daemon.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {
// The path this binary was started from. After an upgrade replaced the file, /proc/self/exe
// names the old, deleted inode (" (deleted)"): the path without that suffix is the new one.
std::string InstalledBinary() {
  std::error_code ec;
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) return "/proc/self/exe";
  const std::string deleted = " (deleted)";
  if (self.size() > deleted.size() &&
      self.compare(self.size() - deleted.size(), deleted.size(), deleted) == 0) {
    self.resize(self.size() - deleted.size());
  }
  return self;
}
}  // namespace

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
  // Under systemd (Type=notify): the peer API serves and the loops run. A no-op elsewhere.
  sd_notifyf(0, "READY=1\nMAINPID=%lu\nSTATUS=agent %s running; etcd supervised",
             static_cast<unsigned long>(::getpid()), STEWARD_VERSION);
  int sig = 0;
  sigwait(&set, &sig);
  if (sig == SIGHUP) {
    // Reload (`systemctl reload steward`, and certificate renewal): restart the agent in place
    // from the binary now installed at its path — the upgrade path; etcd keeps serving and the
    // new agent adopts it, so an upgrade of the agent never restarts etcd.
    spdlog::info("SIGHUP: restarting the agent (etcd keeps running)");
    sd_notify(0, "RELOADING=1\nSTATUS=restarting the agent; etcd keeps running");
    agent.Shutdown(false);
    spdlog::default_logger()->flush();
    const std::string self = InstalledBinary();
    ::execv(self.c_str(), argv);
    ::execv("/proc/self/exe", argv);  // the file is gone: run this same binary again
    std::cerr << "steward: re-exec of " << self << " failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  spdlog::info("signal {} received; stopping", sig);
  sd_notify(0, "STOPPING=1\nSTATUS=stopping the agent and etcd");
  agent.Shutdown(true);
  return 0;
}

}  // namespace steward
