// The agent's main(): flags, config, logging, signals.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

extern char** environ;

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "common/log_format.h"
#include "common/sd_notify.h"
#include "common/status.h"
#include "config/dropin.h"
#include "config/schema.h"
#include "grpc/support/log.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

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

// The logger gRPC's messages go to. Leaked on purpose: gRPC's threads may still log while the
// statics (spdlog's registry among them) are destroyed at exit.
std::shared_ptr<spdlog::logger>* grpc_logger = nullptr;

// gRPC's own messages (GRPC_VERBOSITY, errors by default) through the agent's logger, so they
// carry the same UTC time and, with --log-format=json, stay one JSON object per line.
void LogFromGrpc(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
  const char* file = args->file != nullptr ? args->file : "";
  if (const char* slash = std::strrchr(file, '/'); slash != nullptr) file = slash + 1;
  (*grpc_logger)
      ->log(level, "grpc: {} ({}:{})", args->message != nullptr ? args->message : "", file,
            args->line);
}
}  // namespace

// Where the node's config comes from: --config FILE; etcd-wrapper's flags (alone, or checked
// against --config); or, with neither, etcd's own ETCD_* variables (config/dropin.h).
absl::StatusOr<Config> ConfigFor(const std::string& config_path,
                                 const std::vector<std::string>& wrapper_flags,
                                 std::vector<std::string>* warnings) {
  EtcdStyle style;
  std::string source;
  if (!wrapper_flags.empty()) {
    auto parsed = EtcdStyleFromWrapperFlags(wrapper_flags);
    if (!parsed.ok()) return parsed.status();
    style = std::move(*parsed);
    source = "flags";
  } else if (config_path.empty()) {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!env.count("ETCD_NAME") || !env.count("ETCD_INITIAL_CLUSTER")) {
      return absl::InvalidArgumentError(
          "give --config FILE, etcd-wrapper's flags, or etcd's ETCD_NAME and "
          "ETCD_INITIAL_CLUSTER variables (docs/drop-in.md)");
    }
    style = EtcdStyleFromEnvironment(env);
    source = "environment";
  } else {
    return LoadConfig(config_path);
  }
  warnings->insert(warnings->end(), style.warnings.begin(), style.warnings.end());
  auto yaml = ConfigYamlFromEtcdStyle(style, warnings);
  if (!yaml.ok()) return yaml.status();
  auto dropin = ParseConfig(*yaml, source);
  if (!dropin.ok()) return Annotate(dropin.status(), "the config built from the " + source);
  if (config_path.empty()) return dropin;
  auto file = LoadConfig(config_path);
  if (!file.ok()) return file.status();
  if (auto c = Contradictions(*dropin, *file); !c.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(c, "; "));
  }
  return file;
}

namespace {

// steward's command line. --config, --log-format, --version and --help are steward's; any
// other flag is one of etcd-wrapper's (config/dropin.h), parsed there.
struct MainArgs {
  std::string config_path;
  std::string log_format = "text";
  std::vector<std::string> wrapper_flags;
};
// An exit status when the command line is answered here (--version, --help).
std::optional<int> ParseMainArgs(int argc, char** argv, MainArgs* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--version") {
      std::cout << "steward " << STEWARD_VERSION << "\n";
      return 0;
    }
    if (a == "--print-config-reference") {
      // docs/configuration.md's reference block (scripts/gen_config_doc.py).
      std::cout << RenderConfigReference();
      return 0;
    }
    if (a == "--help" || a == "-h") {
      std::cout << "usage: steward --config FILE\n"
                   "       steward --name N --initial-cluster ... (etcd-wrapper's flags)\n"
                   "       steward            (with etcd's ETCD_NAME, ETCD_INITIAL_CLUSTER, ...)\n"
                   "runs and supervises this node's etcd; see docs/running.md and docs/drop-in.md\n"
                   "  --log-format text|json  the agent's log on stderr: text (default) or one\n"
                   "                          JSON object per line; times in UTC either way\n"
                   "  --print-config-reference  every config key with its default, as YAML\n";
      return 0;
    }
    if (a == "--config" && i + 1 < argc) {
      args->config_path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      args->config_path = a.substr(9);
    } else if (a == "--log-format") {
      args->log_format = i + 1 < argc ? argv[++i] : "";
    } else if (a.rfind("--log-format=", 0) == 0) {
      args->log_format = a.substr(13);
    } else {
      args->wrapper_flags.push_back(a);
    }
  }
  return std::nullopt;
}

// Waits for a signal: SIGHUP restarts the agent in place (etcd keeps running), any other
// stops it and etcd. Returns the exit status (unless the re-exec succeeds).
int RunUntilSignal(Agent& agent, sigset_t& set, char** argv,
                   const std::function<void(const std::string&)>& fatal) {
  int sig = 0;
  sigwait(&set, &sig);
  if (sig == SIGHUP) {
    // Reload (`systemctl reload steward`, and certificate renewal): restart the agent in place
    // from the binary now installed at its path — the upgrade path; etcd keeps serving and the
    // new agent adopts it, so an upgrade of the agent never restarts etcd.
    spdlog::info("SIGHUP: restarting the agent (etcd keeps running)");
    NotifySystemd("RELOADING=1\nSTATUS=restarting the agent; etcd keeps running");
    agent.Shutdown(false);
    spdlog::default_logger()->flush();
    const std::string self = InstalledBinary();
    ::execv(self.c_str(), argv);
    ::execv("/proc/self/exe", argv);  // the file is gone: run this same binary again
    fatal(absl::StrCat("re-exec of ", self, " failed: ", std::strerror(errno)));
    return 1;
  }
  spdlog::info("signal {} received; stopping", sig);
  NotifySystemd("STOPPING=1\nSTATUS=stopping the agent and etcd");
  agent.Shutdown(true);
  return 0;
}

}  // namespace

int AgentMain(int argc, char** argv) {
  // Debian's abseil is built with Mutex deadlock detection on, which gRPC's every lock then
  // pays for (a lock-order graph kept on each acquisition): most of an idle agent's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's backup poller wakes every 5 s per channel to poll idle connections; every call the
  // agent makes has a deadline, so a dead connection is found by the next call anyway. Once a
  // minute is plenty (an operator's own setting wins).
  ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "60000", 0);
  MainArgs args;
  if (std::optional<int> answered = ParseMainArgs(argc, argv, &args)) return *answered;
  auto log_format = ParseLogFormat(args.log_format);
  if (!log_format.ok()) {
    std::cerr << "steward: --log-format: " << log_format.status().message() << "\n";
    return 2;
  }
  // The logger exists before the config is read, without the node's name, so a config error
  // is a JSON line too with --log-format=json. No colours in JSON.
  auto logger = *log_format == LogFormat::kJson ? spdlog::stderr_logger_mt("steward")
                                                : spdlog::stderr_color_mt("steward");
  logger->set_formatter(MakeLogFormatter(*log_format, ""));
  spdlog::set_default_logger(logger);
  grpc_logger = new std::shared_ptr<spdlog::logger>(logger);
  gpr_set_log_function(LogFromGrpc);
  // Errors that end the agent: in text, the plain "steward: ..." line on stderr as before; in
  // JSON, a critical record like any other line.
  std::function<void(const std::string&)> fatal = [&](const std::string& message) {
    if (*log_format == LogFormat::kJson) {
      spdlog::critical("{}", message);
      spdlog::default_logger()->flush();
    } else {
      std::cerr << "steward: " << message << "\n";
    }
  };
  std::vector<std::string> warnings;
  auto config = ConfigFor(args.config_path, args.wrapper_flags, &warnings);
  if (!config.ok()) {
    fatal(absl::StrCat("config error: ", config.status().message()));
    return 2;
  }
  logger->set_formatter(MakeLogFormatter(*log_format, config->node.name));
  spdlog::set_level(spdlog::level::from_str(config->node.log_level));
  for (const auto& w : warnings) spdlog::warn("{}", w);

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
    fatal(std::string(s.message()));
    return 2;
  }
  // Under systemd (Type=notify): the peer API serves and the loops run. A no-op elsewhere.
  NotifySystemd(absl::StrCat("READY=1\nMAINPID=", ::getpid(), "\nSTATUS=agent ", STEWARD_VERSION,
                             " running; etcd supervised"));
  return RunUntilSignal(agent, set, argv, fatal);
}

}  // namespace steward
