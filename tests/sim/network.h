// The network between the nodes, and the peers' API over it. A link can be cut one way or
// both (World::Reach, with the cuts a fault makes in faults.cc); a call reaches a node's agent
// only if the agent runs, is not paused, the link works and its code is not stopped inside a
// call of its own (it would hold its locks). An order then goes through the node's real
// TermGuard (World::Admit) and LocalNode. Every call is a crash point for the caller.
// Single-threaded.
#pragma once

#include <chrono>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "peer/api.h"

namespace steward::sim {

class World;

// The peers' API: a call reaches a node's agent only if it runs, is not paused and the link
// works; the order then goes through the node's real TermGuard and LocalNode.
class SimPeer : public PeerApi {
 public:
  SimPeer(World* w, int caller, int target) : w_(w), caller_(caller), target_(target) {}
  absl::StatusOr<peer::NodeState> GetState(std::chrono::milliseconds) override;
  absl::Status Join(const peer::StartRequest& req, std::chrono::milliseconds) override;
  absl::Status StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds) override;
  absl::Status Wipe(const peer::OrderHeader& h, std::chrono::milliseconds) override;
  absl::Status Promise(const peer::OrderHeader& h, std::chrono::milliseconds) override;
  absl::Status Restore(const peer::RestoreRequest& req, std::chrono::milliseconds) override;
  absl::Status Unfence(const peer::UnfenceRequest& req, std::chrono::milliseconds) override;
  absl::Status Restart(const peer::RestartRequest& req, std::chrono::milliseconds) override;
  absl::Status SwitchVersion(const peer::SwitchVersionRequest& req,
                             std::chrono::milliseconds) override;

 private:
  // The target's log lines while its handler runs.
  struct Speaker {
    Speaker(World* w, int n);
    ~Speaker();
    World* w;
    int before;
  };
  template <typename Fn>
  absl::Status Order(const peer::OrderHeader& h, const char* what, Fn fn);
  absl::Status Reach();
  // The order ran; the caller may still die before it hears so.
  absl::Status Done(absl::Status s);
  World* w_;
  int caller_, target_;
};

}  // namespace steward::sim
