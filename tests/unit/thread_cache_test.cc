// common/thread_cache.h: every task starts at once on a thread of its own, threads are reused
// by later tasks, and idle ones end; with a bound, tasks beyond it wait for a free thread, and
// Close() runs what is queued.
#include "common/thread_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "common/fan_out.h"
#include "control/env.h"

namespace steward {
namespace {

using std::chrono::milliseconds;

// Waits (bounded) until `pred` holds.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::seconds bound = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return pred();
}

TEST(ThreadCacheTest, TasksThatWaitForEachOtherAllRun) {
  ThreadCache cache(std::chrono::seconds(60));
  // Each task waits until all three have started: only threads of their own let that happen.
  std::atomic<int> started{0};
  std::promise<void> p1, p2, p3;
  std::promise<void>* done[] = {&p1, &p2, &p3};
  for (auto* d : done) {
    cache.Run([&started, d] {
      ++started;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      d->set_value();
    });
  }
  for (auto* d : done) d->get_future().wait();
  EXPECT_EQ(started.load(), 3);
  EXPECT_EQ(cache.threads(), 3);
}

TEST(ThreadCacheTest, LaterTasksReuseWaitingThreadsAndIdleOnesEnd) {
  // Long enough that a thread descheduled on a loaded machine (CI runs tests side by side on
  // two cores) is not outlived by its partner: with 300 ms, one ended before the other was idle.
  ThreadCache cache(std::chrono::seconds(3));
  for (int round = 0; round < 5; ++round) {
    // Each task waits (bounded) until both run, so they need two threads: a task that ended
    // before the second was started would rightly leave its thread to take that one (CI saw
    // it: one thread, never two idle).
    std::promise<void> a, b;
    std::atomic<int> started{0};
    auto both = [&started] {
      ++started;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    cache.Run([&a, both] {
      both();
      a.set_value();
    });
    cache.Run([&b, both] {
      both();
      b.set_value();
    });
    a.get_future().wait();
    b.get_future().wait();
    ASSERT_EQ(started.load(), 2);
    // Both threads wait for the next task before the next round.
    ASSERT_TRUE(Eventually([&] { return cache.idle() == 2; }));
    EXPECT_EQ(cache.threads(), 2) << "round " << round << " started threads anew";
  }
  EXPECT_TRUE(Eventually([&] { return cache.threads() == 0; }, std::chrono::seconds(30)))
      << "idle threads must end";
}

// The admin port's use (admin/server.cc): at most `max_threads` at once; the rest wait for a
// free thread, and Close() runs them before it returns.
TEST(ThreadCacheTest, AtItsBoundTasksWaitForAFreeThreadAndCloseRunsThem) {
  ThreadCache cache(std::chrono::seconds(60), "st-test", 2);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> running{0}, ran{0};
  for (int i = 0; i < 5; ++i) {
    cache.Run([&, go] {
      ++running;
      go.wait();
      --running;
      ++ran;
    });
  }
  ASSERT_TRUE(Eventually([&] { return running.load() == 2; }));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(running.load(), 2) << "more than the bound ran at once";
  EXPECT_EQ(cache.threads(), 2);
  release.set_value();
  cache.Close();
  EXPECT_EQ(ran.load(), 5) << "Close() must run what was queued";
  EXPECT_EQ(cache.threads(), 0);
  EXPECT_THROW(cache.Run([] {}), std::system_error) << "a closed cache starts nothing";
}

TEST(ThreadCacheTest, FanOutReturnsResultsInOrder) {
  std::vector<std::function<int()>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back([i] {
      std::this_thread::sleep_for(milliseconds(10 * (4 - i)));  // the first finishes last
      return i * i;
    });
  }
  EXPECT_EQ(FanOut(true, calls), (std::vector<int>{0, 1, 4, 9}));
  EXPECT_EQ(FanOut(false, calls), (std::vector<int>{0, 1, 4, 9}));
}

}  // namespace
}  // namespace steward
