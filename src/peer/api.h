// The peer API as the leader and the restore coordinator call it: one handle per node's agent.
// PeerClient (client.h) implements it over gRPC; the deterministic simulation (tests/sim/)
// implements it by calling the simulated node directly. Every call has a deadline; an
// unreachable agent is Unavailable or DeadlineExceeded, a refused order the agent's code
// (PermissionDenied, FailedPrecondition, AlreadyExists...).
#pragma once

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "steward_peer.pb.h"

namespace steward {

class PeerApi {
 public:
  virtual ~PeerApi() = default;
  virtual absl::StatusOr<peer::NodeState> GetState(std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Join(const peer::StartRequest& req, std::chrono::milliseconds timeout) = 0;
  virtual absl::Status StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Wipe(const peer::OrderHeader& h, std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Promise(const peer::OrderHeader& h, std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Restore(const peer::RestoreRequest& req,
                               std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Unfence(const peer::UnfenceRequest& req,
                               std::chrono::milliseconds timeout) = 0;
  virtual absl::Status SwitchVersion(const peer::SwitchVersionRequest& req,
                                     std::chrono::milliseconds timeout) = 0;
};

}  // namespace steward
