// RAM-backed members (seed 002's goal): node.data_dir on a tmpfs, so every restart of the node
// is a wipe. The node rejoins through healing each time, with every key. Needs root (mount);
// skipped with a message otherwise. Real agents and etcd on 127.0.88.x.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kTmpfs = 88 };

// A tmpfs on `dir` for the test's lifetime (unmounted before the test's dir is removed).
class Tmpfs {
 public:
  explicit Tmpfs(std::string dir) : dir_(std::move(dir)) {}
  ~Tmpfs() { Unmount(); }
  std::string Mount() {
    fs::create_directories(dir_);
    if (::mount("steward-test", dir_.c_str(), "tmpfs", 0, "size=256m,mode=0700") != 0) {
      return std::strerror(errno);
    }
    mounted_ = true;
    return "";
  }
  void Unmount() {
    if (mounted_ && ::umount2(dir_.c_str(), MNT_DETACH) == 0) mounted_ = false;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(TmpfsTest, ARamBackedNodeRestartedThreeTimesRejoinsEachTimeWithAllKeys) {
  // CI runs as root (the README's test command installs with apt-get): there it always runs.
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  TestCluster c(kTmpfs, 3, 3, kFastLeader);
  Tmpfs ram(c.DataDir(2));
  if (std::string err = ram.Mount(); !err.empty()) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << err;
  }
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  for (int round = 1; round <= 3; ++round) {
    Put(c, absl::StrCat("/ram/", round), "v");
    // A reboot of a RAM-backed node: agent and etcd stop, the memory is gone.
    c.SignalAgent(2, SIGTERM);
    ram.Unmount();
    ASSERT_EQ(ram.Mount(), "");
    ASSERT_TRUE(fs::is_empty(c.DataDir(2)));
    c.StartAgent(2);
    ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << "round " << round << "\n" << c.Logs();
    EtcdClient n3 = c.Client(c.ClientUrl(2));
    for (int k = 1; k <= round; ++k) {
      absl::StatusOr<std::optional<std::string>> got = absl::UnavailableError("not read");
      WaitFor(
          [&] {
            got = n3.Get(absl::StrCat("/ram/", k));
            return got.ok() && got->has_value();
          },
          30s);
      ASSERT_TRUE(got.ok() && got->has_value()) << "round " << round << ", key " << k;
    }
  }
  c.SignalAgent(2, SIGTERM);
}

}  // namespace
}  // namespace steward::testing
