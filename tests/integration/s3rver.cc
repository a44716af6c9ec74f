#include "s3rver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace steward::testing {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Ports are drawn from below Linux's ephemeral range (32768-60999), so an outgoing connection
// cannot take the port between our check and s3rver's bind.
constexpr int kFirstPort = 20000;
constexpr int kPortCount = 10000;

// Runs `op` (bind or connect) on a fresh TCP socket for host:port; true if it succeeded.
template <typename Op>
bool OnPort(const std::string& host, int port, Op op) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    close(fd);
    return false;
  }
  const bool ok = op(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

bool PortFree(const std::string& host, int port) { return OnPort(host, port, ::bind); }
bool Accepts(const std::string& host, int port) { return OnPort(host, port, ::connect); }

// Our environment plus NODE_OPTIONS=--openssl-legacy-provider: on Node 20 without it every
// paginated ListObjectsV2 answers 500 (s3rver's continuation tokens use a legacy cipher).
std::vector<std::string> ChildEnv() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).rfind("NODE_OPTIONS=", 0) != 0) env.emplace_back(*e);
  }
  env.emplace_back("NODE_OPTIONS=--openssl-legacy-provider");
  return env;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = ChildEnv();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Reaps `pid` if it has exited; true if it has.
bool Exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string S3rver::Binary() {
  if (const char* env = std::getenv("S3RVER_BIN"); env != nullptr && *env != '\0') {
    return fs::exists(env) ? env : "";
  }
  // This file is tests/integration/s3rver.cc (CMake compiles it by absolute path); npm installs
  // into tests/s3rver/node_modules.
  const fs::path bin =
      fs::path(__FILE__).parent_path().parent_path() / "s3rver/node_modules/.bin/s3rver";
  return fs::exists(bin) ? bin.string() : "";
}

absl::StatusOr<std::unique_ptr<S3rver>> S3rver::Start(const std::vector<std::string>& buckets,
                                                      const std::string& host,
                                                      const std::string& tls_cert,
                                                      const std::string& tls_key) {
  const std::string bin = Binary();
  if (bin.empty()) return absl::NotFoundError("s3rver is not installed");
  std::string tmpl = (fs::temp_directory_path() / "steward-s3rver-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  std::unique_ptr<S3rver> s(new S3rver());
  s->dir_ = tmpl;
  fs::create_directories(s->dir_ + "/data");

  std::mt19937 rng(std::random_device{}());
  std::string last_log;
  for (int attempt = 0; attempt < 5; ++attempt) {
    int port = 0;
    for (int i = 0; i < 100 && port == 0; ++i) {
      const int candidate = kFirstPort + static_cast<int>(rng() % kPortCount);
      if (PortFree(host, candidate)) port = candidate;
    }
    if (port == 0) return absl::UnavailableError("no free port for s3rver");

    std::vector<std::string> argv = {
        bin,      "--directory",        s->dir_ + "/data",    "--address", host,
        "--port", std::to_string(port), "--service-endpoint", "localhost"};
    for (const auto& b : buckets) {
      argv.push_back("--configure-bucket");
      argv.push_back(b);
    }
    if (!tls_cert.empty()) {
      for (const std::string& a :
           {std::string("--cert"), tls_cert, std::string("--key"), tls_key}) {
        argv.push_back(a);
      }
      s->tls_ = true;
    }
    const std::string log = s->dir_ + "/s3rver.log";
    const pid_t pid = Spawn(argv, log);
    if (pid <= 0) return absl::InternalError(absl::StrCat("cannot run ", bin));
    s->pid_ = pid;
    s->port_ = port;

    // Buckets are configured before s3rver listens: once it accepts, it is ready.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    bool exited = false;
    while (Clock::now() < deadline) {
      if (Exited(pid)) {
        exited = true;
        break;
      }
      if (Accepts(host, port)) {
        s->argv_ = argv;
        s->host_ = host;
        return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!exited) {
      return absl::DeadlineExceededError(
          absl::StrCat("s3rver did not listen on port ", port, " within 30 s:\n", s->LogTail()));
    }
    s->pid_ = 0;
    last_log = ReadAll(log);
    if (last_log.find("EADDRINUSE") == std::string::npos) {
      return absl::InternalError(absl::StrCat("s3rver exited at startup:\n", s->LogTail()));
    }
    // Someone took the port between our check and its bind: another port.
  }
  return absl::UnavailableError(absl::StrCat("s3rver found no free port:\n", last_log));
}

S3rver::~S3rver() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    bool gone = false;
    while (!(gone = Exited(pid_)) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  if (!dir_.empty() && std::getenv("STEWARD_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string S3rver::Endpoint() const {
  return absl::StrCat(tls_ ? "https://" : "http://", host_, ":", port_);
}

std::string S3rver::VhostEndpoint() const { return absl::StrCat("http://s3.localhost:", port_); }

std::string S3rver::LogTail() const {
  const std::string all = ReadAll(dir_ + "/s3rver.log");
  constexpr size_t kTail = 4000;
  return all.size() > kTail ? all.substr(all.size() - kTail) : all;
}

void S3rver::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  bool gone = false;  // Exited() reaps: ask it until it says yes once
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && !(gone = Exited(pid_))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!gone) {
    kill(pid_, SIGKILL);
    const auto kill_deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < kill_deadline && !Exited(pid_)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  pid_ = 0;
}

absl::Status S3rver::Restart() {
  if (pid_ > 0) return absl::FailedPreconditionError("s3rver is running");
  const pid_t pid = Spawn(argv_, dir_ + "/s3rver.log");
  if (pid <= 0) return absl::InternalError("cannot restart s3rver");
  pid_ = pid;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    if (Exited(pid)) {
      pid_ = 0;
      return absl::InternalError(absl::StrCat("s3rver exited at restart:\n", LogTail()));
    }
    if (Accepts(host_, port_)) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("s3rver did not listen again within 30 s");
}

}  // namespace steward::testing
