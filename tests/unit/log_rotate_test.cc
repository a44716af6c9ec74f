// etcd.log's cap (common/log_rotate.h): rotation by copy-then-truncate keeps N copies, never
// replaces the live file, leaves a writer's O_APPEND descriptor writing at the new end; the
// config keys that set it; and a ProcessRunner whose child writes past a small cap.
#include "common/log_rotate.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "config/config.h"
#include "runner/process_runner.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

class LogRotateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("steward-log-rotate-test-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    log_ = (dir_ / "etcd.log").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app | std::ios::binary) << text;
  }
  static std::string Read(const std::string& path) {
    auto t = ReadFile(path);
    return t.ok() ? *t : "<missing>";
  }
  static uint64_t Size(const std::string& path) {
    std::error_code ec;
    auto s = fs::file_size(path, ec);
    return ec ? 0 : s;
  }
  std::string Copy(int i) const { return absl::StrCat(log_, ".", i); }

  fs::path dir_;
  std::string log_;
};

TEST_F(LogRotateTest, UnderTheCapOrMissingNothingHappens) {
  const LogRotation r{100, 3};
  EXPECT_FALSE(*RotateLogIfOver(log_, r)) << "no file yet";
  Append(log_, std::string(100, 'a'));
  EXPECT_FALSE(*RotateLogIfOver(log_, r)) << "exactly at the cap";
  EXPECT_EQ(Read(log_), std::string(100, 'a'));
  EXPECT_FALSE(fs::exists(Copy(1)));
  Append(log_, std::string(1000, 'b'));
  EXPECT_FALSE(*RotateLogIfOver(log_, LogRotation{0, 3})) << "max_bytes 0: never";
  EXPECT_EQ(Size(log_), 1100u);
}

TEST_F(LogRotateTest, OverTheCapTheContentMovesToDotOneAndTheFileIsTruncatedInPlace) {
  Append(log_, "line 1\nline 2\n");
  struct stat before;
  ASSERT_EQ(::stat(log_.c_str(), &before), 0);
  // The writer's descriptor, as etcd holds it.
  const int writer = ::open(log_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  auto rotated = RotateLogIfOver(log_, LogRotation{10, 3});
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_TRUE(*rotated);
  EXPECT_EQ(Read(Copy(1)), "line 1\nline 2\n");
  struct stat after;
  ASSERT_EQ(::stat(log_.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the live file is never replaced";
  const std::string note = Read(log_);
  EXPECT_EQ(note.rfind("=== steward: ", 0), 0u) << note;
  EXPECT_NE(note.find("etcd.log passed 10B; its earlier lines are in etcd.log.1"),
            std::string::npos)
      << note;
  EXPECT_EQ(std::count(note.begin(), note.end(), '\n'), 1);
  // The writer's next line lands right after the note: no hole of zeros where the old
  // content was.
  ASSERT_EQ(::write(writer, "line 3\n", 7), 7);
  ::close(writer);
  EXPECT_EQ(Read(log_), note + "line 3\n");
  EXPECT_FALSE(fs::exists(dir_ / ".etcd.log.1.tmp"));
}

TEST_F(LogRotateTest, KeepsNCopiesNewestFirst) {
  // Each generation passes the cap alone, and with the note before it stays under twice the
  // cap: every copy is whole.
  const LogRotation r{999, 3};
  for (int gen = 1; gen <= 5; ++gen) {
    Append(log_, absl::StrCat("generation ", gen, "\n", std::string(986, '.'), "\n"));
    ASSERT_TRUE(*RotateLogIfOver(log_, r)) << gen;
    ASSERT_TRUE(fs::exists(log_)) << "the live file is never removed";
  }
  // Each copy starts with the note the rotation before it left, then that generation.
  EXPECT_NE(Read(Copy(1)).find("generation 5\n"), std::string::npos);
  EXPECT_NE(Read(Copy(2)).find("generation 4\n"), std::string::npos);
  EXPECT_NE(Read(Copy(3)).find("generation 3\n"), std::string::npos);
  EXPECT_FALSE(fs::exists(Copy(4)));
}

TEST_F(LogRotateTest, CopiesBeyondALoweredKeepAreRemoved) {
  for (int i = 1; i <= 5; ++i) Append(Copy(i), absl::StrCat("old ", i));
  Append(log_, "new content\n");
  ASSERT_TRUE(*RotateLogIfOver(log_, LogRotation{10, 2}));
  EXPECT_EQ(Read(Copy(1)), "new content\n");
  EXPECT_EQ(Read(Copy(2)), "old 1");
  for (int i = 3; i <= 5; ++i) EXPECT_FALSE(fs::exists(Copy(i))) << i;
}

TEST_F(LogRotateTest, KeepZeroOnlyTruncates) {
  Append(Copy(1), "an old copy");
  Append(log_, std::string(50, 'x'));
  ASSERT_TRUE(*RotateLogIfOver(log_, LogRotation{10, 0}));
  EXPECT_FALSE(fs::exists(Copy(1)));
  const std::string note = Read(log_);
  EXPECT_NE(note.find("its earlier lines were dropped"), std::string::npos);
  EXPECT_EQ(note.find('x'), std::string::npos);
  EXPECT_EQ(std::count(note.begin(), note.end(), '\n'), 1) << "the note alone";
}

TEST_F(LogRotateTest, AFileFarOverTheCapKeepsItsLastCapBytesFromALineStart) {
  // 100 lines of 9 bytes ("line-100\n" to "line-199\n") against a cap of 95: more than twice
  // the cap, as after an agent that was down for long.
  std::string text;
  for (int i = 100; i < 200; ++i) text += absl::StrCat("line-", i, "\n");
  ASSERT_EQ(text.size(), 900u);
  Append(log_, text);
  ASSERT_TRUE(*RotateLogIfOver(log_, LogRotation{95, 1}));
  const std::string copy = Read(Copy(1));
  const size_t first_nl = copy.find('\n');
  ASSERT_NE(first_nl, std::string::npos);
  EXPECT_NE(copy.substr(0, first_nl).find("the first 805 bytes of etcd.log were dropped"),
            std::string::npos)
      << copy;
  // The last 95 bytes start inside line-189: the copy starts at line-190, whole lines only.
  EXPECT_EQ(copy.substr(first_nl + 1), text.substr(810));
  EXPECT_EQ(copy.substr(first_nl + 1, 9), "line-190\n");
}

TEST_F(LogRotateTest, WhenTheCopyCannotBeWrittenTheFileIsTruncatedAllTheSame) {
  // A directory where the copy's dot-file goes: its creation fails as on a full disk (root
  // ignores permissions, so a read-only directory would not do).
  fs::create_directories(dir_ / ".etcd.log.1.tmp");
  Append(log_, std::string(100, 'x'));
  auto rotated = RotateLogIfOver(log_, LogRotation{10, 2});
  ASSERT_FALSE(rotated.ok());
  EXPECT_NE(rotated.status().message().find("keeping a copy: creating"), std::string::npos)
      << rotated.status();
  EXPECT_NE(rotated.status().message().find(log_ + " was truncated all the same"),
            std::string::npos)
      << rotated.status();
  const std::string note = Read(log_);
  EXPECT_EQ(note.find('x'), std::string::npos) << "the cap wins over the content";
  EXPECT_NE(note.find("could not all be kept"), std::string::npos);
  EXPECT_EQ(std::count(note.begin(), note.end(), '\n'), 1) << "the note alone";
  EXPECT_TRUE(fs::exists(log_));
}

TEST(ByteSizeTest, ParsesUnitsAndNamesProblems) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("1500"), 1500u);
  EXPECT_EQ(*ParseByteSize("1500B"), 1500u);
  EXPECT_EQ(*ParseByteSize("64MiB"), 64ULL << 20);
  EXPECT_EQ(*ParseByteSize("64Mi"), 64ULL << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ULL << 30);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512ULL << 10);
  EXPECT_EQ(*ParseByteSize("100MB"), 100000000u);
  EXPECT_EQ(ParseByteSize("64XB").status().message(),
            "\"64XB\": unknown unit \"XB\" (B, KiB, MiB, GiB, or KB, MB, GB)");
  EXPECT_EQ(ParseByteSize("MiB").status().message(),
            "\"MiB\" is not a size such as 64MiB (digits, then a unit)");
  EXPECT_EQ(ParseByteSize("-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("99999999999999999999").status().message(),
            "\"99999999999999999999\" is too large");
  EXPECT_EQ(ParseByteSize("17179869184GiB").status().message(), "\"17179869184GiB\" is too large");
  EXPECT_EQ(FormatByteSize(64ULL << 20), "64MiB");
  EXPECT_EQ(FormatByteSize(1536), "1536B");
  EXPECT_EQ(FormatByteSize(3ULL << 10), "3KiB");
  EXPECT_EQ(FormatByteSize(0), "0B");
}

const char kConfig[] = R"(
cluster:
  name: demo
  nodes:
    - {name: n1, host: 127.0.0.11}
node:
  name: n1
  data_dir: /tmp/steward-log-rotate-test-unused
etcd:
  binary: /bin/true
ETCD_KEYS
tls:
  mode: off
)";

absl::StatusOr<Config> ConfigWith(const std::string& etcd_keys) {
  return ParseConfig(absl::StrReplaceAll(kConfig, {{"ETCD_KEYS", etcd_keys}}), "node.yaml");
}

TEST(EtcdLogConfigTest, DefaultsAndValues) {
  auto c = ConfigWith("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.log_max_size, 64ULL << 20);
  EXPECT_EQ(c->etcd.log_keep, 3);
  c = ConfigWith("  log_max_size: 256MiB\n  log_keep: 10");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.log_max_size, 256ULL << 20);
  EXPECT_EQ(c->etcd.log_keep, 10);
  c = ConfigWith("  log_max_size: 0\n  log_keep: 0");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->etcd.log_max_size, 0u);
  EXPECT_EQ(c->etcd.log_keep, 0);
}

TEST(EtcdLogConfigTest, BadValuesNameTheKey) {
  EXPECT_EQ(ConfigWith("  log_max_size: 64XB").status().message(),
            "node.yaml: etcd.log_max_size: \"64XB\": unknown unit \"XB\" (B, KiB, MiB, GiB, "
            "or KB, MB, GB)");
  EXPECT_EQ(ConfigWith("  log_max_size: 512KiB").status().message(),
            "node.yaml: etcd.log_max_size: must be at least 1MiB (or 0: never rotate), got "
            "\"512KiB\"");
  EXPECT_EQ(ConfigWith("  log_max_size: [1]").status().message(),
            "node.yaml: etcd.log_max_size: must be a size such as 64MiB, or 0");
  EXPECT_EQ(ConfigWith("  log_keep: 101").status().message(),
            "node.yaml: etcd.log_keep: must be between 0 and 100, got 101");
  EXPECT_EQ(ConfigWith("  log_keep: -1").status().message(),
            "node.yaml: etcd.log_keep: must be between 0 and 100, got -1");
  EXPECT_EQ(ConfigWith("  log_keeps: 1").status().code(), absl::StatusCode::kInvalidArgument);
}

// A real child writing through the descriptor the runner gave it, past a small cap: the
// runner's supervisor keeps the file near the cap, keeps `keep` copies, and the child goes on
// writing (no SIGPIPE, no hole).
TEST_F(LogRotateTest, ARunnersChildWritingPastTheCapIsRotatedAndKeepsRunning) {
  const std::string done = (dir_ / "done").string();
  ProcessRunner::Options o;
  o.binary = "/bin/sh";
  o.data_dir = (dir_ / "etcd").string();
  o.pid_path = (dir_ / "etcd.pid").string();
  o.log_path = log_;
  o.log_rotation = {128 << 10, 2};
  o.log_check_interval = std::chrono::milliseconds(50);
  o.stop_timeout = std::chrono::seconds(2);
  ProcessRunner runner(o);
  // 24 lines of 16 KiB, 20 ms apart (384 KiB, three times the cap), then idle.
  runner.Run({"-c", absl::StrCat("i=0; while [ $i -lt 24 ]; do head -c 16383 /dev/zero | tr "
                                 "'\\000' x; echo; i=$((i+1)); sleep 0.02; done; touch ",
                                 done, "; exec sleep 60")});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline &&
         !(fs::exists(done) && Size(log_) <= (128u << 10))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(done)) << "the child stopped writing early";
  // The next check after the last write leaves the file under its cap.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LE(Size(log_), 128u << 10);
  EXPECT_TRUE(fs::exists(Copy(1)));
  EXPECT_TRUE(fs::exists(Copy(2)));
  EXPECT_FALSE(fs::exists(Copy(3)));
  for (int i = 1; i <= 2; ++i) EXPECT_LE(Size(Copy(i)), 256u << 10) << i;
  for (const std::string& f : {log_, Copy(1), Copy(2)}) {
    const std::string text = Read(f);
    EXPECT_EQ(text.find('\0'), std::string::npos) << f << " has a hole";
  }
  auto pid = runner.pid();
  ASSERT_TRUE(pid.has_value());
  EXPECT_EQ(::kill(*pid, 0), 0) << "the child survived every rotation";
  EXPECT_EQ(runner.restarts(), 0);
  ASSERT_TRUE(runner.Stop().ok());
}

}  // namespace
}  // namespace steward
