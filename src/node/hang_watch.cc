#include "node/hang_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace steward {

HangWatch::HangWatch(std::string node, std::chrono::milliseconds bound,
                     std::chrono::milliseconds grace, Clock* clock, HangProbes probes)
    : node_(std::move(node)),
      bound_(bound),
      grace_(grace),
      clock_(clock),
      probes_(std::move(probes)) {}

HangView HangWatch::Observe(std::chrono::steady_clock::time_point now) {
  HangView v;
  v.node = node_;
  v.bound = bound_;
  v.restarts = episode_restarts_;
  v.wanted = probes_.wanted();
  const std::optional<pid_t> pid = probes_.pid();
  v.has_pid = pid.has_value();
  // Another etcd process (the runner restarted it, an order did): a new episode.
  if (pid != last_pid_) {
    last_pid_ = pid;
    pid_seen_at_ = now;
    unanswered_since_.reset();
  }
  if (!v.wanted || !v.has_pid) return v;
  v.own_reads = probes_.own_read().ok();
  if (v.own_reads) return v;
  if (!unanswered_since_) unanswered_since_ = now;
  // A start is busy for the bound: etcd replays its WAL and catches up before it serves.
  const auto since_start = now - pid_seen_at_;
  if (since_start < bound_) {
    v.busy = absl::StrCat("it was started ",
                          std::chrono::duration_cast<std::chrono::seconds>(since_start).count(),
                          "s ago");
  }
  if (v.busy.empty()) v.busy = probes_.busy();
  bool learner = false;
  v.others_serve = probes_.others_read(&learner).ok();
  if (v.busy.empty() && learner) v.busy = "it is a learner (a learner serves no linearizable read)";
  v.process_state = probes_.process_state(*pid);
  // Out of uninterruptible I/O (a file system that thawed, a disk that answered again): its
  // writes complete now, and it gets the whole bound to catch up before a restart.
  if (last_state_ == 'D' && v.process_state != 'D') unanswered_since_ = now;
  last_state_ = v.process_state;
  // A stopped process defragments nothing (and its /metrics would only time out).
  const bool stopped = v.process_state == 'T' || v.process_state == 't';
  v.defragmenting = !stopped && probes_.defragmenting().value_or(false);
  v.unanswered_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - *unanswered_since_);
  return v;
}

HangDecision HangWatch::Round() {
  const auto now = clock_->Now();
  const HangView v = Observe(now);
  HangDecision d = DecideHang(v);
  // Only time while the others serve and nothing explains the silence counts toward the bound:
  // a member frozen through a quorum loss, a defrag or a start gets the whole bound once that
  // ends, rather than a restart the moment the others come back.
  if (d.rule == "H2" || d.rule == "H3" || d.rule == "H4") unanswered_since_.reset();
  if (d.action == HangAction::kHealthy || !v.has_pid || !v.wanted) {
    if (!verdict_.empty() && d.action == HangAction::kHealthy) {
      spdlog::info("etcd on {} answers reads again", node_);
      if (episode_restarts_ > 0 && probes_.record) {
        probes_.record(
            "hang-recovered", verdict_,
            absl::StrCat("answers again after ", episode_restarts_, " restart(s) in place"));
      }
    }
    unanswered_since_.reset();
    episode_restarts_ = 0;
    verdict_.clear();
    last_rule_.clear();
    return d;
  }
  verdict_ = absl::StrCat(d.rule, ": ", d.reason);
  // Between a restart in place and its first answer (the restarted etcd starting, H2, or
  // waiting out the bound again, H5), the episode is still a restart in place: the leader
  // waits for it (plan.h, HG1) rather than replace a member whose etcd is coming back.
  if (episode_restarts_ > 0 && d.action == HangAction::kWait) {
    verdict_ = absl::StrCat("H8: restarted in place ", episode_restarts_, " time(s); ", d.reason);
  }
  if (d.rule != last_rule_) {
    if (d.action == HangAction::kStuck) {
      spdlog::error("{}", verdict_);
      if (probes_.record) probes_.record("hang-stuck", d.reason, "not restarted");
    } else if (d.rule != "H5" || last_rule_.empty()) {
      spdlog::warn("{}", verdict_);
    }
    last_rule_ = d.rule;
  }
  Act(d, v);
  return d;
}

void HangWatch::Act(const HangDecision& d, const HangView& v) {
  if (d.action != HangAction::kRestart || !last_pid_) return;
  const pid_t pid = *last_pid_;
  spdlog::warn("{} (pid {}, process state {}; SIGTERM, SIGKILL after {}ms)", d.reason, pid,
               v.process_state, grace_.count());
  absl::Status s = probes_.restart(pid, grace_);
  ++episode_restarts_;
  ++total_restarts_;
  // The restarted etcd gets the whole bound again.
  unanswered_since_ = clock_->Now();
  if (probes_.record) {
    probes_.record("hang-restart", d.reason,
                   s.ok() ? "restarted in place, data kept" : std::string(s.message()));
  }
}

}  // namespace steward
