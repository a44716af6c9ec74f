// The peer API as the leader and the restore coordinator call it: one handle per node's agent.
// PeerClient (client.h) implements it over gRPC; the deterministic simulation (tests/sim/)
// implements it by calling the simulated node directly. Every call has a deadline; an
// unreachable agent is Unavailable or DeadlineExceeded, a refused order the agent's code
// (PermissionDenied, FailedPrecondition, AlreadyExists...).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

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
  virtual absl::Status Restart(const peer::RestartRequest& req,
                               std::chrono::milliseconds timeout) = 0;
};

// The agent's handle on itself: GetState is answered in-process (the leader asks every agent,
// itself included, every pass; through its own server that is a TLS round trip for nothing).
// Orders still go through the agent API, so they pass the admission any leader's do.
class SelfPeer : public PeerApi {
 public:
  SelfPeer(std::unique_ptr<PeerApi> remote, std::function<peer::NodeState()> state)
      : remote_(std::move(remote)), state_(std::move(state)) {}
  absl::StatusOr<peer::NodeState> GetState(std::chrono::milliseconds) override { return state_(); }
  absl::Status Join(const peer::StartRequest& req, std::chrono::milliseconds t) override {
    return remote_->Join(req, t);
  }
  absl::Status StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds t) override {
    return remote_->StopEtcd(h, t);
  }
  absl::Status Wipe(const peer::OrderHeader& h, std::chrono::milliseconds t) override {
    return remote_->Wipe(h, t);
  }
  absl::Status Promise(const peer::OrderHeader& h, std::chrono::milliseconds t) override {
    return remote_->Promise(h, t);
  }
  absl::Status Restore(const peer::RestoreRequest& req, std::chrono::milliseconds t) override {
    return remote_->Restore(req, t);
  }
  absl::Status Unfence(const peer::UnfenceRequest& req, std::chrono::milliseconds t) override {
    return remote_->Unfence(req, t);
  }
  absl::Status SwitchVersion(const peer::SwitchVersionRequest& req,
                             std::chrono::milliseconds t) override {
    return remote_->SwitchVersion(req, t);
  }
  absl::Status Restart(const peer::RestartRequest& req, std::chrono::milliseconds t) override {
    return remote_->Restart(req, t);
  }

 private:
  std::unique_ptr<PeerApi> remote_;
  std::function<peer::NodeState()> state_;
};

}  // namespace steward
