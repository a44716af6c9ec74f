// The agent's side of the peer API: a gRPC server on the node's agent port that answers
// GetState and executes the leader's orders through a NodeHandler.
//
// Term fencing lives here, not in the handler: an order whose term is older than the newest
// term this agent has seen is refused with FAILED_PRECONDITION before the handler sees it. The
// newest term is kept in a file so an agent restart does not forget it.
//
// Thread-safe: gRPC calls the handler from its own threads; handlers must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "grpcpp/grpcpp.h"
#include "peer/admission.h"
#include "steward_peer.grpc.pb.h"

namespace steward {

class NodeHandler {
 public:
  virtual ~NodeHandler() = default;
  virtual peer::NodeState State() = 0;
  virtual absl::Status Join(const peer::StartRequest& req) = 0;
  virtual absl::Status StopEtcd() = 0;
  virtual absl::Status Wipe(const peer::OrderHeader& header) = 0;
  virtual absl::Status Restore(const peer::RestoreRequest& req) = 0;
  virtual absl::Status Unfence(const peer::UnfenceRequest& req) = 0;
  virtual absl::Status SwitchVersion(const peer::SwitchVersionRequest& req) = 0;
  virtual absl::Status Restart(const peer::RestartRequest& req) = 0;
  virtual absl::Status Destroy(const peer::DestroyRequest& req) = 0;
};

// The newest leader term seen, persisted before it is admitted; the rules are AdmitOrder's
// (peer/admission.h), asked under this guard's lock. Thread-safe.
class TermGuard {
 public:
  static constexpr uint64_t kMaxTerm = steward::kMaxTerm;
  static constexpr uint64_t kMaxTermJump = steward::kMaxTermJump;

  // Persisted in the file at `path`.
  explicit TermGuard(std::string path);
  // Persisted through `load` (the saved text, "" if none) and `save` (the simulation's disk).
  TermGuard(const std::function<std::string()>& load,
            std::function<absl::Status(const std::string&)> save);
  // OK and records `term` if term > newest, or term == newest from the same leader;
  // FailedPrecondition otherwise (rules A2-A6).
  absl::Status Admit(uint64_t term, const std::string& leader);
  // The same for a whole order view (rules A1-A6): its newest_* fields are filled in here.
  absl::Status Admit(OrderView view);
  // OK and records `term` only if it is newer than any seen, in one locked step: two
  // coordinators can never both collect a majority for the same term.
  absl::Status Promise(uint64_t term, const std::string& leader);
  uint64_t newest() const;
  std::string newest_leader() const;  // who gave the newest term ("" if unknown)

 private:
  absl::Status AdmitLocked(OrderView view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held. Persists and admits `term` if it is newer than any seen.
  absl::Status RecordLocked(uint64_t term, const std::string& leader)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::function<absl::Status(const std::string&)> save_;
  mutable Mutex mu_;
  uint64_t newest_ ABSL_GUARDED_BY(mu_) = 0;
  std::string newest_leader_ ABSL_GUARDED_BY(mu_);
};

// What GetState answers: the node's state with the newest term this agent has admitted.
peer::NodeState StateWithTerms(NodeHandler& handler, const TermGuard& terms);

class PeerServer {
 public:
  // `credentials`: InsecureServerCredentials() when TLS is off. With TLS, `cluster` is set and
  // every order (all calls but GetState) is refused with PERMISSION_DENIED unless the caller's
  // certificate carries the agent role of that cluster (AgentRoleUri): an operator's or an
  // application's certificate from the same CA may read state, never give orders.
  PeerServer(std::string address, NodeHandler* handler, TermGuard* terms,
             std::shared_ptr<grpc::ServerCredentials> credentials,
             std::optional<std::string> cluster = std::nullopt);
  ~PeerServer();
  // Called (on a gRPC thread) for each Nudge an agent sends; set before Start().
  void OnNudge(std::function<void(const std::string& from)> fn);
  // Called (on a gRPC thread) when stewardctl asks to renew this node's certificates now; it
  // requests the renewal and returns at once. Set before Start().
  void OnRenewCertificates(std::function<absl::Status()> fn);
  // Called (on a gRPC thread) for stewardctl pki rotate-ca's step on this node (SetTrust);
  // set before Start().
  void OnSetTrust(std::function<absl::Status(const peer::SetTrustRequest&)> fn);
  // Called after each admitted order ran, with its result (the event history); before Start().
  void OnOrder(std::function<void(const std::string& what, const peer::OrderHeader& header,
                                  const absl::Status& result)>
                   fn);
  // Binds and starts serving. Unavailable if the address cannot be bound.
  absl::Status Start();
  void Shutdown();

 private:
  class Service;
  std::string address_;
  std::unique_ptr<Service> service_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<grpc::Server> server_;
};

// Converts between absl and gRPC statuses (codes are numerically identical).
grpc::Status ToGrpc(const absl::Status& s);

}  // namespace steward
