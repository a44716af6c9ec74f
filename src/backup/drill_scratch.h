// The drill's scratch etcd (drill.cc): a port for it, the process itself (lower CPU and I/O
// priority, killed if its parent dies), the tail of its log, and a keeper of the leases the
// backup brought while deltas are replayed into it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "etcd_rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace steward {

// A port free on 127.0.0.1 right now (the kernel's pick).
absl::StatusOr<int> FreePort();
// Whether something accepts connections on 127.0.0.1:`port`.
bool Listening(int port);
// The last `n` lines of the file at `path`, joined with " | ".
std::string LastLines(const std::string& path, size_t n);

// The scratch etcd: its own process, lower CPU and I/O priority, killed if its parent dies.
class ScratchEtcd {
 public:
  ~ScratchEtcd() { Stop(); }
  // Starts `binary` with `args`, its output to `log`.
  absl::Status Start(const std::string& binary, const std::vector<std::string>& args,
                     const std::string& log);
  // Whether it has exited (and reaped).
  bool Exited();
  // SIGTERM, then SIGKILL after 10 s.
  void Stop();

 private:
  pid_t pid_ = -1;
};

// Keeps the leases the backup brought alive in the scratch etcd while deltas are replayed.
// They were given their full TTL when it started, and a replay can outlast a short one; one
// that expired would delete keys the live cluster still held at the revision compared (the
// live cluster's own expiries come in the deltas, as deletes).
class LeaseKeeper {
 public:
  explicit LeaseKeeper(const std::shared_ptr<grpc::Channel>& channel);
  ~LeaseKeeper();

 private:
  void Run();
  // One keep-alive round for every lease the scratch etcd holds.
  void KeepAll();

  std::unique_ptr<etcdserverpb::Lease::Stub> stub_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace steward
