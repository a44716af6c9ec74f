// Whether this node's etcd, running but not answering, is hung, and what its own agent does
// about it: a pure function from what the agent observed (its watchdog, node/hang_watch.h) to
// one action with the reason. No I/O and no clock: tests/unit/hang_decision_test.cc tables each
// rule, and switching a rule off (common/rules.h) shows what it prevents.
//
// A member is judged by what it does: a linearizable read through its own client URL, bounded
// by a deadline. A hung member is restarted in place, never wiped: its data is good (etcd
// fsyncs before it acknowledges). The leader replaces a member only under its rules for a dead
// member (replace_after), which a hang bound well under it lets a restart in place come first.
//
// Rules, in order (the first that applies decides):
//   H1 its own linearizable read answered: not hung (the episode, if any, ends).
//   H2 etcd is not meant to run here, or has no process, or is busy by what this agent knows:
//      starting (less than the bound since it was started), a join, a restore, fenced, held
//      by the leader, or a learner (a learner serves no linearizable read): wait.
//   H3 the other members do not serve a linearizable read either: that is a quorum problem,
//      not this member's, and a restart could cost the quorum a voter that is merely slow to
//      elect: wait.
//   H4 it reports a defragmentation in flight (etcd_disk_defrag_inflight, on its /metrics):
//      a defrag blocks reads for as long as it takes: wait.
//   H5 unanswered for less than the bound (a long fsync, a compaction, a slow apply): wait.
//   H6 its process is in uninterruptible I/O (state D): its data dir's filesystem does not
//      complete writes (frozen or dead). A signal cannot end it before the I/O does, so no
//      restart is tried: say so, and let the leader's rules for a dead member decide.
//   H7 restarted in place kMaxHangRestarts times this episode and still unanswered: give up
//      restarting, say so; the leader's rules for a dead member decide.
//   H8 otherwise: restart it in place (SIGTERM, SIGCONT so a stopped process can act on it,
//      SIGKILL after the grace); the runner starts it again on the same data.
#pragma once

#include <chrono>
#include <string>

namespace steward {

inline constexpr int kMaxHangRestarts = 2;

struct HangView {
  std::string node;
  bool wanted = false;         // the runner is meant to keep etcd running
  bool has_pid = false;        // a process runs now
  std::string busy;            // H2: what keeps it from answering by design ("" none)
  bool own_reads = false;      // H1: its own linearizable read answered
  bool others_serve = false;   // H3: a linearizable read answered through another member
  bool defragmenting = false;  // H4
  // How long its reads have gone unanswered: since the last answer, or since the last
  // restart in place, whichever is later.
  std::chrono::milliseconds unanswered_for{0};
  std::chrono::milliseconds bound{30000};
  char process_state = '?';  // /proc/<pid>/stat's state: R S D T t Z, '?' unknown
  int restarts = 0;          // restarts in place this episode
};

enum class HangAction {
  kHealthy,  // H1
  kWait,     // H2-H5: not (yet) hung, or not this member's problem
  kStuck,    // H6, H7: hung, and a restart in place cannot help
  kRestart,  // H8
};

const char* HangActionName(HangAction a);

struct HangDecision {
  HangAction action = HangAction::kWait;
  std::string rule;    // "H1".."H8"
  std::string reason;  // for logs, status and history
};

HangDecision DecideHang(const HangView& view);

}  // namespace steward
