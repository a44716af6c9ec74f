// The world as the leader's control code (Reconciler, RestoreCoordinator) reaches it, besides
// the etcd handle and the backup store it is given: the clock, the other agents, fresh etcd
// handles for chosen URLs, and whether to fan calls out on threads. RealControlEnv() is
// production (gRPC, the process's clocks, parallel fan-out); the deterministic simulation
// (tests/sim/) builds one over its models and runs everything in order on one thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "config/config.h"
#include "etcd/api.h"
#include "peer/api.h"

namespace grpc {
class ChannelCredentials;
}

namespace steward {

struct ControlEnv {
  Clock* clock = Clock::Real();
  // A handle on `node`'s agent.
  std::function<std::unique_ptr<PeerApi>(const NodeSpec& node)> dial_agent;
  // A handle on the etcd members at `urls`, each call bounded by `timeout`.
  std::function<std::unique_ptr<EtcdApi>(const std::vector<std::string>& urls,
                                         std::chrono::milliseconds timeout)>
      dial_etcd;
  // Observations and orders to several agents run concurrently (false: in order, one thread).
  bool parallel = true;
  // A random 16-bit nonce (restore IDs).
  std::function<uint32_t()> nonce;
  // The agent is shutting down: long waits end early (their step is retried by the next
  // agent or pass). Null: never.
  std::function<bool()> stopping;
};

class CallCanceller;

// gRPC handles with `credentials` (null: plain text) and the real clock. `canceller`
// (optional) cancels the agent handles' in-flight orders at shutdown.
ControlEnv RealControlEnv(const Config& config,
                          std::shared_ptr<grpc::ChannelCredentials> credentials,
                          std::shared_ptr<CallCanceller> canceller = nullptr);

}  // namespace steward
