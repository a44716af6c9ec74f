// The event history: every decision the steward leader takes (a step and its result, a new
// reason to wait) and every order a node carries out, appended to etcd under
// /steward/<cluster>/events/ (keys.h), the last `keep` (1,000) kept. `stewardctl history` and the
// status page read it; it lives in etcd, so it survives leader changes (and a restore brings back
// the history as of the backup).
//
// Appending never waits on etcd: events queue in memory (at most 256; the oldest are dropped
// and counted) and a thread of the History's own writes them, retrying while etcd does not
// answer, so the events of a restore, taken while etcd is down, land once it is back.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "etcd/api.h"
#include "nlohmann/json.hpp"

namespace steward {

struct Event {
  int64_t at_ms = 0;   // wall clock of the node that wrote it, ms since the epoch
  uint64_t term = 0;   // the leader's term the event belongs to (0: none)
  std::string node;    // the node that wrote it
  std::string action;  // "add-learner", "promote", "join", "wait", "restore"...
  std::string reason;  // why (the decision's reason)
  std::string result;  // "ok", "failed: ..." or "" for a wait
};

nlohmann::json EventToJson(const Event& e);
// Tolerant: missing fields stay empty.
Event EventFromJson(const nlohmann::json& j);

class History {
 public:
  // `prefix`: EventsPrefix(cluster). `etcd` must outlive this object.
  History(EtcdApi* etcd, std::string prefix, std::string node, size_t keep = 1000);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Queues `e` (its `node` and, when 0, `at_ms` are filled in).
  void Append(Event e);
  // The same for a decision's event: what it did, why, and how it went.
  void Append(uint64_t term, const std::string& action, const std::string& reason,
              const std::string& result);
  // Writes what is queued (up to `timeout`) and stops the writer. Idempotent.
  void Stop(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

 private:
  void WriterLoop();
  // Deletes the oldest events (by creation) beyond `keep_`.
  void Trim();

  EtcdApi* etcd_;
  const std::string prefix_;
  const std::string node_;
  const size_t keep_;
  Mutex mu_;
  CondVar cv_;
  // (queue number, event), and the last queue number given.
  std::deque<std::pair<uint64_t, Event>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seq_ = 0;    // writer thread only
  int since_trim_ = 0;  // writer thread only
  std::thread writer_;
};

// The newest `limit` events under `prefix` (by etcd's creation order) at or after `since_ms`,
// oldest first by the time their node wrote them (at_ms).
absl::StatusOr<std::vector<Event>> ReadHistory(EtcdApi& etcd, const std::string& prefix,
                                               int64_t since_ms = 0, size_t limit = 1000);

}  // namespace steward
