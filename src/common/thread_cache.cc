#include "common/thread_cache.h"

#include <pthread.h>

#include <thread>

namespace steward {

ThreadCache& ThreadCache::Global() {
  // Longer than any pass interval (cluster.idle_interval is at most 2 min): an idle leader
  // reuses the same threads for good.
  static auto* cache = new ThreadCache(std::chrono::minutes(5));
  return *cache;
}

ThreadCache::~ThreadCache() {
  std::unique_lock lock(mu_);
  closing_ = true;
  cv_.notify_all();
  ended_.wait(lock, [&] { return threads_ == 0; });
}

void ThreadCache::Run(std::function<void()> task) {
  std::lock_guard lock(mu_);
  // Each queued task needs a thread of its own that is not yet spoken for. The thread starts
  // before the task is queued: if it cannot (a pids limit), the task is not left to run later.
  if (static_cast<int>(queue_.size()) + 1 > idle_) {
    std::thread t([this] { Work(); });  // it waits for `mu_`, so it sees the task below
    ++threads_;
    t.detach();
  }
  queue_.push_back(std::move(task));
  cv_.notify_one();
}

int ThreadCache::idle() const {
  std::lock_guard lock(mu_);
  return idle_;
}

int ThreadCache::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

void ThreadCache::Work() {
  pthread_setname_np(pthread_self(), "st-call");
  std::unique_lock lock(mu_);
  while (true) {
    if (queue_.empty()) {
      ++idle_;
      const bool woken =
          cv_.wait_for(lock, keep_idle_, [&] { return closing_ || !queue_.empty(); });
      --idle_;
      if (!woken || queue_.empty()) break;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // what it captured goes before the thread waits again
    lock.lock();
  }
  --threads_;
  ended_.notify_all();
}

}  // namespace steward
