#include "peer/server.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/status.h"
#include "pki/pki.h"
#include "spdlog/spdlog.h"

namespace steward {

peer::NodeState StateWithTerms(NodeHandler& handler, const TermGuard& terms) {
  peer::NodeState out = handler.State();
  out.set_highest_term(terms.newest());
  out.set_highest_term_leader(terms.newest_leader());
  return out;
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

TermGuard::TermGuard(std::string path)
    : TermGuard(
          [path] {
            auto text = ReadFile(path);
            return text.ok() ? *text : std::string();
          },
          [path](const std::string& text) { return WriteFileAtomic(path, text + "\n"); }) {}

TermGuard::TermGuard(const std::function<std::string()>& load,
                     std::function<absl::Status(const std::string&)> save)
    : save_(std::move(save)) {
  // "<term> <leader>\n" (older agents wrote only the term).
  std::vector<std::string> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(load()), ' ', absl::SkipEmpty());
  uint64_t v = 0;
  if (!parts.empty() && absl::SimpleAtoi(parts[0], &v)) newest_ = v;
  if (parts.size() > 1) newest_leader_ = parts[1];
}

absl::Status TermGuard::RecordLocked(uint64_t term, const std::string& leader) {
  if (term < newest_ || (term == newest_ && leader == newest_leader_)) return absl::OkStatus();
  // Persist before admitting: an agent restarted after a promise must still refuse older terms.
  if (absl::Status s = save_(absl::StrCat(term, " ", leader)); !s.ok()) {
    return Annotate(s, "persisting the leader term");
  }
  newest_ = term;
  newest_leader_ = leader;
  return absl::OkStatus();
}

absl::Status TermGuard::AdmitLocked(OrderView v) {
  v.newest_term = newest_;
  v.newest_leader = newest_leader_;
  Admission a = AdmitOrder(v);
  if (!a.status.ok()) return a.status;
  return RecordLocked(v.term, v.leader);
}

absl::Status TermGuard::Admit(OrderView v) {
  MutexLock lock(&mu_);
  return AdmitLocked(std::move(v));
}

absl::Status TermGuard::Admit(uint64_t term, const std::string& leader) {
  OrderView v;
  v.term = term;
  v.leader = leader;
  return Admit(std::move(v));
}

absl::Status TermGuard::Promise(uint64_t term, const std::string& leader) {
  // One locked check-and-record: two promises of the same term can never both succeed.
  OrderView v;
  v.is_promise = true;
  v.term = term;
  v.leader = leader;
  MutexLock lock(&mu_);
  return AdmitLocked(std::move(v));
}

uint64_t TermGuard::newest() const {
  MutexLock lock(&mu_);
  return newest_;
}

std::string TermGuard::newest_leader() const {
  MutexLock lock(&mu_);
  return newest_leader_;
}

class PeerServer::Service final : public peer::Peer::Service {
 public:
  Service(NodeHandler* h, TermGuard* t, std::optional<std::string> cluster)
      : handler_(h), terms_(t), cluster_(std::move(cluster)) {}

  grpc::Status GetState(grpc::ServerContext*, const peer::GetStateRequest*,
                        peer::NodeState* out) override {
    *out = StateWithTerms(*handler_, *terms_);
    return grpc::Status::OK;
  }
  grpc::Status Join(grpc::ServerContext* ctx, const peer::StartRequest* req,
                    peer::OrderReply*) override {
    return Order(ctx, "join", req->header(), [&] { return handler_->Join(*req); });
  }
  grpc::Status StopEtcd(grpc::ServerContext* ctx, const peer::OrderHeader* req,
                        peer::OrderReply*) override {
    return Order(ctx, "stop", *req, [&] { return handler_->StopEtcd(); });
  }
  grpc::Status Wipe(grpc::ServerContext* ctx, const peer::OrderHeader* req,
                    peer::OrderReply*) override {
    return Order(ctx, "wipe", *req, [&] { return handler_->Wipe(*req); });
  }
  grpc::Status Promise(grpc::ServerContext* ctx, const peer::OrderHeader* req,
                       peer::OrderReply*) override {
    OrderView v = View(ctx, "promise", *req);
    v.is_promise = true;
    absl::Status s = terms_->Admit(std::move(v));
    if (!s.ok()) spdlog::warn("refusing promise: {}", s.message());
    return ToGrpc(s);
  }
  grpc::Status Restore(grpc::ServerContext* ctx, const peer::RestoreRequest* req,
                       peer::OrderReply*) override {
    return Order(ctx, "restore", req->header(), [&] { return handler_->Restore(*req); });
  }
  grpc::Status Unfence(grpc::ServerContext* ctx, const peer::UnfenceRequest* req,
                       peer::OrderReply*) override {
    return Order(ctx, "unfence", req->header(), [&] { return handler_->Unfence(*req); });
  }
  grpc::Status SwitchVersion(grpc::ServerContext* ctx, const peer::SwitchVersionRequest* req,
                             peer::OrderReply*) override {
    return Order(ctx, "switch-version", req->header(),
                 [&] { return handler_->SwitchVersion(*req); });
  }
  grpc::Status Restart(grpc::ServerContext* ctx, const peer::RestartRequest* req,
                       peer::OrderReply*) override {
    return Order(ctx, "restart", req->header(), [&] { return handler_->Restart(*req); });
  }
  grpc::Status Nudge(grpc::ServerContext*, const peer::NudgeRequest* req,
                     peer::OrderReply*) override {
    // Any caller the TLS handshake let in (a certificate from the cluster's CA): an agent, or
    // stewardctl after it changed the spec. A nudge only brings a pass forward.
    if (on_nudge_) on_nudge_(req->from());
    return grpc::Status::OK;
  }

  grpc::Status Destroy(grpc::ServerContext* ctx, const peer::DestroyRequest* req,
                       peer::OrderReply*) override {
    // No term and no agent role: stewardctl asks with the operator's certificate, and what the
    // agent acts on is the store's destroy mark, which it reads itself (LocalNode::Destroy).
    spdlog::warn("{} asks to {} (destroy {})", ctx->peer(), req->undo() ? "undestroy" : "destroy",
                 req->destroy_id());
    absl::Status s = handler_->Destroy(*req);
    if (!s.ok()) spdlog::warn("destroy request failed: {}", s.message());
    return ToGrpc(s);
  }

  // OK if the caller's certificate is the operator's or an agent's of this cluster (with TLS
  // on); else the refusal, logged with `what` was asked.
  absl::Status OperatorOrAgent(grpc::ServerContext* ctx, const char* what) {
    if (!cluster_) return absl::OkStatus();
    std::string pem;
    for (const auto& p : ctx->auth_context()->FindPropertyValues("x509_pem_cert")) {
      pem.assign(p.data(), p.size());
    }
    absl::Status s = OperatorOrAgentOf(pem, *cluster_);
    if (!s.ok()) spdlog::warn("refusing {} from {}: {}", what, ctx->peer(), s.message());
    return s;
  }

  grpc::Status SetTrust(grpc::ServerContext* ctx, const peer::SetTrustRequest* req,
                        peer::OrderReply*) override {
    // The operator or an agent of this cluster, as for RenewCertificates.
    if (absl::Status s = OperatorOrAgent(ctx, "a CA rotation step"); !s.ok()) return ToGrpc(s);
    spdlog::info("{} ({}) asks for phase {} of CA rotation {}", req->by(), ctx->peer(),
                 req->phase(), req->rotation_id());
    if (!on_set_trust_) return ToGrpc(absl::UnimplementedError("this agent rotates no CA"));
    absl::Status s = on_set_trust_(*req);
    if (!s.ok()) spdlog::warn("CA rotation step failed: {}", s.message());
    return ToGrpc(s);
  }

  grpc::Status RenewCertificates(grpc::ServerContext* ctx,
                                 const peer::RenewCertificatesRequest* req,
                                 peer::OrderReply* reply) override {
    // The operator (pki init's certificate) or an agent of this cluster: an application's
    // certificate from the same CA must not make every node reissue and restart its agent.
    if (absl::Status s = OperatorOrAgent(ctx, "a renewal of certificates"); !s.ok()) {
      return ToGrpc(s);
    }
    spdlog::info("{} ({}) asks to renew this node's certificates", req->by(), ctx->peer());
    if (!on_renew_) return ToGrpc(absl::UnimplementedError("this agent renews nothing"));
    absl::Status s = on_renew_();
    if (s.ok()) reply->set_detail("renewal requested");
    return ToGrpc(s);
  }

  std::function<void(const std::string&)> on_nudge_;
  std::function<absl::Status()> on_renew_;
  std::function<absl::Status(const peer::SetTrustRequest&)> on_set_trust_;
  std::function<void(const std::string&, const peer::OrderHeader&, const absl::Status&)> on_order_;

 private:
  // What AdmitOrder needs about the caller. With TLS, the caller must be an agent of this
  // cluster (its certificate's URI SAN).
  OrderView View(grpc::ServerContext* ctx, const char* what, const peer::OrderHeader& h) {
    OrderView v;
    v.what = what;
    v.term = h.term();
    v.leader = h.leader();
    if (cluster_) {
      v.roles_checked = true;
      std::string pem;
      for (const auto& p : ctx->auth_context()->FindPropertyValues("x509_pem_cert")) {
        pem.assign(p.data(), p.size());
      }
      auto agent = AgentOfCluster(pem, *cluster_);
      v.caller_is_agent = agent.ok();
      if (!agent.ok()) {
        v.role_error = absl::StrCat(ctx->peer(), ": ", agent.status().message());
      }
    }
    return v;
  }

  template <typename Fn>
  grpc::Status Order(grpc::ServerContext* ctx, const char* what, const peer::OrderHeader& h,
                     Fn fn) {
    if (absl::Status s = terms_->Admit(View(ctx, what, h)); !s.ok()) {
      spdlog::warn("refusing {} order: {}", what, s.message());
      return ToGrpc(s);
    }
    spdlog::info("order from leader {} (term {}): {}", h.leader(), h.term(), what);
    absl::Status s = fn();
    if (!s.ok()) spdlog::warn("{} order failed: {}", what, s.message());
    if (on_order_) on_order_(what, h, s);
    return ToGrpc(s);
  }

  NodeHandler* handler_;
  TermGuard* terms_;
  const std::optional<std::string> cluster_;
};

PeerServer::PeerServer(std::string address, NodeHandler* handler, TermGuard* terms,
                       std::shared_ptr<grpc::ServerCredentials> credentials,
                       std::optional<std::string> cluster)
    : address_(std::move(address)),
      service_(std::make_unique<Service>(handler, terms, std::move(cluster))),
      credentials_(std::move(credentials)) {}

PeerServer::~PeerServer() { Shutdown(); }

void PeerServer::OnSetTrust(std::function<absl::Status(const peer::SetTrustRequest&)> fn) {
  service_->on_set_trust_ = std::move(fn);
}

void PeerServer::OnNudge(std::function<void(const std::string& from)> fn) {
  service_->on_nudge_ = std::move(fn);
}

void PeerServer::OnRenewCertificates(std::function<absl::Status()> fn) {
  service_->on_renew_ = std::move(fn);
}

void PeerServer::OnOrder(
    std::function<void(const std::string& what, const peer::OrderHeader& header,
                       const absl::Status& result)>
        fn) {
  service_->on_order_ = std::move(fn);
}

absl::Status PeerServer::Start() {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(address_, credentials_, &port);
  b.RegisterService(service_.get());
  // The sync server's pollers wake every CQ timeout (10 s by default) to check for shutdown,
  // which Shutdown() signals anyway: an idle agent need not wake for it.
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 30000);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  server_ = b.BuildAndStart();
  if (!server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve the agent API on ", address_));
  }
  return absl::OkStatus();
}

void PeerServer::Shutdown() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
  }
}

}  // namespace steward
