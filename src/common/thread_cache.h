// Threads kept for the next short task. The steward leader fans its observations out to every
// agent and member each pass (reconcile/env.h FanOut); starting a thread per call each pass
// cost more than the calls themselves at idle (clone, a TLS block for every library that has
// thread-locals, the stack guard) and kept glibc's and the loader's thread code resident.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace steward {

class ThreadCache {
 public:
  // The process's cache (never destroyed: threads waiting in it at exit are simply ended).
  static ThreadCache& Global();

  explicit ThreadCache(std::chrono::milliseconds keep_idle) : keep_idle_(keep_idle) {}
  // Waits for the running tasks to finish and the threads to end.
  ~ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // Starts `task` at once: on a thread that is waiting for one, else on a new thread (so a
  // task never waits for another to finish). A thread with nothing to do for `keep_idle` ends.
  // `task` must not throw (FanOut wraps its calls in a packaged_task). Throws std::system_error,
  // with nothing queued, if no thread can be started.
  void Run(std::function<void()> task);

  // Threads now alive (waiting or running), and those waiting for a task: for tests.
  int threads() const;
  int idle() const;

 private:
  void Work();

  const std::chrono::milliseconds keep_idle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::condition_variable ended_;
  int threads_ = 0;
  int idle_ = 0;
  bool closing_ = false;
};

}  // namespace steward
