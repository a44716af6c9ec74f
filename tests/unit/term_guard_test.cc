// Term fencing on the agent side (src/peer/server.h, TermGuard): bounds, persistence, and the
// atomic check-and-record of a promise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "peer/server.h"

namespace steward {
namespace {

std::string TempPath(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("steward-term-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove(p);
  return p.string();
}

TEST(TermGuardTest, OlderOrdersAreRefusedAndTheNewestTermSurvivesARestart) {
  const std::string path = TempPath("persist");
  {
    TermGuard g(path);
    EXPECT_TRUE(g.Admit(10, "n1").ok());
    EXPECT_TRUE(g.Admit(10, "n1").ok()) << "the same leader again";
    EXPECT_TRUE(absl::IsFailedPrecondition(g.Admit(9, "n2")));
  }
  TermGuard again(path);
  EXPECT_EQ(again.newest(), 10u);
  EXPECT_TRUE(absl::IsFailedPrecondition(again.Admit(9, "n2")));
  std::filesystem::remove(path);
}

// Issue 9, path 6: Promise(2^64-1) was persisted, after which every order was refused and the
// coordinator's max + 1 wrapped to 0.
TEST(TermGuardTest, AbsurdTermsAndHugeJumpsAreRefused) {
  const std::string path = TempPath("bounds");
  TermGuard g(path);
  ASSERT_TRUE(g.Admit(100, "n1").ok());
  absl::Status s = g.Promise(UINT64_MAX, "intruder");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(g.Admit(TermGuard::kMaxTerm + 1, "intruder")));
  EXPECT_TRUE(absl::IsInvalidArgument(g.Admit(100 + TermGuard::kMaxTermJump + 1, "intruder")));
  EXPECT_EQ(g.newest(), 100u);
  EXPECT_TRUE(g.Admit(100 + TermGuard::kMaxTermJump, "n2").ok()) << "a large real jump is fine";
  std::filesystem::remove(path);
}

TEST(TermGuardTest, TwoConcurrentPromisesOfOneTermNeverBothSucceed) {
  const std::string path = TempPath("race");
  for (uint64_t term = 1; term <= 200; ++term) {
    TermGuard g(path);
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        if (g.Promise(term * 10, "c").ok()) ++granted;
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(granted.load(), 1) << "term " << term * 10;
  }
  std::filesystem::remove(path);
}

// One term, one leader: a second leader with the same term is refused, and the holder of a
// term survives a restart. (Without this, the leader had to raise its epoch after each order.)
TEST(TermGuardTest, AnEqualTermFromAnotherLeaderIsRefused) {
  const std::string path = TempPath("holder");
  {
    TermGuard g(path);
    ASSERT_TRUE(g.Admit(7, "n1").ok());
    EXPECT_TRUE(g.Admit(7, "n1").ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(g.Admit(7, "n2")));
    EXPECT_EQ(g.newest_leader(), "n1");
  }
  TermGuard again(path);
  EXPECT_EQ(again.newest_leader(), "n1");
  EXPECT_TRUE(absl::IsFailedPrecondition(again.Admit(7, "n2")));
  EXPECT_TRUE(again.Admit(8, "n2").ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace steward
