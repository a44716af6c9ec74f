// The steward agent: wiring and startup/teardown order for one node.
//
// Start() prepares the data dir, adopts an etcd a previous agent left running, and starts the
// control thread. The control thread decides, while etcd is not running, whether this node
// may start it:
//   - the data dir holds a member: start it (etcd rejoins its cluster by itself);
//   - no data, and this node is one of the first cluster.size nodes: start it as a member of the
//     initial cluster, unless a cluster that already knows this node as a started member answers
//     (then the node was wiped and must be re-added as a new member, which the leader does);
//   - otherwise the node is a spare and waits.
// Shutdown() stops the control thread and then etcd.
//
// Thread-safe: Start() and Shutdown() are called once each, from one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "config/config.h"
#include "etcd/client.h"
#include "runner/runner.h"

namespace steward {

class Agent {
 public:
  explicit Agent(Config config);
  ~Agent();

  // REQUIRES: a validated config. Returns FailedPrecondition if the data dir cannot be created.
  absl::Status Start();
  // Stops the control loop and, if `stop_etcd`, etcd (gracefully). Idempotent.
  void Shutdown(bool stop_etcd = true);

  Runner& runner() { return *runner_; }

 private:
  void ControlLoop();
  void MaybeStartEtcd();
  bool HasMemberData() const;
  // Logs `msg` at info, but the same message at most once a minute.
  void Note(const std::string& msg);

  const Config config_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<EtcdClient> peers_client_;  // the other nodes' client URLs
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread control_;
  std::string last_note_;
  std::chrono::steady_clock::time_point last_note_at_;
};

// The agent's main(): flags, config, logging, signals. Returns the process exit status
// (2 for a bad command line or config).
int AgentMain(int argc, char** argv);

}  // namespace steward
