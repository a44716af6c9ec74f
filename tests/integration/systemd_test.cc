// Running under systemd (packaging/systemd/steward.service): the unit verifies, the agent speaks
// sd_notify's protocol on $NOTIFY_SOCKET (READY, RELOADING, STOPPING), and an upgrade of the
// agent (a new binary at its path, then `systemctl reload`, which sends SIGHUP) never restarts
// etcd. Real agents and etcd on 127.0.83.x; no systemd needed (the test plays its socket).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "harness.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kNotify = 83, kUpgrade = 84 };

// The unit, with ExecStart pointed at this build's binary and a config that exists.
TEST(SystemdTest, TheUnitVerifies) {
  // scripts/install-deps.sh --test (the README's test command) installs it.
  ASSERT_EQ(RunCommand({"/usr/bin/test", "-x", "/usr/bin/systemd-analyze"}, 5s).exit_code, 0)
      << "systemd-analyze is not installed";
  const fs::path dir = fs::temp_directory_path() / ("steward-unit-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ifstream in(std::string(SOURCE_DIR) + "/packaging/systemd/steward.service");
  std::string unit((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(unit.empty());
  std::ofstream(dir / "node.yaml") << "# placeholder\n";
  unit = std::regex_replace(
      unit, std::regex("ExecStart=\\S+ --config \\S+"),
      "ExecStart=" + std::string(STEWARD_BIN) + " --config " + (dir / "node.yaml").string());
  std::ofstream(dir / "steward.service") << unit;
  RunResult r =
      RunCommand({"/usr/bin/systemd-analyze", "verify", (dir / "steward.service").string()}, 60s);
  fs::remove_all(dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A datagram socket standing in for systemd's notify socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    ::unlink(path.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  // Until a message containing `what` arrives (bounded by `timeout`); returns that message.
  std::string WaitFor(const std::string& what, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      timeval tv{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      std::string msg(buf, static_cast<size_t>(n));
      if (msg.find(what) != std::string::npos) return msg;
    }
    return "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
};

TEST(SystemdTest, TheAgentNotifiesReadyReloadingAndStopping) {
  TestCluster c(kNotify, 1, 1);
  NotifySocket sock(c.Root() + "/notify.sock");
  ASSERT_TRUE(sock.ok());
  ASSERT_EQ(setenv("NOTIFY_SOCKET", (c.Root() + "/notify.sock").c_str(), 1), 0);
  c.StartAgent(0);
  unsetenv("NOTIFY_SOCKET");
  std::string ready = sock.WaitFor("READY=1", 60s);
  ASSERT_FALSE(ready.empty()) << c.Logs();
  EXPECT_NE(ready.find("MAINPID=" + std::to_string(c.AgentPid(0))), std::string::npos) << ready;
  ASSERT_TRUE(c.WaitHealthy(1, 60s)) << c.Logs();
  c.SignalAgent(0, SIGHUP);
  EXPECT_FALSE(sock.WaitFor("RELOADING=1", 30s).empty()) << c.Logs();
  std::string again = sock.WaitFor("READY=1", 60s);
  EXPECT_NE(again.find("MAINPID=" + std::to_string(c.AgentPid(0))), std::string::npos)
      << "the same process, re-executed: " << again;
  kill(c.AgentPid(0), SIGTERM);
  EXPECT_FALSE(sock.WaitFor("STOPPING=1", 30s).empty()) << c.Logs();
  c.SignalAgent(0, SIGTERM);
}

// Issue 11: replace the binary, reload the service, etcd's pid is unchanged and the agent runs
// the new binary.
TEST(SystemdTest, UpgradingTheAgentNeverRestartsEtcd) {
  TestCluster c(kUpgrade, 3, 3);
  const fs::path bin = fs::path(c.Root()) / "bin";
  fs::create_directories(bin);
  fs::copy_file(STEWARD_BIN, bin / "steward");
  for (int i = 0; i < 3; ++i) c.StartAgentFrom(i, (bin / "steward").string());
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/upgrade/before", "1");
  std::vector<pid_t> etcd;
  for (int i = 0; i < 3; ++i) {
    auto pid = c.EtcdPid(i);
    ASSERT_TRUE(pid.has_value());
    etcd.push_back(*pid);
  }
  // A package upgrade: the new file is written beside the old and renamed over it.
  fs::copy_file(STEWARD_BIN, bin / "steward.new");
  fs::rename(bin / "steward.new", bin / "steward");
  const std::string exe = "/proc/" + std::to_string(c.AgentPid(0)) + "/exe";
  EXPECT_NE(fs::read_symlink(exe).string().find("(deleted)"), std::string::npos)
      << "the running agent is the old file";
  for (int i = 0; i < 3; ++i) kill(c.AgentPid(i), SIGHUP);  // systemctl reload
  EXPECT_TRUE(
      WaitFor([&] { return fs::read_symlink(exe).string() == (bin / "steward").string(); }, 30s))
      << "the agent runs the new binary: " << fs::read_symlink(exe);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();
  Put(c, "/upgrade/after", "1");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.EtcdPid(i), etcd[static_cast<size_t>(i)]) << "node " << i;
}

}  // namespace
}  // namespace steward::testing
