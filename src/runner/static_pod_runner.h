// Runs the node's etcd as a kubelet static pod: Run() writes the Pod manifest into the
// kubelet's manifest directory (a dot-file renamed into place: the kubelet ignores dot-files,
// so it never reads half a file), Stop() removes it and waits until etcd is gone. The kubelet
// starts, restarts and stops the container; the agent judges etcd by its data dir (a process
// named etcd running on it, found in /proc: the kubelet's containers share the host's process
// table) and its URLs, not by a child pid.
//
// A supervisor thread watches etcd while it is wanted: an exit counts as a restart (the
// kubelet restarts it), and `may_restart` (D1) is asked then — if it says no, the manifest is
// removed so the kubelet does not start etcd on a vanished data dir.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "runner/runner.h"
#include "runner/static_pod.h"

namespace steward {

class StaticPodRunner : public Runner {
 public:
  struct Options {
    std::string manifest_dir;
    std::string data_dir;  // etcd's --data-dir: how its process is recognized
    StaticPodInput pod;    // everything but the flags
    std::chrono::milliseconds stop_timeout{10000};
    std::chrono::milliseconds poll{500};
    // An etcd wanted but not running for this long counts as one more restart (a container
    // in the kubelet's crash loop), so a refused bootstrap is noticed as under the process
    // runner.
    std::chrono::milliseconds down_counts_as_restart{10000};
    // Stop(): etcd counts as gone once absent this long on end (longer than the kubelet takes
    // to notice a removed manifest, so a crash loop's pause is not taken for a stop).
    std::chrono::milliseconds gone_for{3000};
    std::function<bool(std::string* why)> may_restart;
  };

  explicit StaticPodRunner(Options options);
  ~StaticPodRunner() override;  // stops watching; leaves the manifest (and etcd) in place

  std::optional<pid_t> Adopt() override;
  void Run(std::vector<std::string> flags) override;
  absl::Status Stop() override;
  absl::Status Stop(std::chrono::milliseconds grace) override;
  bool wanted() const override;
  std::optional<pid_t> pid() const override;
  int restarts() const override;
  void SetBinary(const std::string& image) override;
  std::string binary() const override;
  std::optional<std::vector<std::string>> running_flags() const override;

  std::string ManifestPath() const;

 private:
  void Watch();
  absl::Status RemoveManifestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  CondVar cv_;
  std::string image_ ABSL_GUARDED_BY(mu_);  // options_.pod.image until SetBinary()
  // What Run() last rendered: the manifest while wanted.
  std::string manifest_ ABSL_GUARDED_BY(mu_);
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool was_up_ ABSL_GUARDED_BY(mu_) = false;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point down_since_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

}  // namespace steward
