// The default Runner: etcd as a child process of the agent.
//
// etcd runs in its own session (setsid), so a signal to the agent's process group (Ctrl-C) or
// the agent's death does not take etcd down; the pid file in the data dir lets the next agent
// adopt it. stdout/stderr go to a log file, appended, through a descriptor etcd keeps for
// life; the supervisor thread caps the file's size by copy-then-truncate (common/log_rotate.h
// says why not a pipe or a reopen), checked at most every log_check_interval.
//
// The supervisor thread sleeps until etcd exits (a pidfd, for a child or an adopted process),
// Run() wakes it, or a restart is due: an idle agent does not poll. Kernels without pidfd_open
// (before 5.3) fall back to a check every 100 ms.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/backoff.h"
#include "common/log_rotate.h"
#include "common/mutex.h"
#include "runner/runner.h"

namespace steward {

class ProcessRunner : public Runner {
 public:
  struct Options {
    std::string binary;    // etcd executable
    std::string data_dir;  // etcd's --data-dir; identifies "our" etcd when adopting
    std::string pid_path;
    std::string log_path;
    // log_path's cap and copies (max_bytes 0: never rotated), and how often its size is looked
    // at (one stat; the copy, when due, runs on the supervisor thread without the lock).
    LogRotation log_rotation;
    std::chrono::milliseconds log_check_interval{30000};
    std::chrono::milliseconds stop_timeout{10000};
    std::chrono::milliseconds backoff_min{500};
    std::chrono::milliseconds backoff_max{30000};
    // A run that lasted this long resets the backoff.
    std::chrono::milliseconds stable_after{60000};
    // Asked before each restart after an exit (not before the first start): false stops
    // supervising (wanted() becomes false), with `why` logged. Runs on the supervisor thread
    // under the runner's lock: it must not call the runner.
    std::function<bool(std::string* why)> may_restart;
  };

  explicit ProcessRunner(Options options);
  // Stops supervising; leaves etcd running (call Stop() first to stop it).
  ~ProcessRunner() override;

  std::optional<pid_t> Adopt() override;
  void Run(std::vector<std::string> flags) override;
  absl::Status Stop() override;
  absl::Status Stop(std::chrono::milliseconds grace) override;
  bool wanted() const override;
  std::optional<pid_t> pid() const override;
  int restarts() const override;
  void SetBinary(const std::string& binary) override;
  std::string binary() const override;
  std::optional<std::vector<std::string>> running_flags() const override;

  // The arguments of process `pid` after argv[0], from /proc; nullopt if it cannot be read.
  static std::optional<std::vector<std::string>> FlagsOf(pid_t pid);
  // True if `pid` is alive and is `binary` running with --data-dir=`data_dir`. Exposed for tests.
  static bool IsEtcdFor(pid_t pid, const std::string& binary, const std::string& data_dir);
  // Any live process named etcd (argv[0]'s file name) running with --data-dir=`data_dir`:
  // however it was started (a kubelet's container on this host included).
  static std::optional<pid_t> FindEtcdFor(const std::string& data_dir);

 private:
  void SuperviseLoop();
  // Wakes the supervisor thread (Run, shutdown).
  void Wake();
  // REQUIRES: mu_ held. Starts etcd with flags_; records pid_.
  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held. True if pid_ has exited (reaps a child).
  bool ExitedLocked(std::string* how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ not held (a rotation copies up to twice the cap). Rotates log_path if it is
  // over its cap; logs what happened.
  void RotateLog() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  mutable Mutex mu_;
  CondVar cv_;
  const int wake_fd_;  // an eventfd: Wake() makes the supervisor's poll return
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_since_run_ ABSL_GUARDED_BY(mu_) = false;  // etcd exited since the last Run()
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> flags_ ABSL_GUARDED_BY(mu_);
  std::string binary_ ABSL_GUARDED_BY(mu_);  // options_.binary until SetBinary()
  pid_t pid_ ABSL_GUARDED_BY(mu_) = 0;
  bool is_child_ ABSL_GUARDED_BY(mu_) = false;  // false for an adopted process
  std::chrono::steady_clock::time_point started_at_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point next_start_ ABSL_GUARDED_BY(mu_);
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  Backoff backoff_ ABSL_GUARDED_BY(mu_);
  std::thread supervisor_;
};

}  // namespace steward
