#include "backup/drill_scratch.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "common/subprocess.h"

namespace steward {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

absl::StatusOr<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "picking a port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool Listening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::string LastLines(const std::string& path, size_t n) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : " | ", lines[i]);
  }
  return out;
}

absl::Status ScratchEtcd::Start(const std::string& binary, const std::vector<std::string>& args,
                                const std::string& log) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) return ErrnoStatus(errno, "starting the scratch etcd");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::setpriority(PRIO_PROCESS, 0, 10);
    // I/O best effort at its lowest level (class 2 << 13, level 7): below the members'.
    // Not the idle class: etcd's fsyncs would wait as long as the members write, and a
    // member writes all the time.
    ::syscall(SYS_ioprio_set, 1 /*IOPRIO_WHO_PROCESS*/, 0, (2 << 13) | 7);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  return absl::OkStatus();
}

bool ScratchEtcd::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

void ScratchEtcd::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!Exited() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

LeaseKeeper::LeaseKeeper(const std::shared_ptr<grpc::Channel>& channel)
    : stub_(etcdserverpb::Lease::NewStub(channel)), thread_([this] { Run(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void LeaseKeeper::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (cv_.WaitFor(&mu_, std::chrono::seconds(1),
                      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; })) {
        return;
      }
    }
    KeepAll();
  }
}
void LeaseKeeper::KeepAll() {
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5); };
  grpc::ClientContext list;
  list.set_deadline(deadline());
  etcdserverpb::LeaseLeasesResponse leases;
  if (!stub_->LeaseLeases(&list, {}, &leases).ok() || leases.leases_size() == 0) return;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline());
  auto stream = stub_->LeaseKeepAlive(&ctx);
  for (const auto& l : leases.leases()) {
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(l.id());
    etcdserverpb::LeaseKeepAliveResponse resp;
    if (!stream->Write(req) || !stream->Read(&resp)) break;
  }
  stream->WritesDone();
  (void)stream->Finish();  // a lost round is retried in a second
}

}  // namespace steward
