// A stand-in for the kubelet's static-pod handling, for tests on machines without one: it
// watches a manifest directory and runs what each Pod manifest describes (its etcd container's
// command, with `etcd` mapped to the etcd binary here; image and mounts ignored — the host's
// paths are the container's). A new or changed manifest (re)starts its process, a removed one
// stops it (SIGTERM, SIGKILL after the pod's grace period), a process that exits is started
// again after a second, as the kubelet restarts containers. Dot-files are ignored, as the
// kubelet does. Every process it started is stopped by PID in the destructor.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace steward::testing {

class FakeKubelet {
 public:
  FakeKubelet(std::string manifest_dir, std::string etcd_binary, std::string log_dir);
  ~FakeKubelet();
  // The pid running `file` (a manifest's file name), 0 if none.
  pid_t PidOf(const std::string& file);

 private:
  struct Pod {
    std::string text;
    pid_t pid = 0;
    int grace_seconds = 10;
    std::chrono::steady_clock::time_point restart_at;
  };
  void Loop();
  void Sync();
  void Start(const std::string& file, Pod& pod);
  void Kill(Pod& pod);

  const std::string dir_, etcd_, log_dir_;
  std::mutex mu_;
  std::map<std::string, Pod> pods_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace steward::testing
