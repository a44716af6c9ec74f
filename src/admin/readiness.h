// Readiness of this node's member for a load balancer (GET /readyz), Patroni's /health
// semantics: ready only while etcd runs on this node, serves (not fenced after a restore), is a
// voting member with a leader, and has applied what it committed. A pure function of what the
// agent observed; tests/unit/admin_test.cc tables it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace steward {

struct ReadyView {
  bool etcd_running = false;  // the runner runs etcd (or is restarting it)
  bool fenced = false;        // a restored member serving only the agents (fence port)
  bool status_ok = false;     // the local member answered Status
  std::string status_error;
  bool has_leader = false;
  bool is_learner = false;
  uint64_t raft_index = 0;          // committed
  uint64_t raft_applied_index = 0;  // applied
  std::vector<std::string> errors;  // Status errors that are not alarms
};

// Applied may trail committed by this many entries and still count as caught up.
inline constexpr uint64_t kReadyApplyLag = 1000;

// nullopt when ready; otherwise why not, for the 503 body.
std::optional<std::string> NotReady(const ReadyView& v);

}  // namespace steward
