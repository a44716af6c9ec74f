#include "common/thread_cache.h"

#include <pthread.h>

#include <system_error>
#include <thread>

namespace steward {

ThreadCache& ThreadCache::Global() {
  // Longer than any pass interval (cluster.idle_interval is at most 2 min): an idle leader
  // reuses the same threads for good.
  static auto* cache = new ThreadCache(std::chrono::minutes(5));
  return *cache;
}

ThreadCache::~ThreadCache() { Close(); }

void ThreadCache::Close() {
  MutexLock lock(&mu_);
  closing_ = true;
  cv_.NotifyAll();
  // The threads run what is queued before they end (Work).
  ended_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; });
}

void ThreadCache::Run(std::function<void()> task) {
  MutexLock lock(&mu_);
  if (closing_) {
    throw std::system_error(std::make_error_code(std::errc::operation_not_permitted),
                            "thread cache closed");
  }
  // Each queued task needs a thread of its own that is not yet spoken for. The thread starts
  // before the task is queued: if none can be and none runs, the task is not left queued.
  if (static_cast<int>(queue_.size()) + 1 > idle_ && threads_ < max_threads_) {
    try {
      std::thread t([this] { Work(); });  // it waits for `mu_`, so it sees the task below
      ++threads_;
      t.detach();
    } catch (const std::system_error&) {
      if (threads_ == 0) throw;
    }
  }
  queue_.push_back(std::move(task));
  cv_.NotifyOne();
}

int ThreadCache::idle() const {
  MutexLock lock(&mu_);
  return idle_;
}

int ThreadCache::threads() const {
  MutexLock lock(&mu_);
  return threads_;
}

void ThreadCache::Work() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  MutexLock lock(&mu_);
  while (true) {
    if (queue_.empty()) {
      ++idle_;
      const bool woken = cv_.WaitFor(&mu_, keep_idle_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closing_ || !queue_.empty();
      });
      --idle_;
      if (!woken || queue_.empty()) break;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    task();
    task = nullptr;  // what it captured goes before the thread waits again
    lock.Lock();
  }
  --threads_;
  ended_.NotifyAll();
}

}  // namespace steward
