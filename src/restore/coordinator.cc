#include "restore/coordinator.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "common/fan_out.h"
#include "common/metrics.h"
#include "common/rules.h"
#include "common/status.h"
#include "control/destroy.h"
#include "etcd/bolt.h"
#include "etcd/keys.h"
#include "etcd/member_id.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

RestoreCoordinator::RestoreCoordinator(const Config& config, BackupStore* store, EtcdApi* etcd,
                                       ControlEnv env)
    : config_(config), store_(store), etcd_(etcd), env_(std::move(env)) {
  for (const auto& n : config_.cluster.nodes) agents_[n.name] = env_.dial_agent(n);
}

void RestoreCoordinator::Note(const std::string& msg) {
  repeats_.Say(msg, [](const std::string& m) { spdlog::info("restore: {}", m); });
}

bool RestoreCoordinator::RestorePending() {
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  // When the store cannot be read, go by what it said last: a store outage must not stop
  // healing, and a restore seen pending stays pending until the store says otherwise.
  if (!intent.ok()) return last_pending_;
  last_pending_ = intent->has_value() && !(*intent)->done && !(*intent)->cancelled;
  return last_pending_;
}

std::map<std::string, peer::NodeState> RestoreCoordinator::States() {
  // Everyone's state, in parallel.
  std::vector<std::string> names;
  std::vector<std::function<absl::StatusOr<peer::NodeState>()>> calls;
  for (auto& [name, client] : agents_) {
    PeerApi* c = client.get();
    names.push_back(name);
    calls.push_back([c] { return c->GetState(milliseconds(1000)); });
  }
  auto results = FanOut(env_.parallel, calls);
  std::map<std::string, peer::NodeState> states;
  for (size_t i = 0; i < names.size(); ++i) {
    if (results[i].ok()) states[names[i]] = *results[i];
  }
  return states;
}

RestoreCoordinator::Observed RestoreCoordinator::Observe() {
  Observed o;
  RestoreView& v = o.view;
  v.self = config_.node.name;
  for (const auto& n : config_.cluster.nodes) v.configured.push_back(n.name);
  v.auto_restore = config_.backup.auto_restore;
  v.adopting = config_.cluster.adopt.enabled();
  o.states = States();
  for (const auto& [name, st] : o.states) {
    v.answered[name] = {st.has_data(), st.etcd_running(), st.restore_id()};
  }
  if (v.answered.empty() || v.answered.begin()->first != v.self) return o;  // not ours
  auto store_error = [&](const absl::Status& s, const char* what) {
    v.store_ok = false;
    if (v.store_error.empty()) v.store_error = absl::StrCat(what, ": ", s.message());
  };
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!intent.ok()) {
    store_error(intent.status(), "the restore intent");
  } else if (intent->has_value() && !(*intent)->done && !(*intent)->cancelled) {
    o.intent = **intent;
    v.pending =
        RestoreView::Pending{o.intent->id, o.intent->requested_by == "auto", o.intent->ordered};
  }
  v.etcd_answers = etcd_->MemberList().ok();
  auto existed = ClusterEverExisted(*store_, config_.cluster.name);
  if (!existed.ok()) {
    store_error(existed.status(), "the existence check");
  } else {
    v.cluster_existed = *existed;
  }
  auto mark = ReadDestroyMark(*store_, config_.cluster.name);
  if (!mark.ok()) {
    store_error(mark.status(), "the destroy mark");
  } else if (mark->has_value()) {
    v.destroyed = DescribeDestroyMark(config_.cluster.name, **mark);
  }
  auto voters = ReadLastVoters(*store_, config_.cluster.name);
  if (!voters.ok()) {
    store_error(voters.status(), "the membership record");
  } else if (voters->has_value()) {
    v.last_voters = **voters;
  } else {
    // Nothing recorded yet: the cluster still has its initial members.
    for (int i = 0; i < config_.cluster.size; ++i) {
      v.last_voters.push_back(config_.cluster.nodes[static_cast<size_t>(i)].name);
    }
  }
  return o;
}

absl::Status RestoreCoordinator::Sync(RestoreIntent& intent) {
  auto current = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!current.ok()) return Annotate(current.status(), "re-reading the restore intent");
  if (!current->has_value() || (*current)->id != intent.id) {
    return absl::AbortedError(absl::StrCat("restore ", intent.id, " is no longer the intent"));
  }
  const RestoreIntent& now = **current;
  if (now.done || now.cancelled) {
    return absl::AbortedError(absl::StrCat("restore ", intent.id, " was ",
                                           now.done ? "finished" : "cancelled",
                                           " by another coordinator"));
  }
  // What another coordinator recorded stands: these only ever go from false to true.
  intent.ordered = intent.ordered || now.ordered;
  intent.settled = intent.settled || now.settled;
  return absl::OkStatus();
}

namespace {

// A Record() change that raises one of the intent's monotone flags.
std::function<absl::Status(RestoreIntent&)> Set(bool RestoreIntent::*flag) {
  return [flag](RestoreIntent& r) {
    r.*flag = true;
    return absl::OkStatus();
  };
}

}  // namespace

absl::Status RestoreCoordinator::Record(RestoreIntent& intent, const char* what,
                                        const std::function<absl::Status(RestoreIntent&)>& change) {
  // A coordinator that was paused (or slow) must not write its stale copy over what another
  // one recorded since: re-read, merge, then write. (The store has no compare-and-swap; the
  // window left is one read and one write, and the promises fence out older terms' orders.)
  if (absl::Status s = Sync(intent); !s.ok()) return s;
  if (absl::Status s = change(intent); !s.ok()) return s;  // nothing written
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, intent); !s.ok()) {
    return Annotate(s, absl::StrCat("recording that ", what));
  }
  return absl::OkStatus();
}

void RestoreCoordinator::CountRestore(const RestoreIntent& intent, const char* result) {
  const bool automatic = intent.requested_by == "auto";
  Metrics::Global().Add("steward_restores_total", 1,
                        {{"kind", automatic ? "automatic" : "operator"}, {"result", result}});
  if (history_ == nullptr) return;
  Event e;
  e.action = "restore";
  // What it brought back, not only the base: a reader must not think the changes after the
  // full backup were lost when its deltas were replayed.
  e.reason = absl::StrCat(
      automatic ? "automatic" : "operator's", " restore ", intent.id, " of backup ", intent.backup,
      intent.delta_to > 0 ? absl::StrCat(" + its deltas, to revision ", intent.delta_to)
                          : std::string(),
      intent.bump_revision > 0 ? absl::StrCat(" (revisions raised by ", intent.bump_revision, ")")
                               : std::string());
  e.result = result;
  history_->Append(std::move(e));
}

absl::Status RestoreCoordinator::Cancel(RestoreIntent intent, const std::string& why) {
  // The R6 check runs on the intent as re-read right before the write.
  absl::Status s = Record(intent, "the restore is cancelled", [&why](RestoreIntent& r) {
    if (r.ordered && !RuleOff("R6")) {
      return absl::AbortedError(
          absl::StrCat("restore ", r.id, " is not cancelled: its orders went out (R6)"));
    }
    r.cancelled = true;
    r.cancel_reason = why;
    return absl::OkStatus();
  });
  if (s.ok()) {
    spdlog::warn("restore {}: cancelled: {}", intent.id, why);
    CountRestore(intent, "cancelled");
  }
  return s;
}

std::unique_ptr<EtcdApi> RestoreCoordinator::MembersClient(
    const RestoreIntent& intent, std::string (Config::*url)(const NodeSpec&) const) const {
  std::vector<std::string> urls;
  for (const auto& [name, peer_url] : intent.initial_cluster) {
    for (const auto& n : config_.cluster.nodes) {
      if (n.name == name) urls.push_back((config_.*url)(n));
    }
  }
  return env_.dial_etcd(urls, milliseconds(2000));
}

bool RestoreCoordinator::WaitForLeader(EtcdApi& etcd, std::chrono::seconds bound) {
  // Polled often: clients wait for this (fenced), and the restore is timed by its users.
  const auto deadline = env_.clock->Now() + bound;
  while (env_.clock->Now() < deadline) {
    if (env_.stopping && env_.stopping()) return false;
    for (const auto& url : etcd.endpoints()) {
      auto st = etcd.Status(url, milliseconds(500));
      if (st.ok() && st->leader != 0) return true;
    }
    env_.clock->SleepFor(milliseconds(100));
  }
  return false;
}

void RestoreCoordinator::Pass() {
  Observed o = Observe();
  RestoreDecision d = DecideRestore(o.view);
  switch (d.action) {
    case RestoreAction::kNothing:
      return;
    case RestoreAction::kWait:
      Note(d.reason);
      return;
    case RestoreAction::kCancel:
      if (absl::Status s = Cancel(*o.intent, d.reason); !s.ok()) {
        Note(absl::StrCat("cannot record the cancellation of restore ", o.intent->id, ": ",
                          s.message()));
      }
      return;
    case RestoreAction::kContinue: {
      if (absl::Status s = Execute(*o.intent); !s.ok()) {
        Note(absl::StrCat("restore ", o.intent->id, " not finished yet: ", s.message()));
      }
      return;
    }
    case RestoreAction::kStart:
      Start(d.reason);
      return;
  }
}

absl::Status RestoreCoordinator::PromiseTerm(const Observed& o, peer::OrderHeader* out) {
  const size_t majority = config_.cluster.nodes.size() / 2 + 1;
  uint64_t term = 0;
  for (const auto& [name, st] : o.states) term = std::max(term, st.highest_term());
  ++term;
  peer::OrderHeader& header = *out;
  header.set_term(term);
  header.set_leader(config_.node.name);
  size_t acks = 0;
  for (const auto& [name, st] : o.states) {
    if (agents_.at(name)->Promise(header, milliseconds(2000)).ok()) ++acks;
  }
  if (acks < majority) {
    return absl::UnavailableError(absl::StrCat("only ", acks, " of ", config_.cluster.nodes.size(),
                                               " agents acknowledged term ", term,
                                               "; a majority is needed"));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::StillJustified(const RestoreIntent& intent, Observed* out) {
  // (The promises took time, and agents that came up since are in this round rather than the
  // next.)
  Observed& o = *out;
  o = Observe();
  o.view.pending = RestoreView::Pending{intent.id, intent.requested_by == "auto", intent.ordered};
  RestoreDecision d = DecideRestore(o.view);
  if (d.action == RestoreAction::kCancel) {
    if (absl::Status s = Cancel(intent, d.reason); !s.ok()) return s;
    return absl::AbortedError(absl::StrCat("cancelled: ", d.reason));
  }
  if (d.action != RestoreAction::kContinue) {
    return absl::UnavailableError(absl::StrCat("not ordering the restore: ", d.reason));
  }
  return absl::OkStatus();
}

absl::Status RestoreCoordinator::OrderRound(RestoreIntent& intent, const Observed& o,
                                            const peer::OrderHeader& header,
                                            std::vector<std::string>* missing) {
  std::vector<std::string> silent;
  for (const auto& n : config_.cluster.nodes) {
    if (!o.states.count(n.name)) silent.push_back(n.name);
  }
  if (!silent.empty()) {
    spdlog::warn("restore {}: node(s) {} do not answer and are left out of this round", intent.id,
                 absl::StrJoin(silent, ","));
  }
  // Right before the orders: is this still the intent, and not settled by another
  // coordinator? From the first order on, a node may restore while nobody hears about it:
  // record that first, so no later coordinator cancels a restore some node applied (R6).
  if (absl::Status s = Record(intent, "restore orders go out", Set(&RestoreIntent::ordered));
      !s.ok()) {
    return s;
  }
  if (intent.settled) return absl::AbortedError("settled by another coordinator meanwhile");
  return AfterRound(intent, SendOrders(intent, o, header), missing);
}

RestoreCoordinator::OrderResults RestoreCoordinator::SendOrders(const RestoreIntent& intent,
                                                                const Observed& o,
                                                                const peer::OrderHeader& header) {
  std::map<std::string, bool> member;
  for (const auto& [name, url] : intent.initial_cluster) member[name] = true;
  std::vector<std::string> ordered;
  std::vector<std::function<absl::Status()>> orders;
  for (const auto& [name, st] : o.states) {
    // Applied — unless a member lost its data since (its marker outlives the data dir).
    if (st.restore_id() == intent.id && (st.has_data() || !member.count(name))) continue;
    peer::RestoreRequest req;
    *req.mutable_header() = header;
    req.set_restore_id(intent.id);
    req.set_backup(intent.backup);
    req.set_token(intent.token);
    req.set_member(member.count(name) > 0);
    // Until settled, restored members serve only on the fence port.
    req.set_fenced(!intent.settled);
    req.set_bump_revision(static_cast<uint64_t>(std::max<int64_t>(0, intent.bump_revision)));
    for (const auto& [n, url] : intent.initial_cluster) {
      auto* m = req.add_initial_cluster();
      m->set_name(n);
      m->set_peer_url(url);
    }
    PeerApi* c = agents_.at(name).get();
    spdlog::info("restore {}: ordering node {} to restore backup {}", intent.id, name,
                 intent.backup);
    ordered.push_back(name);
    orders.push_back([c, req] { return c->Restore(req, milliseconds(600000)); });
  }
  auto results = FanOut(env_.parallel, orders);
  OrderResults out;
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (!results[i].ok()) {
      spdlog::error("restore {}: node {} failed: {}", intent.id, ordered[i], results[i].message());
      // The node walked the backup's DB before touching anything and found it damaged.
      const std::string msg(results[i].message());
      if (const size_t at = msg.find(BoltFile::kDamaged); at != std::string::npos) {
        out.refused_damaged.push_back(ordered[i]);
        if (out.damage.empty()) out.damage = msg.substr(at);  // "the DB is damaged: …"
      }
    }
  }
  return out;
}

absl::Status RestoreCoordinator::AfterRound(RestoreIntent& intent, const OrderResults& round,
                                            std::vector<std::string>* missing) {
  RoundView view;
  view.members = intent.initial_cluster.size();
  view.refused_damaged = round.refused_damaged.size();
  view.bumped = intent.bump_revision > 0;
  view.automatic = intent.requested_by == "auto";
  view.settled = intent.settled;
  std::vector<std::string> cannot_bump;
  for (const auto& [name, url] : intent.initial_cluster) {
    auto st = agents_.at(name)->GetState(milliseconds(1000));
    if (st.ok() && st->restore_id() == intent.id && st->has_data()) {
      ++view.applied;
    } else {
      missing->push_back(name);
    }
    // (Also a member that cannot raise it at all: silent when the restore was chosen.)
    if (st.ok() && (st->bump_refused() == intent.id || !st->can_bump_revision())) {
      cannot_bump.push_back(name);
    }
  }
  view.cannot_bump = cannot_bump.size();
  const RoundVerdict verdict = steward::JudgeRound(view);
  switch (verdict) {
    case RoundVerdict::kSettle:
      return absl::OkStatus();
    case RoundVerdict::kWait:
      return absl::UnavailableError(
          absl::StrCat(view.applied, " of ", view.members, " members restored so far"));
    case RoundVerdict::kReplaceUnbumped:
      return Supersede(intent,
                       absl::FailedPreconditionError(absl::StrCat(
                           "node(s) ", absl::StrJoin(cannot_bump, ","),
                           " cannot raise the revision as ordered (no etcd.etcdutl, and the "
                           "in-place restore refuses the backup)")),
                       /*unbumped_backup=*/intent.backup);
    case RoundVerdict::kMarkDamaged:
    case RoundVerdict::kReplaceDamaged:
      break;
  }
  const std::string why = absl::StrCat("backup ", intent.backup, " cannot be restored: node(s) ",
                                       absl::StrJoin(round.refused_damaged, ","),
                                       " found its DB damaged (", round.damage, ")");
  spdlog::error("restore {}: {}", intent.id, why);
  if (absl::Status s = MarkBackupDamaged(*store_, config_.cluster.name, intent.backup, round.damage,
                                         config_.node.name, env_.clock->UnixSeconds());
      !s.ok()) {
    return Annotate(s, why);
  }
  if (verdict == RoundVerdict::kReplaceDamaged) return Supersede(intent, absl::DataLossError(why));
  return absl::DataLossError(absl::StrCat(why, "; name an older backup"));
}

absl::Status RestoreCoordinator::SettleRound(RestoreIntent& intent, uint64_t term) {
  if (intent.settled) return absl::OkStatus();
  // The restored members serve only on the fence port: no client sees the cluster before the
  // leases that came with the backup are revoked.
  auto fenced = MembersClient(intent, &Config::FenceUrl);
  if (!WaitForLeader(*fenced, std::chrono::seconds(30))) {
    return absl::UnavailableError("the restored cluster has no leader yet");
  }
  // Revoking leases is only right while nobody but the fence sees the cluster: not if
  // another coordinator settled it (and unfenced it) meanwhile.
  if (absl::Status s = Sync(intent); !s.ok()) return s;
  if (intent.settled) return absl::OkStatus();
  bool deltas_lost = false;
  // The restored epoch goes past this coordinator's term and every epoch a leader recorded.
  uint64_t epoch_floor = term;
  if (auto recorded = ReadHighestEpoch(*store_, config_.cluster.name); recorded.ok()) {
    epoch_floor = std::max(epoch_floor, *recorded);
  } else {
    spdlog::warn("restore {}: reading the epoch record: {}", intent.id,
                 recorded.status().message());
  }
  const SettleContext ctx{config_, *store_, env_.clock->UnixSeconds(),
                          [this] { return env_.nonce(); }, epoch_floor};
  if (absl::Status s = SettleFenced(ctx, intent, *fenced, &deltas_lost); !s.ok()) {
    if (deltas_lost) return Supersede(intent, s);
    return s;
  }
  // The start revision was recorded before the orders, but a leader of the replaced cluster
  // (an operator's restore) may have written its own record over it meanwhile: once more, now
  // that it is stopped, before the restored cluster serves clients.
  if (intent.bump_revision > 0) {
    int64_t backup_revision = 0;
    if (auto b = BumpFor(intent.backup, &backup_revision); !b.ok()) {
      return Annotate(b.status(), "recording the restored cluster's revision");
    }
    const int64_t start =
        RestoredStartRevision(backup_revision, intent.delta_to, intent.bump_revision);
    if (absl::Status s =
            RaiseHighestRevision(*store_, config_.cluster.name, start, env_.clock->UnixSeconds());
        !s.ok()) {
      return Annotate(s, "recording the restored cluster's revision");
    }
  }
  return Record(intent, "the restore is settled", Set(&RestoreIntent::settled));
}

std::string RestoreCoordinator::FencedLeader(const RestoreIntent& intent) {
  auto fenced = MembersClient(intent, &Config::FenceUrl);
  for (const auto& [name, peer_url] : intent.initial_cluster) {
    for (const auto& n : config_.cluster.nodes) {
      if (n.name != name) continue;
      auto st = fenced->Status(config_.FenceUrl(n), milliseconds(1000));
      if (st.ok() && st->leader != 0 && st->leader == st->member_id) return name;
    }
  }
  return "";
}

void RestoreCoordinator::UnfenceMembers(const RestoreIntent& intent,
                                        const peer::OrderHeader& header) {
  // Every fenced member goes back to its client URL (an agent that misses this order does it by
  // itself once it reads that the restore is settled). Each etcd stops gracefully: the followers
  // first, the fenced cluster's leader last, since a leader that stops hands its leadership to a
  // peer first, which waits out its timeout while the peers are stopping too.
  peer::UnfenceRequest unfence;
  *unfence.mutable_header() = header;
  unfence.set_restore_id(intent.id);
  std::vector<std::string> fenced;
  for (const auto& [name, url] : intent.initial_cluster) {
    auto st = agents_.at(name)->GetState(milliseconds(1000));
    if (st.ok() && st->fenced()) fenced.push_back(name);
  }
  WaitFencedPublished(intent, fenced);
  const std::string leader = FencedLeader(intent);
  for (const bool leader_round : {false, true}) {
    std::vector<std::function<absl::Status()>> unfence_calls;
    for (const auto& name : fenced) {
      if ((name == leader) != leader_round) continue;
      PeerApi* c = agents_.at(name).get();
      unfence_calls.push_back([c, unfence] { return c->Unfence(unfence, milliseconds(30000)); });
    }
    for (const absl::Status& s : FanOut(env_.parallel, unfence_calls)) {
      if (!s.ok()) spdlog::warn("restore {}: unfencing: {}", intent.id, s.message());
    }
  }
}

void RestoreCoordinator::WaitFencedPublished(const RestoreIntent& intent,
                                             const std::vector<std::string>& fenced_nodes) {
  // A fenced etcd publishes its fence URL through raft once it has joined. Unfenced before
  // that publish is applied, its entry may be left naming the fence port (seen in CI, etcd
  // 3.4: the member list kept the fence URL after the member published its client URL), so
  // clients that read the member list would go to a closed port. Bounded: past it, Finish
  // finds and repairs such an entry.
  auto fenced = MembersClient(intent, &Config::FenceUrl);
  const auto deadline = env_.clock->Now() + std::chrono::seconds(10);
  std::string waiting;
  while (env_.clock->Now() < deadline) {
    if (env_.stopping && env_.stopping()) return;
    auto stale = StalePublishes(*fenced, intent, fenced_nodes, &Config::FenceUrl, true);
    if (stale.ok() && stale->empty()) return;
    waiting = stale.ok() ? absl::StrJoin(*stale, ", ") : "the member list";
    env_.clock->SleepFor(milliseconds(100));
  }
  spdlog::warn("restore {}: unfencing although {} has not published its fence URL yet", intent.id,
               waiting);
}

absl::StatusOr<std::vector<std::string>> RestoreCoordinator::StalePublishes(
    EtcdApi& etcd, const RestoreIntent& intent, const std::vector<std::string>& nodes,
    std::string (Config::*url)(const NodeSpec&) const, bool unpublished_is_stale) const {
  auto members = etcd.MemberList();
  if (!members.ok()) return members.status();
  std::vector<std::string> stale;
  for (const auto& [name, peer_url] : intent.initial_cluster) {
    if (std::find(nodes.begin(), nodes.end(), name) == nodes.end()) continue;
    const NodeSpec* node = nullptr;
    for (const auto& n : config_.cluster.nodes) {
      if (n.name == name) node = &n;
    }
    if (node == nullptr) continue;
    for (const MemberInfo& m : *members) {
      if (m.peer_urls.empty() || m.peer_urls.front() != peer_url) continue;
      if (m.client_urls.empty() && !unpublished_is_stale) continue;  // never started
      if (m.client_urls != std::vector<std::string>{(config_.*url)(*node)}) stale.push_back(name);
    }
  }
  return stale;
}

absl::Status RestoreCoordinator::RepublishStale(const RestoreIntent& intent,
                                                const peer::OrderHeader& header,
                                                const std::vector<std::string>& restored,
                                                EtcdApi& unfenced) {
  auto stale = StalePublishes(unfenced, intent, restored, &Config::ClientUrl, false);
  if (!stale.ok() || stale->empty()) return absl::OkStatus();
  // One member per pass, and only while the others are a quorum without it: its etcd restarts.
  // Three times at most: an entry that stays wrong (an agent too old to know the order) is
  // said, and the restore still ends.
  const std::string name = stale->front();
  if (++republished_[intent.id + "/" + name] > 3) {
    spdlog::warn(
        "restore {}: member {} still does not list its client URL after 3 restarts; "
        "clients that read the member list will not find it",
        intent.id, name);
    return absl::OkStatus();
  }
  size_t others = 0;
  for (const auto& [n, peer_url] : intent.initial_cluster) {
    if (n == name) continue;
    for (const auto& spec : config_.cluster.nodes) {
      if (spec.name != n) continue;
      auto st = unfenced.Status(config_.ClientUrl(spec), milliseconds(1000));
      if (st.ok() && st->leader != 0) ++others;
    }
  }
  const size_t quorum = intent.initial_cluster.size() / 2 + 1;
  if (others < quorum) {
    return absl::UnavailableError(absl::StrCat(
        "member ", name, " does not list its client URL, and restarting it would cost the quorum"));
  }
  peer::UnfenceRequest again;
  *again.mutable_header() = header;
  again.set_restore_id(intent.id);
  again.set_republish(true);
  spdlog::warn(
      "restore {}: member {} does not list its client URL in the member list (a fenced run's "
      "publish); ordering it to restart etcd so that it publishes it again",
      intent.id, name);
  if (absl::Status s = agents_.at(name)->Unfence(again, milliseconds(30000)); !s.ok()) return s;
  return absl::UnavailableError(
      absl::StrCat("member ", name, " republishes its client URL (its entry named another)"));
}

absl::Status RestoreCoordinator::Finish(RestoreIntent& intent, const Observed& o, bool was_settled,
                                        const std::vector<std::string>& missing,
                                        const peer::OrderHeader& header) {
  // A fresh client: the long-lived one's channels back off after the refusals of the fence.
  auto unfenced_client = MembersClient(intent, &Config::ClientUrl);
  if (!WaitForLeader(*unfenced_client, std::chrono::seconds(30))) {
    size_t empty = 0;
    for (const auto& [name, url] : intent.initial_cluster) {
      auto it = o.states.find(name);
      if (it != o.states.end() && !it->second.has_data()) ++empty;
    }
    if (CloseLostRestore(was_settled, intent.initial_cluster.size(), empty)) {
      // The restored cluster ran and was lost as a whole since: restoring this intent's backup
      // again would drop what was written after it. Close the intent; the next pass decides
      // afresh (from the newest backup, and only if total loss is proven again).
      if (absl::Status s = Record(intent, "the restore is closed", Set(&RestoreIntent::done));
          !s.ok()) {
        return s;
      }
      CountRestore(intent, "closed");
      spdlog::warn(
          "restore {}: the restored cluster was lost after it was settled ({} of {} "
          "members answer without data); closing this restore",
          intent.id, empty, intent.initial_cluster.size());
      return absl::AbortedError("the restored cluster was lost after it was settled");
    }
    return absl::UnavailableError("the restored cluster does not answer on its client URLs yet");
  }
  std::vector<std::string> restored;
  for (const auto& [name, url] : intent.initial_cluster) {
    if (std::find(missing.begin(), missing.end(), name) == missing.end()) restored.push_back(name);
  }
  if (absl::Status s = RepublishStale(intent, header, restored, *unfenced_client); !s.ok()) {
    return s;
  }
  // The restored cluster's voting members are the intent's initial cluster, restored or not.
  // Recorded before the restore is done: until then the leader changes no membership, and a
  // later total loss must be proven against these members, not the lost cluster's.
  std::vector<std::string> voters;
  for (const auto& [name, url] : intent.initial_cluster) voters.push_back(name);
  std::sort(voters.begin(), voters.end());
  if (absl::Status s =
          WriteLastVoters(*store_, config_.cluster.name, voters, env_.clock->UnixSeconds());
      !s.ok()) {
    return Annotate(s, "recording the restored cluster's voting members");
  }
  if (absl::Status s = Record(intent, "the restore is done", Set(&RestoreIntent::done)); !s.ok()) {
    return s;
  }
  CountRestore(intent, missing.empty() ? "done" : "done-partly");
  if (missing.empty()) {
    spdlog::info("restore {}: every member ({}) restored backup {}", intent.id,
                 absl::StrJoin(restored, ","), intent.backup);
  } else {
    spdlog::warn(
        "restore {}: members {} restored backup {}; NOT restored: {} (the leader heals "
        "them as it would any lost member)",
        intent.id, absl::StrJoin(restored, ","), intent.backup, absl::StrJoin(missing, ","));
  }
  return absl::OkStatus();
}

// The restore as steps (NextRestoreStep, restore/decision.h): each one checks again what it
// rests on and records its progress in the intent before the next is chosen, so a coordinator
// that dies between two steps is followed by one that starts at the first step not recorded
// (ordered, settled, done).
absl::Status RestoreCoordinator::Execute(RestoreIntent intent) {
  Observed o = Observe();
  peer::OrderHeader header;
  RestoreStepView view;
  view.settled = intent.settled;
  // Once settled, the restored cluster is the live cluster: nobody is ordered to restore it
  // again (RC3), and if it was lost as a whole, the next restore starts afresh (R11).
  const bool was_settled = intent.settled;
  std::vector<std::string> missing;
  // Each step at most once a pass: the bound is the number of steps.
  for (int i = 0; i < 8; ++i) {
    const RestoreStep step = NextRestoreStep(view);
    absl::Status s;
    switch (step) {
      case RestoreStep::kPromise:
        s = PromiseTerm(o, &header);
        view.promised = true;
        break;
      case RestoreStep::kRecheck:
        s = StillJustified(intent, &o);
        view.rechecked = true;
        break;
      case RestoreStep::kOrder:
        missing.clear();
        s = OrderRound(intent, o, header, &missing);
        view.round_done = true;
        view.round_settles = s.ok();
        break;
      case RestoreStep::kSettle:
        s = SettleRound(intent, header.term());
        view.settled = intent.settled;
        break;
      case RestoreStep::kUnfence:
        if (was_settled) missing = MembersWithout(intent, o);
        UnfenceMembers(intent, header);
        view.unfenced = true;
        break;
      case RestoreStep::kFinish:
        return Finish(intent, o, was_settled, missing, header);
      case RestoreStep::kStop:
        return absl::UnavailableError("the round did not settle the restore");
    }
    if (!s.ok()) return s;
  }
  return absl::InternalError("the restore's steps did not finish in one pass");
}

std::vector<std::string> RestoreCoordinator::MembersWithout(const RestoreIntent& intent,
                                                            const Observed& o) {
  std::vector<std::string> missing;
  for (const auto& [name, url] : intent.initial_cluster) {
    auto it = o.states.find(name);
    if (it == o.states.end() || it->second.restore_id() != intent.id) missing.push_back(name);
  }
  return missing;
}

}  // namespace steward
