// etcd's process, as a model: SimRunner is the agent's Runner over the world's node state
// (what the agent asked for, the flags, the restarts, the binary), which dies with the agent as
// ProcessRunner's does. Starting etcd hands over to the cluster model (World::StartEtcd in
// etcd_cluster.cc); the supervisor restarts an etcd that exited when the world ticks the node,
// after LocalNode::MayRestart (D1). A start while the cluster is destroyed is checked here
// (SD1, SD2). Single-threaded.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runner/runner.h"

namespace steward::sim {

class World;
struct Node;

// The runner: etcd as the agent asked for it. Its supervision (restarting an etcd that exited,
// after asking LocalNode::MayRestart) runs when the world ticks the node.
class SimRunner : public Runner {
 public:
  SimRunner(World* w, int node) : w_(w), node_(node) {}
  Node& n();
  std::optional<pid_t> Adopt() override;
  void Run(std::vector<std::string> flags) override;
  absl::Status Stop() override;
  absl::Status Stop(std::chrono::milliseconds) override { return Stop(); }
  bool wanted() const override;
  std::optional<pid_t> pid() const override;
  int restarts() const override;
  void SetBinary(const std::string& binary) override;
  std::string binary() const override;
  std::optional<std::vector<std::string>> running_flags() const override;
  // ProcessRunner's supervisor: an etcd that exited is started again, unless D1 says no.
  void Supervise();

 private:
  World* w_;
  int node_;
};

}  // namespace steward::sim
