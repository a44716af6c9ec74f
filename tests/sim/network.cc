#include "sim/network.h"

#include "absl/strings/str_cat.h"
#include "peer/admission.h"
#include "sim/world.h"

namespace steward::sim {

using std::chrono::milliseconds;

SimPeer::Speaker::Speaker(World* w, int n) : w(w), before(w->speaker_) { w->speaker_ = n; }
SimPeer::Speaker::~Speaker() { w->speaker_ = before; }

absl::StatusOr<peer::NodeState> SimPeer::GetState(milliseconds) {
  if (auto s = Reach(); !s.ok()) return s;
  Speaker speaker(w_, target_);
  Node& n = *w_->nodes()[target_];
  w_->Refresh();
  peer::NodeState st = n.local->State();
  st.set_highest_term(n.terms->newest());
  st.set_highest_term_leader(n.terms->newest_leader());
  return st;
}

absl::Status SimPeer::Join(const peer::StartRequest& req, milliseconds) {
  return Order(req.header(), "join", [&](LocalNode& l) { return l.Join(req); });
}

absl::Status SimPeer::StopEtcd(const peer::OrderHeader& h, milliseconds) {
  return Order(h, "stop", [&](LocalNode& l) { return l.StopEtcd(); });
}

absl::Status SimPeer::Wipe(const peer::OrderHeader& h, milliseconds) {
  return Order(h, "wipe", [&](LocalNode& l) { return l.Wipe(h); });
}

absl::Status SimPeer::Promise(const peer::OrderHeader& h, milliseconds) {
  if (auto s = Reach(); !s.ok()) return s;
  return Done(w_->Admit(target_, h, "promise", true));
}

absl::Status SimPeer::Restore(const peer::RestoreRequest& req, milliseconds) {
  return Order(req.header(), "restore", [&](LocalNode& l) { return l.Restore(req); });
}

absl::Status SimPeer::Unfence(const peer::UnfenceRequest& req, milliseconds) {
  return Order(req.header(), "unfence", [&](LocalNode& l) { return l.Unfence(req); });
}

absl::Status SimPeer::Restart(const peer::RestartRequest& req, milliseconds) {
  return Order(req.header(), "restart", [&](LocalNode& l) {
    w_->nodes()[target_]->pauses_at_restart_order = w_->nodes()[target_]->mid_call_pauses;
    return l.Restart(req);
  });
}

absl::Status SimPeer::SwitchVersion(const peer::SwitchVersionRequest& req, milliseconds) {
  // (The simulation has no etcd versions: etcd.versions is empty, so no upgrade is planned.)
  return Order(req.header(), "switch-version", [&](LocalNode& l) { return l.SwitchVersion(req); });
}

template <typename Fn>
absl::Status SimPeer::Order(const peer::OrderHeader& h, const char* what, Fn fn) {
  if (auto s = Reach(); !s.ok()) return s;
  if (auto s = w_->Admit(target_, h, what, false); !s.ok()) return s;
  absl::Status result;
  {
    Speaker speaker(w_, target_);
    result = fn(*w_->nodes()[target_]->local);
  }
  return Done(result);
}

absl::Status SimPeer::Reach() {
  w_->CallPoint(caller_);
  if (!w_->AgentAnswers(caller_, target_)) {
    return absl::DeadlineExceededError(
        absl::StrCat("agent ", w_->nodes()[target_]->spec.name, " does not answer"));
  }
  return absl::OkStatus();
}

absl::Status SimPeer::Done(absl::Status s) {
  w_->CallPoint(caller_);
  return s;
}

absl::Status World::Admit(int i, const peer::OrderHeader& h, const char* what, bool promise) {
  Node& n = *nodes_[i];
  absl::Status s = promise ? n.terms->Promise(h.term(), h.leader()) : [&] {
    OrderView v;
    v.what = what;
    v.term = h.term();
    v.leader = h.leader();
    return n.terms->Admit(v);
  }();
  if (!s.ok())
    Trace(i, absl::StrCat("refuses ", what, " from ", h.leader(), " term ", h.term(), ": ",
                          s.message()));
  return s;
}

}  // namespace steward::sim
