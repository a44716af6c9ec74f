// ReadWalCommit and the J1 rule on real etcd 3.4 data dirs: a bootstrap that never had a
// leader commits only the initial members' configuration entries; a member that had a leader
// has committed more. Loopback 127.0.81.x.
#include "etcd/wal.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "etcd/client.h"
#include "etcd/flags.h"
#include "gtest/gtest.h"
#include "node/start_decision.h"
#include "runner/process_runner.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class RealWalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("real_wal_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Runs etcd as member `name` of `initial` until `until` says so (bounded), then stops it.
  void RunMember(const std::string& name, const std::string& ip,
                 const std::vector<std::pair<std::string, std::string>>& initial,
                 const std::function<bool()>& until, milliseconds bound) {
    ProcessRunner::Options o;
    o.binary = "/usr/bin/etcd";
    o.data_dir = (dir_ / name).string();
    o.pid_path = (dir_ / (name + ".pid")).string();
    o.log_path = (dir_ / (name + ".log")).string();
    ProcessRunner runner(o);
    EtcdLaunch l;
    l.name = name;
    l.data_dir = o.data_dir;
    l.client_url = "http://" + ip + ":2379";
    l.peer_url = "http://" + ip + ":2380";
    l.initial_cluster = initial;
    l.token = "real-wal-test";
    runner.Run(RenderEtcdFlags(l));
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline && !until()) {
      std::this_thread::sleep_for(milliseconds(100));
    }
    ASSERT_TRUE(runner.Stop().ok());
  }
  fs::path dir_;
};

TEST_F(RealWalTest, ABootstrapWithoutALeaderCommitsOnlyTheInitialMembers) {
  // One of three initial members alone: no quorum, no leader, ever.
  const std::vector<std::pair<std::string, std::string>> initial = {
      {"a", "http://127.0.81.11:2380"},
      {"b", "http://127.0.81.12:2380"},
      {"c", "http://127.0.81.13:2380"}};
  RunMember(
      "a", "127.0.81.11", initial, [&] { return fs::exists(dir_ / "a" / "member" / "wal"); },
      milliseconds(10000));
  std::this_thread::sleep_for(milliseconds(100));
  auto commit = ReadWalCommit((dir_ / "a").string());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_LE(*commit, 3u);
  EXPECT_FALSE(EverJoined(false, *commit, 3));
}

TEST_F(RealWalTest, AMemberThatHadALeaderHasCommittedMore) {
  const std::vector<std::pair<std::string, std::string>> initial = {
      {"a", "http://127.0.81.21:2380"}};
  bool wrote = false;
  RunMember(
      "a", "127.0.81.21", initial,
      [&] {
        // A fresh client each time: a channel made before etcd listened backs off.
        EtcdClient client({"http://127.0.81.21:2379"});
        wrote = wrote || client.Put("/k", "v").ok();
        return wrote;
      },
      milliseconds(20000));
  ASSERT_TRUE(wrote) << "etcd never served a write";
  auto commit = ReadWalCommit((dir_ / "a").string());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_GT(*commit, 1u);
  EXPECT_TRUE(EverJoined(false, *commit, 1));
}

}  // namespace
}  // namespace steward
