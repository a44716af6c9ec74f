// The node's watchdog on its own etcd: each round it probes what the member does (a
// linearizable read through its own client URL, bounded), what the other members do, whether
// a defragmentation is in flight, and the process's state; asks DecideHang (hang_decision.h);
// and carries out what it says: nothing, or a restart in place (never a wipe). The agent runs
// Round() on a thread of its own (agent_loops.cc), so a hung etcd never stalls the control loop.
//
// It reaches the world only through HangProbes, so a test can give it any member's behaviour.
// An episode starts with the first unanswered read and ends with the next answer. Its clock
// counts only rounds in which the others serve and nothing explains the silence (H2-H4 stop
// it), and starts again at each restart in place (a restarted etcd gets the whole bound) and
// when the process leaves uninterruptible I/O (its writes complete again).
//
// Not thread-safe: one thread owns it; verdict() and restarts() are copied out by the caller.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "node/hang_decision.h"

namespace steward {

struct HangProbes {
  // A linearizable read through this node's own client URL only, bounded by a deadline.
  std::function<absl::Status()> own_read;
  // A linearizable read through the other members only; `*self_learner` is set when the
  // member list it returns shows this node's member as a learner.
  std::function<absl::Status(bool* self_learner)> others_read;
  // etcd_disk_defrag_inflight from the member's /metrics (etcd 3.4.18+, 3.5.1+); nullopt when
  // /metrics does not answer or does not have it.
  std::function<std::optional<bool>()> defragmenting;
  // The process's state letter (/proc/<pid>/stat), '?' when it cannot be read.
  std::function<char(pid_t)> process_state;
  std::function<std::optional<pid_t>()> pid;
  std::function<bool()> wanted;
  std::function<std::string()> busy;  // LocalNode::HangBusy
  // SIGTERM and SIGCONT to `pid`, SIGKILL after `grace` if it is still there; the runner then
  // starts etcd again on the same data. Returns once the process is gone or SIGKILL was sent.
  std::function<absl::Status(pid_t pid, std::chrono::milliseconds grace)> restart;
  // The event history (action, reason, result); may be null.
  std::function<void(const std::string&, const std::string&, const std::string&)> record;
};

class HangWatch {
 public:
  HangWatch(std::string node, std::chrono::milliseconds bound, std::chrono::milliseconds grace,
            Clock* clock, HangProbes probes);

  // One round: probe, decide, act. Returns what was decided.
  HangDecision Round();

  // The last verdict when etcd does not answer ("H5: ..."), "" while it answers.
  const std::string& verdict() const { return verdict_; }
  // Restarts in place since the watch started.
  int restarts() const { return total_restarts_; }

 private:
  HangView Observe(std::chrono::steady_clock::time_point now);
  void Act(const HangDecision& d, const HangView& v);

  const std::string node_;
  const std::chrono::milliseconds bound_, grace_;
  Clock* clock_;
  HangProbes probes_;
  std::optional<std::chrono::steady_clock::time_point> unanswered_since_;
  std::optional<pid_t> last_pid_;
  // When this pid was first seen: a start (or the agent's adoption of a running etcd) is given
  // the bound to replay its WAL and catch up before it counts as unanswered.
  std::chrono::steady_clock::time_point pid_seen_at_{};
  int episode_restarts_ = 0;
  int total_restarts_ = 0;
  std::string verdict_;
  std::string last_rule_;
  char last_state_ = '?';  // the process state of the last round that read it  // the rule of the
                           // last round, to log a change once
};

}  // namespace steward
