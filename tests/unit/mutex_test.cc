// common/mutex.h: TryLock, a MutexLock that adopts a lock or lets go of it for a while, and a
// CondVar whose waits hand the caller's lock back whichever way they end.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

namespace steward {
namespace {

using std::chrono::milliseconds;

// TryLock from another thread (std::mutex's try_lock by its owner is undefined).
bool TryLockElsewhere(Mutex* mu) {
  auto free = std::async(std::launch::async, [mu] {
    if (!mu->TryLock()) return false;
    mu->Unlock();
    return true;
  });
  return free.get();
}

TEST(MutexTest, TryLockFailsWhileHeldAndAnAdoptingLockReleasesIt) {
  Mutex mu;
  ASSERT_TRUE(mu.TryLock());
  {
    MutexLock lock(&mu, std::adopt_lock);
    EXPECT_FALSE(TryLockElsewhere(&mu));
  }
  EXPECT_TRUE(TryLockElsewhere(&mu));
}

TEST(MutexTest, MutexLockLetsGoUntilLockAndReleasesWhateverItHolds) {
  Mutex mu;
  {
    MutexLock lock(&mu);
    lock.Unlock();
    EXPECT_TRUE(TryLockElsewhere(&mu));
    lock.Lock();
    EXPECT_FALSE(TryLockElsewhere(&mu));
  }
  EXPECT_TRUE(TryLockElsewhere(&mu));
  {
    MutexLock lock(&mu);
    lock.Unlock();  // the scope ends unlocked: nothing is released twice
  }
  EXPECT_TRUE(TryLockElsewhere(&mu));
}

TEST(CondVarTest, WaitForReturnsThePredicateOnTimeoutAndOnNotify) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  {
    MutexLock lock(&mu);
    EXPECT_FALSE(cv.WaitFor(&mu, milliseconds(20), [&] { return ready; }));
  }
  std::thread t([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.NotifyAll();
  });
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(cv.WaitFor(&mu, std::chrono::seconds(10), [&] { return ready; }));
    cv.Wait(&mu, [&] { return ready; });  // true already: returns at once
  }
  t.join();
  EXPECT_TRUE(TryLockElsewhere(&mu));
}

TEST(CondVarTest, APredicateThatThrowsLeavesTheLockWithTheCaller) {
  Mutex mu;
  CondVar cv;
  {
    MutexLock lock(&mu);
    EXPECT_THROW(cv.Wait(&mu, []() -> bool { throw std::runtime_error("predicate"); }),
                 std::runtime_error);
    EXPECT_FALSE(TryLockElsewhere(&mu));  // still held, by this scope
  }
  EXPECT_TRUE(TryLockElsewhere(&mu));
}

}  // namespace
}  // namespace steward
