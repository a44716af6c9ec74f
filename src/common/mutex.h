// Locks the compiler checks: std::mutex and std::condition_variable under names that carry
// clang's thread-safety attributes (absl/base/thread_annotations.h).
//
// libstdc++'s std::mutex and std::lock_guard carry no such attributes, so an
// ABSL_GUARDED_BY(mu_) on a std::mutex member checks nothing. On a Mutex it does: clang's
// -Wthread-safety (the ThreadSafety.ClangFindsNoUnguardedAccess test,
// scripts/check_thread_safety.py) rejects a read or write of a guarded member without its lock,
// and a call to an ABSL_EXCLUSIVE_LOCKS_REQUIRED helper (a `*Locked` one) without it.
//
// Why not absl::Mutex: Debian's abseil is built with its deadlock detector on (a lock-order
// graph kept on every acquisition: agent_main.cc turns it off for the agent, nothing does for
// stewardctl or the tests), and its CondVar takes absl::Duration. These are the very std::mutex
// and std::condition_variable the code used before: same behaviour, same cost.
//
//   Mutex     std::mutex: Lock(), Unlock(), TryLock(). Not recursive.
//   MutexLock std::lock_guard, and std::unique_lock's Unlock()/Lock() within its scope.
//   CondVar   std::condition_variable, waiting on a Mutex the caller holds (REQUIRES: held).
//
// A predicate given to CondVar runs with the lock held, but clang analyses a lambda on its own:
// write it `[this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; }`.
//
// Thread-safe as their std:: counterparts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace steward {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Never waits: true (the lock now held) if it was free. Hand it to a MutexLock with
  // std::adopt_lock to have it released at the end of the scope.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  // Takes over `mu`, which the caller holds (a TryLock that succeeded).
  MutexLock(Mutex* mu, std::adopt_lock_t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) : mu_(mu) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Lets go of the lock for a while (a slow call that must not hold it), and takes it again.
  // REQUIRES: Unlock() only while held, Lock() only after Unlock().
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// std::condition_variable on a Mutex. Every wait releases `mu` while it waits and holds it
// again when it returns; a wait may also return spuriously unless it takes a predicate.
class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  // Until `done()` (checked with `mu` held).
  template <class Predicate>
  void Wait(Mutex* mu, Predicate done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    cv_.wait(lock.lock, std::move(done));
  }
  // Until notified (or spuriously), or `timeout` passes.
  template <class Rep, class Period>
  void WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    cv_.wait_for(lock.lock, timeout);
  }
  // Until `done()` or `timeout` passes; returns `done()`.
  template <class Rep, class Period, class Predicate>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout, Predicate done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_for(lock.lock, timeout, std::move(done));
  }

 private:
  // The caller's hold on `mu` as the std::unique_lock that std::condition_variable waits on;
  // the hold stays the caller's whichever way the wait ends (a predicate that throws included).
  struct Adopted {
    explicit Adopted(Mutex* mu) : lock(mu->mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace steward
