#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace steward {

namespace {
bool Prefixed(const char* e, const char* prefix) {
  return std::strncmp(e, prefix, std::strlen(prefix)) == 0;
}
// systemd's messages to the agent itself: etcd sees NOTIFY_SOCKET and sends its own READY=1,
// which systemd refuses under NotifyAccess=main and logs ("Got notification message from PID").
bool ServiceManagers(const char* e) {
  return Prefixed(e, "NOTIFY_SOCKET=") || Prefixed(e, "WATCHDOG_") || Prefixed(e, "LISTEN_");
}
bool EtcdsOwn(const char* e) { return Prefixed(e, "ETCD_") || Prefixed(e, "ETCDCTL_"); }
bool Dropped(const char* e) { return Prefixed(e, "AWS_") || EtcdsOwn(e) || ServiceManagers(e); }
}  // namespace

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!Dropped(*e)) envs.emplace_back(*e);
  }
  envs.insert(envs.end(), extra.begin(), extra.end());
  return envs;
}

std::vector<std::string> DroppedEtcdVariables() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    if (EtcdsOwn(*e)) {
      const char* eq = std::strchr(*e, '=');
      names.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
    }
  }
  return names;
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env,
                                         std::chrono::milliseconds timeout,
                                         const std::function<bool()>& cancelled) {
  char tmpl[] = "/tmp/steward-proc-XXXXXX";
  int out_fd = ::mkstemp(tmpl);
  if (out_fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", std::strerror(errno)));
  ::unlink(tmpl);
  std::vector<std::string> envs = ChildEnvironment(env);
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ::close(out_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }
  ProcessResult r;
  bool timed_out = false, was_cancelled = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    was_cancelled = cancelled && cancelled();
    if (was_cancelled || std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = !was_cancelled;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  off_t size = ::lseek(out_fd, 0, SEEK_END);
  off_t from = size > 65536 ? size - 65536 : 0;
  r.output.resize(static_cast<size_t>(size - from));
  if (::pread(out_fd, r.output.data(), r.output.size(), from) < 0) r.output.clear();
  ::close(out_fd);
  if (was_cancelled) return absl::CancelledError(absl::StrCat(argv[0], " was cancelled"));
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish within ", timeout.count(), "ms: ", r.output));
  }
  return r;
}

}  // namespace steward
