#include "common/dir_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace steward {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class DirWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dir_watch_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "etcd" / "member");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // How long Wait(limit) took while `during` ran on another thread 100 ms in.
  template <typename Fn>
  std::chrono::milliseconds Timed(DirWatch& w, std::chrono::milliseconds limit, Fn during) {
    std::thread t([&] {
      std::this_thread::sleep_for(100ms);
      during();
    });
    const auto start = std::chrono::steady_clock::now();
    w.Wait(limit);
    const auto took = std::chrono::steady_clock::now() - start;
    t.join();
    return std::chrono::duration_cast<std::chrono::milliseconds>(took);
  }

  fs::path dir_;
};

TEST_F(DirWatchTest, NothingChangingSleepsTheWholeWait) {
  DirWatch w;
  w.Watch({dir_.string(), (dir_ / "etcd").string()});
  const auto start = std::chrono::steady_clock::now();
  w.Wait(300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 290ms);
}

TEST_F(DirWatchTest, ARemovedDataDirWakesItAtOnce) {
  DirWatch w;
  w.Watch({dir_.string(), (dir_ / "etcd").string(), (dir_ / "etcd" / "member").string()});
  EXPECT_LT(Timed(w, 10000ms, [&] { fs::remove_all(dir_ / "etcd"); }), 5000ms);
}

TEST_F(DirWatchTest, ANewEntryWakesItButAFileWriteDoesNot) {
  DirWatch w;
  std::ofstream(dir_ / "etcd" / "member" / "existing") << "x";
  w.Watch({(dir_ / "etcd" / "member").string()});
  w.Wait(0ms);  // drain the creation above
  EXPECT_GE(Timed(w, 500ms, [&] { std::ofstream(dir_ / "etcd" / "member" / "existing") << "y"; }),
            450ms);
  EXPECT_LT(Timed(w, 10000ms, [&] { fs::create_directory(dir_ / "etcd" / "member" / "wal"); }),
            5000ms);
}

TEST_F(DirWatchTest, WakeEndsTheWaitAndMissingDirsAreSkipped) {
  DirWatch w;
  w.Watch({(dir_ / "not-yet").string()});
  EXPECT_LT(Timed(w, 10000ms, [&] { w.Wake(); }), 5000ms);
  // Created later: a second Watch() picks it up.
  fs::create_directory(dir_ / "not-yet");
  w.Watch({(dir_ / "not-yet").string()});
  EXPECT_LT(Timed(w, 10000ms, [&] { fs::create_directory(dir_ / "not-yet" / "x"); }), 5000ms);
}

}  // namespace
}  // namespace steward
