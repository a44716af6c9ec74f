#include "runner/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace steward {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> ProcCmdline(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// 'Z' for a zombie, 0 if the process does not exist.
char ProcState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

// A file descriptor that becomes readable when `pid` exits, or -1 (no pidfd_open on this
// kernel, or the process is gone already).
int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

std::string Canonical(const std::string& p) {
  std::error_code ec;
  auto c = std::filesystem::weakly_canonical(p, ec);
  return ec ? p : c.string();
}

}  // namespace

bool ProcessRunner::IsEtcdFor(pid_t pid, const std::string& binary, const std::string& data_dir) {
  if (pid <= 0) return false;
  char state = ProcState(pid);
  if (state == 0 || state == 'Z' || state == 'X') return false;
  auto argv = ProcCmdline(pid);
  if (argv.empty()) return false;
  if (Canonical(argv[0]) != Canonical(binary)) return false;
  const std::string want = Canonical(data_dir);
  for (const auto& a : argv) {
    if (a.rfind("--data-dir=", 0) == 0 && Canonical(a.substr(11)) == want) return true;
  }
  return false;
}

std::optional<pid_t> ProcessRunner::FindEtcdFor(const std::string& data_dir) {
  const std::string want = Canonical(data_dir);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid <= 0) continue;
    char state = ProcState(pid);
    if (state == 0 || state == 'Z' || state == 'X') continue;
    auto argv = ProcCmdline(pid);
    if (argv.empty() || std::filesystem::path(argv[0]).filename() != "etcd") continue;
    for (const auto& a : argv) {
      if (a.rfind("--data-dir=", 0) == 0 && Canonical(a.substr(11)) == want) return pid;
    }
  }
  return std::nullopt;
}

void ProcessRunner::SetBinary(const std::string& binary) {
  MutexLock lock(&mu_);
  binary_ = binary;
}

std::string ProcessRunner::binary() const {
  MutexLock lock(&mu_);
  return binary_;
}

ProcessRunner::ProcessRunner(Options options)
    : options_(std::move(options)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      binary_(options_.binary),
      backoff_(options_.backoff_min, options_.backoff_max) {
  supervisor_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-runner");
    SuperviseLoop();
  });
}

ProcessRunner::~ProcessRunner() {
  {
    MutexLock lock(&mu_);
    shutdown_ = true;
  }
  cv_.NotifyAll();
  Wake();
  supervisor_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ProcessRunner::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

std::optional<pid_t> ProcessRunner::Adopt() {
  auto text = ReadFile(options_.pid_path);
  if (!text.ok()) return std::nullopt;
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 0) {
    spdlog::warn("ignoring unreadable pid file {}", options_.pid_path);
    return std::nullopt;
  }
  // A pid file alone is not proof: the pid may have been reused by another program.
  std::string binary;
  {
    MutexLock lock(&mu_);
    binary = binary_;
  }
  if (!IsEtcdFor(pid, binary, options_.data_dir)) {
    spdlog::info("pid file {} names pid {}, which is not our etcd; not adopting", options_.pid_path,
                 pid);
    return std::nullopt;
  }
  MutexLock lock(&mu_);
  pid_ = pid;
  is_child_ = false;
  started_at_ = Clock::now();
  spdlog::info("adopted running etcd pid {} on {}", pid, options_.data_dir);
  return pid;
}

void ProcessRunner::Run(std::vector<std::string> flags) {
  {
    MutexLock lock(&mu_);
    flags_ = std::move(flags);
    exited_since_run_ = false;
    if (!wanted_) {
      wanted_ = true;
      next_start_ = Clock::now();
    }
  }
  cv_.NotifyAll();
  Wake();
}

bool ProcessRunner::wanted() const {
  MutexLock lock(&mu_);
  return wanted_;
}

std::optional<pid_t> ProcessRunner::pid() const {
  MutexLock lock(&mu_);
  if (pid_ == 0) return std::nullopt;
  return pid_;
}

std::optional<std::vector<std::string>> ProcessRunner::FlagsOf(pid_t pid) {
  std::vector<std::string> args = ProcCmdline(pid);
  if (args.empty()) return std::nullopt;  // gone, or a zombie
  args.erase(args.begin());
  return args;
}

std::optional<std::vector<std::string>> ProcessRunner::running_flags() const {
  std::optional<pid_t> p = pid();
  if (!p) return std::nullopt;
  return FlagsOf(*p);
}

int ProcessRunner::restarts() const {
  MutexLock lock(&mu_);
  return restarts_;
}

void ProcessRunner::StartLocked() {
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args;
  args.push_back(binary_);
  args.insert(args.end(), flags_.begin(), flags_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // etcd gets the agent's environment minus cloud credentials and etcd's own variables
  // (ChildEnvironment): its flags are all it is meant to be configured by.
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int log_fd = ::open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) {
    spdlog::error("cannot open etcd log {}: {}; retrying", options_.log_path, std::strerror(errno));
    next_start_ = Clock::now() + backoff_.Next();
    return;
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::string banner = absl::StrCat("\n=== steward: starting ", absl::StrJoin(args, " "), "\n");
  (void)!::write(log_fd, banner.data(), banner.size());

  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    // Undo the agent's blocked signals: etcd must see SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::close_range(3, ~0U, 0);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "steward: exec of etcd failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    spdlog::error("fork for etcd failed: {}; retrying", std::strerror(errno));
    next_start_ = Clock::now() + backoff_.Next();
    return;
  }
  pid_ = pid;
  is_child_ = true;
  started_at_ = Clock::now();
  absl::Status s = WriteFileAtomic(options_.pid_path, absl::StrCat(pid, "\n"));
  if (!s.ok()) spdlog::warn("writing pid file: {}", s.message());
  spdlog::info("started etcd pid {} (log {})", pid, options_.log_path);
}

bool ProcessRunner::ExitedLocked(std::string* how) {
  if (pid_ == 0) return true;
  if (is_child_) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return false;
    if (r < 0 && errno == EINTR) return false;
    if (r == pid_) {
      if (WIFEXITED(status)) {
        *how = absl::StrCat("exited with status ", WEXITSTATUS(status));
      } else if (WIFSIGNALED(status)) {
        *how = absl::StrCat("killed by signal ", WTERMSIG(status));
      }
    } else {
      *how = "is gone";
    }
    return true;
  }
  if (IsEtcdFor(pid_, binary_, options_.data_dir)) return false;
  *how = "(adopted) is gone";
  return true;
}

void ProcessRunner::RotateLog() {
  auto rotated = RotateLogIfOver(options_.log_path, options_.log_rotation);
  if (!rotated.ok()) {
    spdlog::warn("rotating etcd's log: {}", rotated.status().message());
  } else if (*rotated) {
    spdlog::info("etcd's log {} passed {}; rotated (keeping {} copies)", options_.log_path,
                 FormatByteSize(options_.log_rotation.max_bytes), options_.log_rotation.keep);
  }
}

void ProcessRunner::SuperviseLoop() {
  // The pidfd of the process being watched: owned by this thread alone, so no other thread
  // can close it while poll() waits on it.
  pid_t watched = 0;
  int watched_fd = -1;
  // The first look is at once: a log left over its cap (by an agent that was down) is cut
  // before etcd adds to it.
  const bool rotating = options_.log_rotation.max_bytes > 0;
  auto next_log_check = Clock::now();
  MutexLock lock(&mu_);
  while (!shutdown_) {
    if (rotating && Clock::now() >= next_log_check) {
      lock.Unlock();
      RotateLog();
      next_log_check =
          Clock::now() + std::max(options_.log_check_interval, std::chrono::milliseconds(10));
      lock.Lock();
      continue;
    }
    if (pid_ != watched) {
      if (watched_fd >= 0) ::close(watched_fd);
      watched = pid_;
      watched_fd = watched != 0 ? OpenPidFd(watched) : -1;
    }
    // Without a pidfd (or an eventfd) fall back to checking every 100 ms. Otherwise sleep
    // until something happens; the 10 s bound is only a safety net.
    std::chrono::milliseconds wait(10000);
    if (wake_fd_ < 0 || (pid_ != 0 && watched_fd < 0)) wait = std::chrono::milliseconds(100);
    if (pid_ == 0 && wanted_) {
      auto due = std::chrono::ceil<std::chrono::milliseconds>(next_start_ - Clock::now());
      wait = std::clamp(due, std::chrono::milliseconds(0), wait);
    }
    if (rotating) {
      auto due = std::chrono::ceil<std::chrono::milliseconds>(next_log_check - Clock::now());
      wait = std::clamp(due, std::chrono::milliseconds(0), wait);
    }
    if (wait.count() > 0) {
      lock.Unlock();
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {watched_fd, POLLIN, 0}};  // -1 is ignored
      ::poll(fds, 2, static_cast<int>(wait.count()));
      uint64_t drained = 0;
      if (wake_fd_ >= 0) (void)!::read(wake_fd_, &drained, sizeof(drained));
      lock.Lock();
    }
    if (shutdown_) break;
    if (pid_ != 0) {
      std::string how;
      if (ExitedLocked(&how)) {
        auto ran = Clock::now() - started_at_;
        if (ran >= options_.stable_after) backoff_.Reset();
        pid_t old = pid_;
        pid_ = 0;
        if (wanted_) {
          exited_since_run_ = true;
          auto delay = backoff_.Next();
          next_start_ = Clock::now() + delay;
          ++restarts_;
          spdlog::warn("etcd pid {} {} after {}s; restarting in {}ms", old, how,
                       std::chrono::duration_cast<std::chrono::seconds>(ran).count(),
                       delay.count());
        }
      }
      continue;
    }
    if (wanted_ && Clock::now() >= next_start_) {
      std::string why;
      if (exited_since_run_ && options_.may_restart && !options_.may_restart(&why)) {
        wanted_ = false;
        spdlog::error("not restarting etcd: {}", why);
        continue;
      }
      StartLocked();
    }
  }
  if (watched_fd >= 0) ::close(watched_fd);
}

absl::Status ProcessRunner::Stop() { return Stop(options_.stop_timeout); }

absl::Status ProcessRunner::Stop(std::chrono::milliseconds grace) {
  MutexLock lock(&mu_);
  wanted_ = false;
  if (pid_ == 0) {
    ::unlink(options_.pid_path.c_str());
    return absl::OkStatus();
  }
  const pid_t pid = pid_;
  spdlog::info("stopping etcd pid {} (SIGTERM, SIGKILL after {}ms)", pid, grace.count());
  ::kill(pid, SIGTERM);
  auto wait_gone = [&](std::chrono::milliseconds limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto deadline = Clock::now() + limit;
    std::string how;
    while (Clock::now() < deadline) {
      if (pid_ == 0 || ExitedLocked(&how)) {
        pid_ = 0;
        return true;
      }
      cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
    }
    return false;
  };
  if (!wait_gone(grace)) {
    spdlog::warn("etcd pid {} did not stop within {}ms; sending SIGKILL", pid, grace.count());
    ::kill(pid, SIGKILL);
    if (!wait_gone(std::chrono::milliseconds(5000))) {
      return absl::DeadlineExceededError(absl::StrCat("etcd pid ", pid, " survived SIGKILL"));
    }
  }
  ::unlink(options_.pid_path.c_str());
  spdlog::info("etcd pid {} stopped", pid);
  return absl::OkStatus();
}

}  // namespace steward
