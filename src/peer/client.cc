#include "peer/client.h"

#include "absl/strings/str_cat.h"
#include "etcd/client.h"

namespace steward {
namespace {
void Deadline(grpc::ClientContext& ctx, std::chrono::milliseconds t) {
  ctx.set_deadline(std::chrono::system_clock::now() + t);
}
}  // namespace

void CallCanceller::Cancel() {
  MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
}

bool CallCanceller::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

bool CallCanceller::Register(grpc::ClientContext* ctx) {
  MutexLock lock(&mu_);
  if (cancelled_) return false;
  calls_.insert(ctx);
  return true;
}

void CallCanceller::Unregister(grpc::ClientContext* ctx) {
  MutexLock lock(&mu_);
  calls_.erase(ctx);
}

PeerClient::PeerClient(const std::string& address,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       std::shared_ptr<CallCanceller> canceller)
    : address_(address), canceller_(std::move(canceller)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // see etcd/client.cc: grpc/grpc#34683
  auto creds = credentials ? credentials : grpc::InsecureChannelCredentials();
  stub_ = peer::Peer::NewStub(grpc::CreateCustomChannel(address, creds, args));
}

absl::StatusOr<peer::NodeState> PeerClient::GetState(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Deadline(ctx, timeout);
  peer::NodeState out;
  grpc::Status s = stub_->GetState(&ctx, peer::GetStateRequest(), &out);
  if (!s.ok()) return FromGrpc(s, absl::StrCat("agent ", address_, ": GetState"));
  return out;
}

// Every order is one unary call with a deadline and the same error context.
template <typename Req, typename Call>
absl::Status PeerClient::Order(const char* what, const Req& req, std::chrono::milliseconds t,
                               Call call) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  const std::string context = absl::StrCat("agent ", address_, ": ", what);
  if (canceller_ && !canceller_->Register(&ctx)) {
    return absl::CancelledError(context + ": the agent is shutting down");
  }
  peer::OrderReply r;
  grpc::Status s = (stub_.get()->*call)(&ctx, req, &r);
  if (canceller_) canceller_->Unregister(&ctx);
  return FromGrpc(s, context);
}

absl::Status PeerClient::Join(const peer::StartRequest& req, std::chrono::milliseconds t) {
  return Order("Join", req, t, &peer::Peer::Stub::Join);
}
absl::Status PeerClient::StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  return Order("StopEtcd", h, t, &peer::Peer::Stub::StopEtcd);
}
absl::Status PeerClient::Wipe(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  return Order("Wipe", h, t, &peer::Peer::Stub::Wipe);
}
absl::Status PeerClient::Promise(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  return Order("Promise", h, t, &peer::Peer::Stub::Promise);
}
absl::Status PeerClient::Restore(const peer::RestoreRequest& req, std::chrono::milliseconds t) {
  return Order("Restore", req, t, &peer::Peer::Stub::Restore);
}
absl::Status PeerClient::Unfence(const peer::UnfenceRequest& req, std::chrono::milliseconds t) {
  return Order("Unfence", req, t, &peer::Peer::Stub::Unfence);
}
absl::Status PeerClient::Nudge(const std::string& from, std::chrono::milliseconds t) {
  peer::NudgeRequest req;
  req.set_from(from);
  return Order("Nudge", req, t, &peer::Peer::Stub::Nudge);
}
absl::Status PeerClient::Destroy(const peer::DestroyRequest& req, std::chrono::milliseconds t) {
  return Order("Destroy", req, t, &peer::Peer::Stub::Destroy);
}
absl::Status PeerClient::SetTrust(const peer::SetTrustRequest& req, std::chrono::milliseconds t) {
  return Order("SetTrust", req, t, &peer::Peer::Stub::SetTrust);
}

absl::Status PeerClient::RenewCertificates(const std::string& by, std::chrono::milliseconds t) {
  peer::RenewCertificatesRequest req;
  req.set_by(by);
  return Order("RenewCertificates", req, t, &peer::Peer::Stub::RenewCertificates);
}
absl::Status PeerClient::SwitchVersion(const peer::SwitchVersionRequest& req,
                                       std::chrono::milliseconds t) {
  return Order("SwitchVersion", req, t, &peer::Peer::Stub::SwitchVersion);
}
absl::Status PeerClient::Restart(const peer::RestartRequest& req, std::chrono::milliseconds t) {
  return Order("Restart", req, t, &peer::Peer::Stub::Restart);
}

}  // namespace steward
