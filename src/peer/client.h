// The leader's side of the peer API: one client per node's agent. Every call has a deadline.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "grpcpp/grpcpp.h"
#include "peer/api.h"
#include "steward_peer.grpc.pb.h"

namespace steward {

// Cancels in-flight calls at once: a shutting-down agent does not wait out an order's deadline
// (a restore order may wait minutes). Once cancelled, every later call fails at once too.
// Thread-safe.
class CallCanceller {
 public:
  void Cancel();
  bool cancelled() const;
  // False (and nothing registered) if already cancelled.
  bool Register(grpc::ClientContext* ctx);
  void Unregister(grpc::ClientContext* ctx);

 private:
  mutable Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
};

class PeerClient : public PeerApi {
 public:
  // `address` is host:port; null credentials mean plain text. `canceller` (optional) can
  // cancel this client's calls.
  PeerClient(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
             std::shared_ptr<CallCanceller> canceller = nullptr);

  absl::StatusOr<peer::NodeState> GetState(std::chrono::milliseconds timeout) override;
  absl::Status Join(const peer::StartRequest& req, std::chrono::milliseconds timeout) override;
  absl::Status StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Wipe(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Promise(const peer::OrderHeader& h, std::chrono::milliseconds timeout) override;
  absl::Status Restore(const peer::RestoreRequest& req, std::chrono::milliseconds timeout) override;
  absl::Status Unfence(const peer::UnfenceRequest& req, std::chrono::milliseconds timeout) override;
  absl::Status SwitchVersion(const peer::SwitchVersionRequest& req,
                             std::chrono::milliseconds timeout) override;
  absl::Status Restart(const peer::RestartRequest& req, std::chrono::milliseconds timeout) override;

  // Asks the leader's agent to reconcile now (this node's state changed). Not an order.
  absl::Status Nudge(const std::string& from, std::chrono::milliseconds timeout);
  // stewardctl destroy / undestroy: the agent checks the store's destroy mark itself.
  absl::Status Destroy(const peer::DestroyRequest& req, std::chrono::milliseconds timeout);
  // stewardctl pki renew: the agent reissues its node's certificates now (not an order).
  absl::Status RenewCertificates(const std::string& by, std::chrono::milliseconds timeout);
  // One phase of a CA rotation on this node (stewardctl pki rotate-ca).
  absl::Status SetTrust(const peer::SetTrustRequest& req, std::chrono::milliseconds timeout);

  const std::string& address() const { return address_; }

 private:
  template <typename Req, typename Call>
  absl::Status Order(const char* what, const Req& req, std::chrono::milliseconds t, Call call);

  std::string address_;
  std::unique_ptr<peer::Peer::Stub> stub_;
  std::shared_ptr<CallCanceller> canceller_;
};

}  // namespace steward
