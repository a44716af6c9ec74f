#include "runner/static_pod_runner.h"

#include <pthread.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "runner/process_runner.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

StaticPodRunner::StaticPodRunner(Options options)
    : options_(std::move(options)), image_(options_.pod.image) {
  watcher_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-staticpod");
    Watch();
  });
}

StaticPodRunner::~StaticPodRunner() {
  {
    MutexLock lock(&mu_);
    shutdown_ = true;
  }
  cv_.NotifyAll();
  watcher_.join();
}

std::string StaticPodRunner::ManifestPath() const {
  return (fs::path(options_.manifest_dir) / StaticPodFileName(options_.pod.node)).string();
}

std::optional<pid_t> StaticPodRunner::Adopt() {
  std::error_code ec;
  if (!fs::exists(ManifestPath(), ec)) return std::nullopt;
  auto pid = ProcessRunner::FindEtcdFor(options_.data_dir);
  if (!pid) {
    // A manifest an earlier agent left, whose etcd is not running: the start decision decides
    // afresh, once the pod is gone for good, rather than letting the kubelet start it
    // unsupervised.
    if (absl::Status s = Stop(); !s.ok()) spdlog::warn("{}", s.message());
    return std::nullopt;
  }
  MutexLock lock(&mu_);
  wanted_ = true;
  was_up_ = true;
  if (auto current = ReadFile(ManifestPath()); current.ok()) manifest_ = *current;
  spdlog::info("adopted the static pod {} (etcd pid {} on {})", ManifestPath(), *pid,
               options_.data_dir);
  return pid;
}

void StaticPodRunner::SetBinary(const std::string& image) {
  MutexLock lock(&mu_);
  image_ = image;
}

std::string StaticPodRunner::binary() const {
  MutexLock lock(&mu_);
  return image_;
}

void StaticPodRunner::Run(std::vector<std::string> flags) {
  MutexLock lock(&mu_);
  StaticPodInput in = options_.pod;
  in.image = image_;
  in.flags = std::move(flags);
  // A launch on member data: the pod needs the WAL dir to start (see StaticPodInput).
  const std::string wal = (fs::path(options_.data_dir) / "member" / "wal").string();
  std::error_code ec;
  if (fs::is_directory(wal, ec)) in.guard_dir = wal;
  auto text = RenderStaticPod(in);
  if (!text.ok()) {
    spdlog::error("cannot render the static pod: {}", text.status().message());
    return;
  }
  wanted_ = true;
  down_since_ = Clock::now();
  manifest_ = *text;
  // An unchanged manifest is not rewritten: the kubelet restarts a pod whose manifest changed.
  auto current = ReadFile(ManifestPath());
  if (current.ok() && *current == *text) return;
  // WriteFileAtomic writes a dot-file beside it and renames it into place.
  if (absl::Status s = WriteFileAtomic(ManifestPath(), *text, 0600); !s.ok()) {
    spdlog::error("writing the static pod manifest: {}", s.message());
    return;
  }
  spdlog::info("wrote the static pod manifest {}", ManifestPath());
  cv_.NotifyAll();
}

absl::Status StaticPodRunner::RemoveManifestLocked() {
  std::error_code ec;
  fs::remove(ManifestPath(), ec);
  if (ec) return ErrnoStatus(ec.value(), "removing " + ManifestPath());
  return absl::OkStatus();
}

absl::Status StaticPodRunner::Stop() { return Stop(options_.stop_timeout); }

absl::Status StaticPodRunner::Stop(std::chrono::milliseconds grace) {
  {
    MutexLock lock(&mu_);
    wanted_ = false;
    if (absl::Status s = RemoveManifestLocked(); !s.ok()) return s;
  }
  // The kubelet notices a removed manifest within its sync period (seconds), then gives the
  // container its termination grace period.
  // Gone for good: absent for a while on end, so that a container between two restarts of a
  // crash loop the kubelet has not yet stopped does not count as stopped.
  const auto deadline = Clock::now() + grace + std::chrono::seconds(30);
  auto absent_since = Clock::time_point::max();
  while (Clock::now() < deadline) {
    if (ProcessRunner::FindEtcdFor(options_.data_dir)) {
      absent_since = Clock::time_point::max();
    } else if (absent_since == Clock::time_point::max()) {
      absent_since = Clock::now();
    } else if (Clock::now() - absent_since >= options_.gone_for) {
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::UnavailableError(
      absl::StrCat("etcd on ", options_.data_dir,
                   " still runs after its static pod manifest was removed "
                   "(is the kubelet running?)"));
}

bool StaticPodRunner::wanted() const {
  MutexLock lock(&mu_);
  return wanted_;
}

std::optional<pid_t> StaticPodRunner::pid() const {
  return ProcessRunner::FindEtcdFor(options_.data_dir);
}

std::optional<std::vector<std::string>> StaticPodRunner::running_flags() const {
  std::optional<pid_t> p = pid();
  if (!p) return std::nullopt;
  return ProcessRunner::FlagsOf(*p);
}

int StaticPodRunner::restarts() const {
  MutexLock lock(&mu_);
  return restarts_;
}

void StaticPodRunner::Watch() {
  MutexLock lock(&mu_);
  while (!shutdown_) {
    cv_.WaitFor(&mu_, options_.poll,
                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_; });
    if (shutdown_ || !wanted_) {
      was_up_ = false;
      continue;
    }
    // A manifest that a failed write left out, or that someone removed or changed, is written
    // again: wanted means the manifest is there.
    if (auto current = ReadFile(ManifestPath()); !current.ok() || *current != manifest_) {
      if (absl::Status s = WriteFileAtomic(ManifestPath(), manifest_, 0600); !s.ok()) {
        spdlog::error("writing the static pod manifest: {}", s.message());
      }
    }
    lock.Unlock();
    const bool up = ProcessRunner::FindEtcdFor(options_.data_dir).has_value();
    lock.Lock();
    if (!wanted_) continue;
    if (up) {
      was_up_ = true;
      continue;
    }
    const bool exited = was_up_;
    const bool stuck = Clock::now() - down_since_ >= options_.down_counts_as_restart;
    if (!exited && !stuck) continue;
    was_up_ = false;
    down_since_ = Clock::now();
    ++restarts_;
    std::string why;
    if (options_.may_restart && !options_.may_restart(&why)) {
      wanted_ = false;
      if (absl::Status s = RemoveManifestLocked(); !s.ok()) spdlog::error("{}", s.message());
      spdlog::error("etcd exited; removed its static pod so the kubelet does not restart it: {}",
                    why);
    }
  }
}

}  // namespace steward
