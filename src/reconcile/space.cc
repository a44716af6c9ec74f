#include "reconcile/space.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

std::vector<DefragMember> DefragOrder(const std::vector<DefragMember>& members) {
  std::vector<DefragMember> out;
  std::optional<DefragMember> leader;
  for (const DefragMember& m : members) {
    if (!m.reachable || m.endpoint.empty()) continue;
    if (m.is_leader) {
      leader = m;
    } else {
      out.push_back(m);
    }
  }
  if (leader) out.push_back(*leader);
  return out;
}

std::string DefragQuorumBlocker(const std::vector<DefragMember>& members, uint64_t target) {
  int voters = 0, answering_without = 0;
  bool target_votes = false;
  for (const DefragMember& m : members) {
    if (m.is_learner) continue;
    ++voters;
    if (m.id == target) {
      target_votes = true;
    } else if (m.reachable) {
      ++answering_without;
    }
  }
  const int quorum = voters / 2 + 1;
  // A learner does not vote: blocking it never costs the quorum. A one-voter cluster has no
  // other member to serve meanwhile: its defragmentation stalls it, unavoidably.
  if (!target_votes || answering_without >= quorum || voters == 1) return "";
  return absl::StrCat("only ", answering_without,
                      " of the other voting members answer, and a "
                      "quorum of ",
                      voters, " is ", quorum,
                      ": blocking this one for a defragmentation would stall the cluster");
}

absl::StatusOr<std::vector<DefragMember>> ObserveForDefrag(EtcdClient& client,
                                                           milliseconds timeout) {
  auto members = client.MemberList();
  if (!members.ok()) return members.status();
  std::vector<DefragMember> out;
  std::set<uint64_t> leaders;
  for (const MemberInfo& m : *members) {
    DefragMember d;
    d.id = m.id;
    d.name = m.name;
    d.is_learner = m.is_learner;
    if (!m.client_urls.empty()) {
      d.endpoint = m.client_urls.front();
      if (auto st = client.Status(d.endpoint, timeout); st.ok()) {
        d.reachable = st->leader != 0;
        d.db_size = st->db_size;
        if (st->leader != 0) leaders.insert(st->leader);
      }
    }
    out.push_back(d);
  }
  // Members agree on the leader but for a moment during an election; then every one that
  // any member names counts as a leader, so none of them goes first.
  for (DefragMember& d : out) d.is_leader = leaders.count(d.id) > 0;
  return out;
}

SpaceDecision DecideSpace(const SpaceObservation& obs) {
  SpaceDecision d;
  std::vector<std::string> others;
  bool nospace = false;
  for (const AlarmInfo& a : obs.alarms) {
    if (a.alarm == "NOSPACE") {
      nospace = true;
    } else {
      others.push_back(a.alarm);
    }
  }
  // S1: CORRUPT (or anything else) is the operator's.
  if (!nospace) {
    if (!others.empty()) {
      d.kind = SpaceDecision::kWait;
      d.reason = absl::StrCat("alarm ", absl::StrJoin(others, ", "),
                              " is active: it needs an operator (the leader clears only NOSPACE)");
    }
    return d;
  }
  // S2
  if (!obs.quorum) {
    d.kind = SpaceDecision::kWait;
    d.reason = "NOSPACE is active but no quorum answers: nothing is compacted or defragmented";
    return d;
  }
  // S3
  if (obs.failures > 0 && obs.last_failure_at) {
    milliseconds backoff = kSpaceFailureBackoffMin;
    for (int i = 1; i < obs.failures && backoff < kSpaceFailureBackoffMax; ++i) backoff *= 2;
    backoff = std::min(backoff, kSpaceFailureBackoffMax);
    const milliseconds since = obs.now - *obs.last_failure_at;
    if (since < backoff) {
      d.kind = SpaceDecision::kWait;
      d.retry_in = backoff - since;
      d.reason = absl::StrCat("NOSPACE recovery failed ", obs.failures,
                              " time(s) in a row; trying again in ", FormatDuration(d.retry_in));
      return d;
    }
  }
  // S4
  if (obs.last_success_at) {
    const milliseconds since = obs.now - *obs.last_success_at;
    if (since < kSpaceReturnWindow) {
      d.kind = SpaceDecision::kWait;
      d.retry_in = kSpaceReturnWindow - since;
      d.reason = absl::StrCat(
          "NOSPACE is back ", FormatDuration(since),
          " after it was cleared: compaction and defragmentation freed too little, so the live "
          "data is likely over the backend quota (--quota-backend-bytes); delete data or raise "
          "the quota. Not looping: next attempt in ",
          FormatDuration(d.retry_in));
      return d;
    }
  }
  // S5
  d.kind = SpaceDecision::kRecover;
  d.reason = "NOSPACE alarm active with a quorum answering: compact, defragment, disarm";
  return d;
}

SpaceKeeper::SpaceKeeper(EtcdClient* client, History* history, std::function<bool()> confirm_leader,
                         std::string node, Options options)
    : client_(client),
      history_(history),
      confirm_leader_(std::move(confirm_leader)),
      node_(std::move(node)),
      options_(options) {}

milliseconds SpaceKeeper::Now() const {
  return std::chrono::duration_cast<milliseconds>(options_.clock->Now().time_since_epoch());
}

void SpaceKeeper::Record(uint64_t term, const std::string& action, const std::string& reason,
                         const std::string& result) {
  if (history_ != nullptr) history_->Append(term, action, reason, result);
}

bool SpaceKeeper::Pass(uint64_t term) {
  const milliseconds now = Now();
  if (last_check_ && now - *last_check_ < options_.check_every) return false;
  last_check_ = now;
  SpaceObservation obs;
  obs.now = now;
  obs.last_success_at = last_success_at_;
  obs.last_failure_at = last_failure_at_;
  obs.failures = failures_;
  auto alarms = client_->AlarmList();
  obs.quorum = alarms.ok();
  if (alarms.ok()) obs.alarms = *alarms;
  // Without an answer there is nothing known to be wrong: only a known NOSPACE needs a word.
  if (!alarms.ok()) return false;
  SpaceDecision d = DecideSpace(obs);
  last_reason_ = d.reason;
  if (d.kind == SpaceDecision::kNothing) {
    recorded_wait_.clear();
    return false;
  }
  if (d.kind == SpaceDecision::kWait) {
    // Once per kind of wait (the reason's figures change every pass).
    const std::string kind = d.reason.substr(0, d.reason.find_first_of("0123456789"));
    if (kind != recorded_wait_) {
      spdlog::warn("space: {}", d.reason);
      Record(term, "wait", d.reason, "");
      recorded_wait_ = kind;
    }
    return false;
  }
  recorded_wait_.clear();
  if (confirm_leader_ && !confirm_leader_()) return false;
  std::vector<std::string> on;
  for (const AlarmInfo& a : obs.alarms) {
    if (a.alarm == "NOSPACE") on.push_back(HexId(a.member_id));
  }
  const std::string why = absl::StrCat("NOSPACE alarm on member(s) ", absl::StrJoin(on, ", "));
  spdlog::warn(
      "space: {}: compacting to the current revision, defragmenting member by member "
      "(leader last), then disarming",
      why);
  auto done = Recover(obs.alarms);
  if (!done.ok()) {
    ++failures_;
    last_failure_at_ = Now();
    spdlog::error("space: NOSPACE recovery failed: {}", done.status().message());
    Record(term, "nospace-recover", why, absl::StrCat("failed: ", done.status().message()));
    return false;
  }
  failures_ = 0;
  last_failure_at_.reset();
  last_success_at_ = Now();
  spdlog::info("space: NOSPACE cleared: {}", *done);
  Record(term, "nospace-recover", absl::StrCat(why, ": ", *done), "ok");
  return true;
}

absl::StatusOr<std::string> SpaceKeeper::Recover(const std::vector<AlarmInfo>& alarms) {
  // 1. Compact to the revision a member reports now: every older version goes.
  auto view = ObserveForDefrag(*client_, options_.call_timeout);
  if (!view.ok()) return Annotate(view.status(), "reading the members");
  int64_t revision = 0;
  for (const DefragMember& m : *view) {
    if (!m.reachable) continue;
    if (auto st = client_->Status(m.endpoint, options_.call_timeout); st.ok()) {
      revision = std::max(revision, st->revision);
    }
  }
  if (revision <= 0) return absl::UnavailableError("no member reported its revision");
  if (absl::Status s = client_->Compact(revision, /*physical=*/true, options_.defrag_timeout);
      !s.ok() && s.message().find("compacted") == std::string::npos) {
    return Annotate(s, absl::StrCat("compacting to revision ", revision));
  }
  // 2. Defragment, one member at a time, leader last, each checked against a fresh view.
  std::vector<std::string> done;
  int64_t before_total = 0, after_total = 0;
  for (const DefragMember& planned : DefragOrder(*view)) {
    auto now = ObserveForDefrag(*client_, options_.call_timeout);
    if (!now.ok()) return Annotate(now.status(), "reading the members");
    const DefragMember* m = nullptr;
    for (const DefragMember& x : *now) {
      if (x.id == planned.id) m = &x;
    }
    if (m == nullptr || !m->reachable) {
      spdlog::warn("space: skipping {} ({}): it does not answer", planned.name, HexId(planned.id));
      continue;
    }
    if (std::string why = DefragQuorumBlocker(*now, m->id); !why.empty()) {
      return absl::UnavailableError(absl::StrCat("not defragmenting ", m->name, ": ", why));
    }
    if (confirm_leader_ && !confirm_leader_()) {
      return absl::AbortedError("no longer the steward leader");
    }
    if (absl::Status s = client_->Defragment(m->endpoint, options_.defrag_timeout); !s.ok()) {
      return Annotate(s, absl::StrCat("defragmenting ", m->name));
    }
    int64_t after = m->db_size;
    if (auto st = client_->Status(m->endpoint, options_.call_timeout); st.ok()) {
      after = st->db_size;
    }
    before_total += m->db_size;
    after_total += after;
    done.push_back(m->name);
  }
  // 3. Disarm what was raised (a member still over the quota raises it again on its next write).
  for (const AlarmInfo& a : alarms) {
    if (a.alarm != "NOSPACE") continue;
    if (absl::Status s = client_->AlarmDisarm(a.member_id, a.alarm); !s.ok()) {
      return Annotate(s, absl::StrCat("disarming NOSPACE of ", HexId(a.member_id)));
    }
  }
  return absl::StrCat("compacted to revision ", revision, ", defragmented ",
                      absl::StrJoin(done, ", "), " (", before_total, " -> ", after_total,
                      " bytes in all), disarmed");
}

}  // namespace steward
