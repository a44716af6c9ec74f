// Threads kept for the next short task. The steward leader fans its observations out to every
// agent and member each pass (common/fan_out.h); starting a thread per call each pass
// cost more than the calls themselves at idle (clone, a TLS block for every library that has
// thread-locals, the stack guard) and kept glibc's and the loader's thread code resident. The
// admin port serves its requests on one too (admin/server.cc), with a bound on its threads.
#pragma once

#include <chrono>
#include <climits>
#include <deque>
#include <functional>
#include <string>

#include "common/mutex.h"

namespace steward {

class ThreadCache {
 public:
  // The process's cache (never destroyed: threads waiting in it at exit are simply ended).
  static ThreadCache& Global();

  // Threads are named `name` (at most 15 characters) and at most `max_threads` run at once.
  explicit ThreadCache(std::chrono::milliseconds keep_idle, std::string name = "st-call",
                       int max_threads = INT_MAX)
      : keep_idle_(keep_idle), name_(std::move(name)), max_threads_(max_threads) {}
  // Close().
  ~ThreadCache();
  // Runs what is queued, then waits for the threads to end; later Run()s start no thread.
  void Close();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // Starts `task` at once: on a thread that is waiting for one, else on a new thread (so below
  // `max_threads` a task never waits for another to finish); at `max_threads` it waits for the
  // next free thread. A thread with nothing to do for `keep_idle` ends. `task` must not throw
  // (FanOut wraps its calls in a packaged_task). If no thread can be started (a pids limit),
  // the task waits for a running one; with none running (or after Close()), throws
  // std::system_error with nothing queued.
  void Run(std::function<void()> task);

  // Threads now alive (waiting or running), and those waiting for a task: for tests.
  int threads() const;
  int idle() const;

 private:
  void Work();

  const std::chrono::milliseconds keep_idle_;
  const std::string name_;
  const int max_threads_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  CondVar ended_;
  int threads_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace steward
