#include "peer/client.h"

#include "absl/strings/str_cat.h"
#include "etcd/client.h"

namespace steward {
namespace {
void Deadline(grpc::ClientContext& ctx, std::chrono::milliseconds t) {
  ctx.set_deadline(std::chrono::system_clock::now() + t);
}
}  // namespace

PeerClient::PeerClient(const std::string& address,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
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

absl::Status PeerClient::StartNew(const peer::StartRequest& req, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->StartNew(&ctx, req, &r), absl::StrCat("agent ", address_, ": StartNew"));
}

absl::Status PeerClient::Join(const peer::StartRequest& req, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->Join(&ctx, req, &r), absl::StrCat("agent ", address_, ": Join"));
}

absl::Status PeerClient::StopEtcd(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->StopEtcd(&ctx, h, &r), absl::StrCat("agent ", address_, ": StopEtcd"));
}

absl::Status PeerClient::Wipe(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->Wipe(&ctx, h, &r), absl::StrCat("agent ", address_, ": Wipe"));
}

absl::Status PeerClient::Promise(const peer::OrderHeader& h, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->Promise(&ctx, h, &r), absl::StrCat("agent ", address_, ": Promise"));
}

absl::Status PeerClient::Restore(const peer::RestoreRequest& req, std::chrono::milliseconds t) {
  grpc::ClientContext ctx;
  Deadline(ctx, t);
  peer::OrderReply r;
  return FromGrpc(stub_->Restore(&ctx, req, &r), absl::StrCat("agent ", address_, ": Restore"));
}

}  // namespace steward
