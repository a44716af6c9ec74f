#include "fake_kubelet.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "yaml-cpp/yaml.h"

extern char** environ;

namespace steward::testing {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

FakeKubelet::FakeKubelet(std::string manifest_dir, std::string etcd_binary, std::string log_dir)
    : dir_(std::move(manifest_dir)), etcd_(std::move(etcd_binary)), log_dir_(std::move(log_dir)) {
  thread_ = std::thread([this] { Loop(); });
}

FakeKubelet::~FakeKubelet() {
  stop_ = true;
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [file, pod] : pods_) Kill(pod);
}

pid_t FakeKubelet::PidOf(const std::string& file) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(file);
  return it == pods_.end() ? 0 : it->second.pid;
}

void FakeKubelet::Loop() {
  while (!stop_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Sync();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void FakeKubelet::Sync() {
  std::map<std::string, std::string> seen;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || e.path().extension() != ".yaml") continue;
    std::ifstream in(e.path());
    seen[name].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (!seen.count(it->first)) {
      Kill(it->second);
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [file, text] : seen) {
    Pod& pod = pods_[file];
    if (pod.text != text) {
      Kill(pod);
      pod.text = text;
      Start(file, pod);
      continue;
    }
    if (pod.pid > 0) {
      int status = 0;
      if (::waitpid(pod.pid, &status, WNOHANG) == pod.pid) {
        pod.pid = 0;
        pod.restart_at = Clock::now() + std::chrono::seconds(1);
      }
    } else if (Clock::now() >= pod.restart_at) {
      Start(file, pod);
    }
  }
}

void FakeKubelet::Start(const std::string& file, Pod& pod) {
  std::vector<std::string> argv;
  try {
    YAML::Node m = YAML::Load(pod.text);
    if (m["kind"].as<std::string>() != "Pod" || !m["spec"]["hostNetwork"].as<bool>()) return;
    pod.grace_seconds = m["spec"]["terminationGracePeriodSeconds"].as<int>(30);
    const YAML::Node c = m["spec"]["containers"][0];
    if (c["image"].as<std::string>("").empty()) return;
    // A hostPath of type Directory that does not exist: the kubelet leaves the pod pending.
    for (const auto& v : m["spec"]["volumes"]) {
      const YAML::Node hp = v["hostPath"];
      if (hp && hp["type"].as<std::string>("") == "Directory" &&
          !fs::is_directory(hp["path"].as<std::string>(""))) {
        pod.restart_at = Clock::now() + std::chrono::seconds(1);
        return;
      }
    }
    for (const auto& a : c["command"]) argv.push_back(a.as<std::string>());
  } catch (const YAML::Exception&) {
    return;  // the kubelet refuses a manifest it cannot read
  }
  if (argv.empty() || argv[0] != "etcd") return;
  argv[0] = etcd_;
  const std::string log = log_dir_ + "/" + file + ".log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) == 0) pod.pid = pid;
  posix_spawn_file_actions_destroy(&fa);
}

void FakeKubelet::Kill(Pod& pod) {
  if (pod.pid <= 0) return;
  ::kill(pod.pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(pod.grace_seconds);
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(pod.pid, &status, WNOHANG) == pod.pid) {
      pod.pid = 0;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pod.pid, SIGKILL);
  ::waitpid(pod.pid, &status, 0);
  pod.pid = 0;
}

}  // namespace steward::testing
