// A shutting-down agent cancels its orders in flight (CallCanceller, peer/client.h) instead of
// waiting out their deadlines: a restore order may wait minutes. Real gRPC on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "peer/client.h"
#include "peer/server.h"

namespace steward {
namespace {

using std::chrono::milliseconds;

// Answers everything at once, except a restore, which takes as long as `release` is not set
// (at most 20 s).
class SlowRestoreHandler : public NodeHandler {
 public:
  peer::NodeState State() override { return {}; }
  absl::Status Join(const peer::StartRequest&) override { return absl::OkStatus(); }
  absl::Status StopEtcd() override { return absl::OkStatus(); }
  absl::Status Wipe(const peer::OrderHeader&) override { return absl::OkStatus(); }
  absl::Status Unfence(const peer::UnfenceRequest&) override { return absl::OkStatus(); }
  absl::Status SwitchVersion(const peer::SwitchVersionRequest&) override {
    return absl::OkStatus();
  }
  absl::Status Restart(const peer::RestartRequest&) override { return absl::OkStatus(); }
  absl::Status Destroy(const peer::DestroyRequest&) override { return absl::OkStatus(); }
  absl::Status Restore(const peer::RestoreRequest&) override {
    std::unique_lock<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(20), [this] { return release; });
    return absl::OkStatus();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  bool WaitStarted() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [this] { return started; });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
};

TEST(CallCancellerTest, AnOrderInFlightEndsAtOnceWhenCancelledAndLaterOnesFailFast) {
  const std::string address = "127.0.91.1:23901";
  SlowRestoreHandler handler;
  TermGuard terms([] { return std::string(); },
                  [](const std::string&) { return absl::OkStatus(); });
  PeerServer server(address, &handler, &terms, grpc::InsecureServerCredentials());
  ASSERT_TRUE(server.Start().ok());

  auto canceller = std::make_shared<CallCanceller>();
  PeerClient client(address, nullptr, canceller);
  peer::RestoreRequest req;
  req.mutable_header()->set_term(1);
  req.mutable_header()->set_leader("n1");
  absl::Status result;
  auto start = std::chrono::steady_clock::now();
  std::thread call([&] { result = client.Restore(req, std::chrono::minutes(10)); });
  ASSERT_TRUE(handler.WaitStarted());
  canceller->Cancel();
  call.join();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(absl::IsCancelled(result)) << result;
  EXPECT_LT(took, std::chrono::seconds(15)) << "did not wait out the handler";

  // Every later order fails at once, without reaching the agent.
  EXPECT_TRUE(absl::IsCancelled(client.Unfence(peer::UnfenceRequest(), milliseconds(5000))));
  handler.Release();
  server.Shutdown();
}

}  // namespace
}  // namespace steward
