#include "peer/server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace steward {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

TermGuard::TermGuard(std::string path) : path_(std::move(path)) {
  auto text = ReadFile(path_);
  uint64_t v = 0;
  if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) newest_ = v;
}

absl::Status TermGuard::Admit(uint64_t term, const std::string& leader) {
  std::lock_guard<std::mutex> lock(mu_);
  if (term < newest_) {
    return absl::FailedPreconditionError(absl::StrCat("stale order from ", leader, ": term ", term,
                                                      " is older than term ", newest_));
  }
  if (term > newest_) {
    newest_ = term;
    if (absl::Status s = WriteFileAtomic(path_, absl::StrCat(term, "\n")); !s.ok()) {
      spdlog::warn("persisting leader term: {}", s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status TermGuard::Promise(uint64_t term, const std::string& leader) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term <= newest_) {
      return absl::FailedPreconditionError(absl::StrCat("promise to ", leader, " refused: term ",
                                                        term, " is not newer than ", newest_));
    }
  }
  return Admit(term, leader);
}

uint64_t TermGuard::newest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return newest_;
}

class PeerServer::Service final : public peer::Peer::Service {
 public:
  Service(NodeHandler* h, TermGuard* t) : handler_(h), terms_(t) {}

  grpc::Status GetState(grpc::ServerContext*, const peer::GetStateRequest*,
                        peer::NodeState* out) override {
    *out = handler_->State();
    out->set_highest_term(terms_->newest());
    return grpc::Status::OK;
  }
  grpc::Status StartNew(grpc::ServerContext*, const peer::StartRequest* req,
                        peer::OrderReply*) override {
    return Order("start-new", req->header(), [&] { return handler_->StartNew(*req); });
  }
  grpc::Status Join(grpc::ServerContext*, const peer::StartRequest* req,
                    peer::OrderReply*) override {
    return Order("join", req->header(), [&] { return handler_->Join(*req); });
  }
  grpc::Status StopEtcd(grpc::ServerContext*, const peer::OrderHeader* req,
                        peer::OrderReply*) override {
    return Order("stop", *req, [&] { return handler_->StopEtcd(); });
  }
  grpc::Status Wipe(grpc::ServerContext*, const peer::OrderHeader* req,
                    peer::OrderReply*) override {
    return Order("wipe", *req, [&] { return handler_->Wipe(); });
  }
  grpc::Status Promise(grpc::ServerContext*, const peer::OrderHeader* req,
                       peer::OrderReply*) override {
    return ToGrpc(terms_->Promise(req->term(), req->leader()));
  }
  grpc::Status Restore(grpc::ServerContext*, const peer::RestoreRequest* req,
                       peer::OrderReply*) override {
    return Order("restore", req->header(), [&] { return handler_->Restore(*req); });
  }

 private:
  template <typename Fn>
  grpc::Status Order(const char* what, const peer::OrderHeader& h, Fn fn) {
    if (absl::Status s = terms_->Admit(h.term(), h.leader()); !s.ok()) {
      spdlog::warn("refusing {} order: {}", what, s.message());
      return ToGrpc(s);
    }
    spdlog::info("order from leader {} (term {}): {}", h.leader(), h.term(), what);
    absl::Status s = fn();
    if (!s.ok()) spdlog::warn("{} order failed: {}", what, s.message());
    return ToGrpc(s);
  }

  NodeHandler* handler_;
  TermGuard* terms_;
};

PeerServer::PeerServer(std::string address, NodeHandler* handler, TermGuard* terms,
                       std::shared_ptr<grpc::ServerCredentials> credentials)
    : address_(std::move(address)),
      service_(std::make_unique<Service>(handler, terms)),
      credentials_(std::move(credentials)) {}

PeerServer::~PeerServer() { Shutdown(); }

absl::Status PeerServer::Start() {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(address_, credentials_, &port);
  b.RegisterService(service_.get());
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
