// The leader's side of the peer API: one client per node's agent. Every call has a deadline.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "peer/api.h"
#include "steward_peer.grpc.pb.h"

namespace steward {

class PeerClient : public PeerApi {
 public:
  // `address` is host:port; null credentials mean plain text.
  PeerClient(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials);

  absl::StatusOr<peer::NodeState> GetState(std::chrono::milliseconds timeout) override;
  absl::Status Join(const peer::StartRequest& req, std::chrono::milliseconds timeout) override;
  absl::Status StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Wipe(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Promise(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Restore(const peer::RestoreRequest& req, std::chrono::milliseconds timeout) override;
  absl::Status Unfence(const peer::UnfenceRequest& req, std::chrono::milliseconds timeout) override;

  const std::string& address() const { return address_; }

 private:
  template <typename Req, typename Call>
  absl::Status Order(const char* what, const Req& req, std::chrono::milliseconds t, Call call);

  std::string address_;
  std::unique_ptr<peer::Peer::Stub> stub_;
};

}  // namespace steward
