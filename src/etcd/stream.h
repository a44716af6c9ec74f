// A gRPC bidirectional stream driven through its own completion queue. The synchronous API's
// Read() waits without a bound, and only a deadline for the whole call can end it; here every
// start, write and read waits at most its own timeout, a read that timed out stays pending for
// the next Read, and Cancel() ends the stream from any thread. Used for the long-lived streams
// an idle agent keeps open (the followers' leader-key watch, the leader's lease keep-alive):
// one message on an open stream costs far less than a call set up and torn down each time.
//
// Single-use (a ClientContext serves one call): once an operation fails the stream is broken
// for good and every later operation returns the same error; open a new one.
// Thread-compatible, except Cancel(), which is thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace steward {

template <typename Req, typename Resp>
class BidiStream {
 public:
  using ReaderWriter = grpc::ClientAsyncReaderWriter<Req, Resp>;
  using Prepare =
      std::function<std::unique_ptr<ReaderWriter>(grpc::ClientContext*, grpc::CompletionQueue*)>;

  explicit BidiStream(std::string what) : what_(std::move(what)) {}
  BidiStream(const BidiStream&) = delete;
  BidiStream& operator=(const BidiStream&) = delete;
  ~BidiStream() { Close(); }

  // Starts the call (`prepare` is a stub's PrepareAsyncX bound to its arguments).
  absl::Status Start(const Prepare& prepare, std::chrono::milliseconds timeout) {
    rw_ = prepare(&ctx_, &cq_);
    rw_->StartCall(TagOf(kStart));
    pending_[kStart] = true;
    return Await(kStart, timeout);
  }

  absl::Status Write(const Req& req, std::chrono::milliseconds timeout) {
    if (!error_.ok()) return error_;
    // gRPC allows one write in flight: after a write or start that timed out, none more.
    if (pending_[kStart] || pending_[kWrite]) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat(what_, ": an earlier start or write has not completed")));
    }
    rw_->Write(req, TagOf(kWrite));
    pending_[kWrite] = true;
    return Await(kWrite, timeout);
  }

  // The next message; nullopt when none arrived within `timeout` (the read stays pending).
  absl::StatusOr<std::optional<Resp>> Read(std::chrono::milliseconds timeout) {
    if (!error_.ok()) return error_;
    if (!pending_[kRead] && !read_ready_) {
      rw_->Read(&incoming_, TagOf(kRead));
      pending_[kRead] = true;
    }
    if (!read_ready_) {
      absl::Status s = Await(kRead, timeout);
      if (s.code() == absl::StatusCode::kDeadlineExceeded && error_.ok()) return std::nullopt;
      if (!s.ok()) return s;
    }
    read_ready_ = false;
    return std::optional<Resp>(std::move(incoming_));
  }

  // Thread-safe: pending and later operations fail (CANCELLED) at once.
  void Cancel() { ctx_.TryCancel(); }

 private:
  enum Op { kStart = 0, kWrite, kRead, kFinish, kOps };
  static void* TagOf(Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(op) + 1); }
  static Op OpOf(void* tag) { return static_cast<Op>(reinterpret_cast<intptr_t>(tag) - 1); }

  // Waits until `want` completes or `timeout` passes (DeadlineExceeded, the stream intact).
  absl::Status Await(Op want, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::system_clock::now() + timeout;
    while (pending_[want]) {
      void* tag = nullptr;
      bool ok = false;
      switch (cq_.AsyncNext(&tag, &ok, deadline)) {
        case grpc::CompletionQueue::TIMEOUT:
          return absl::DeadlineExceededError(
              absl::StrCat(what_, ": no answer within ", timeout.count(), "ms"));
        case grpc::CompletionQueue::SHUTDOWN:
          return Fail(absl::UnavailableError(absl::StrCat(what_, ": stream closed")));
        case grpc::CompletionQueue::GOT_EVENT:
          break;
      }
      const Op op = OpOf(tag);
      pending_[op] = false;
      if (op == kRead && ok) read_ready_ = true;
      if (!ok && op != kFinish) return Fail(FinalStatus());
    }
    return error_;
  }

  // The call's status once a start, write or read failed (the stream ended or broke).
  absl::Status FinalStatus() {
    if (!pending_[kFinish] && !finish_called_) {
      finish_called_ = true;
      rw_->Finish(&final_status_, TagOf(kFinish));
      pending_[kFinish] = true;
    }
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
    while (pending_[kFinish]) {
      void* tag = nullptr;
      bool ok = false;
      if (cq_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) break;
      pending_[OpOf(tag)] = false;
    }
    if (pending_[kFinish] || final_status_.ok()) {
      return absl::UnavailableError(absl::StrCat(what_, ": the stream ended"));
    }
    return absl::Status(static_cast<absl::StatusCode>(final_status_.error_code()),
                        absl::StrCat(what_, ": ", final_status_.error_message()));
  }

  absl::Status Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
    return error_;
  }

  // Cancels the call and waits for every operation it started, so nothing completes into a
  // destroyed queue.
  void Close() {
    if (rw_ == nullptr) return;
    ctx_.TryCancel();
    if (!finish_called_) {
      finish_called_ = true;
      rw_->Finish(&final_status_, TagOf(kFinish));
      pending_[kFinish] = true;
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    // Cancelled operations complete at once; Next returns false after the last one.
    while (cq_.Next(&tag, &ok)) pending_[OpOf(tag)] = false;
    rw_.reset();
  }

  const std::string what_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext ctx_;
  std::unique_ptr<ReaderWriter> rw_;
  bool pending_[kOps] = {false, false, false, false};
  bool finish_called_ = false;
  bool read_ready_ = false;
  Resp incoming_;
  grpc::Status final_status_;  // written by gRPC when Finish completes
  absl::Status error_;
};

}  // namespace steward
