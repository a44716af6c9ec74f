// The world (world.h): building the nodes, the trace and the verdict, a node's tick (the
// agent's supervisor, control pass, restore pass, leadership and reconcile pass), the clients'
// writes, and the step loop: each step advances virtual time, heals what is due, runs the
// operator's and the scripted actions, then a fault, a write or a node's tick, the backups,
// and the checks; after the fault phase everything is healed and the cluster must become
// healthy (liveness). RunSimulation runs one World with the agents' log lines in its trace.
#include "sim/world.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "common/rules.h"
#include "etcd/keys.h"
#include "sim/clock_model.h"
#include "sim/etcd_api.h"
#include "sim/network.h"
#include "sim/runner_model.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace steward::sim {

using std::chrono::milliseconds;

World::World(const Options& o)
    : o_(o),
      rng_(o.seed),
      next_delta_(o.delta_every),
      delta_rng_(o.seed ^ 0xde17a5),
      diverge_rng_(o.seed ^ 0xd17e) {
  Config base;
  base.cluster.name = "sim";
  base.cluster.size = 3;
  base.cluster.replace_after = milliseconds(10000);
  base.cluster.learner_timeout = milliseconds(20000);
  base.cluster.leader_lease_ttl = milliseconds(5000);
  base.tls.mode = "off";
  base.backup.store = "sim://store";
  base.backup.auto_restore = true;
  base.cluster.hash_check_interval = o.diverge ? milliseconds(5000) : milliseconds(0);
  if (o.etcdutl) base.etcd.etcdutl = "/sim/etcdutl";
  base.etcd.binary = kEtcd34;
  if (o.upgraded) base.etcd.versions = {{"3.4.23", kEtcd34}, {"3.5.16", kEtcd35}};
  for (int i = 0; i < o.nodes; ++i) {
    base.cluster.nodes.push_back({absl::StrCat("n", i + 1), absl::StrCat("127.0.0.", 10 + i)});
  }
  for (int i = 0; i < o.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->index = i;
    n->spec = base.cluster.nodes[static_cast<size_t>(i)];
    n->config = base;
    n->config.node.name = n->spec.name;
    n->config.node.data_dir = "/sim/" + n->spec.name;
    if (o.etcdutl_nodes >= 0 && i >= o.etcdutl_nodes) n->config.etcd.etcdutl.clear();
    n->initial = i < base.cluster.size;
    // Rolled before the run; a spare never ran etcd, so no roll switched it.
    if (o.upgraded && n->initial) n->disk.etcd_version = "3.5.16";
    n->clock = std::make_unique<SimClock>(this, i);
    nodes_.push_back(std::move(n));
  }
  for (int i = 0; i < o.nodes; ++i) Boot(i);
}

World::~World() {
  // The agents' objects refer to the seams: destroy them first.
  for (auto& n : nodes_) {
    n->reconciler.reset();
    n->restorer.reset();
    n->leadership.reset();
    n->local.reset();
    n->terms.reset();
    n->runner.reset();
  }
}

void World::Trace(const std::string& line) {
  trace_.push_back(absl::StrFormat("t=%9.3fs %s", now_ / 1000.0, line));
  while (trace_.size() > o_.trace_lines) trace_.pop_front();
}

void World::Violation(const std::string& what) {
  if (!result_.ok) return;
  result_.ok = false;
  result_.violation = absl::StrFormat("t=%.3fs: %s", now_ / 1000.0, what);
  Trace("VIOLATION: " + what);
  static const char* kData[] = {"empty", "partial", "member"};
  for (const auto& n : nodes_) {
    const Disk& d = n->disk;
    Trace(n->index,
          absl::StrCat("state: agent ", n->agent_up ? "up" : "down", ", etcd ",
                       n->etcd_up ? (n->serving_fence ? "up (fenced port)" : "up") : "down",
                       n->runner_wanted ? ", runner: wanted " : ", runner: not wanted ",
                       Flag(n->etcd_flags, "initial-cluster-state"), ", data ",
                       kData[static_cast<int>(d.state)], " cluster ", HexId(d.cluster), " member ",
                       HexId(d.member), d.fenced.empty() ? "" : " fenced " + d.fenced, " restore ",
                       d.restore_id, d.EverJoined() ? " joined" : "",
                       d.diverged != 0 ? absl::StrCat(" diverged ", d.diverged) : ""));
    // (Not the agents' objects: a violation can be found while one of them is inside a call,
    // holding its lock. The leader's last status line is in the cluster's status key below.)
  }
  for (const auto& [id, c] : clusters_) {
    std::string members;
    for (const auto& m : c.members) {
      absl::StrAppend(&members, " ", HexId(m.id), "=", m.name.empty() ? "?" : m.name,
                      m.learner ? "(learner)" : "", m.started ? "" : "(unstarted)");
    }
    Trace(absl::StrCat("cluster ", HexId(id), " leader ", HexId(c.leader), " members:", members));
    if (auto it = c.kv.find(StatusKey(std::string("sim"))); it != c.kv.end()) {
      Trace(absl::StrCat("cluster ", HexId(id), " status: ", it->second.value));
    }
  }
}

void World::Tick(int i) {
  Node& n = *nodes_[i];
  if (!n.agent_up || Paused(i)) return;
  const int outer = current_;
  current_ = i;
  n.in_code = true;
  try {
    TickBody(i);
    current_ = outer;
    n.in_code = false;
  } catch (const CrashPoint& c) {
    current_ = outer;
    n.in_code = false;
    Trace(c.node, "CRASH in the middle of a call (agent and etcd)");
    ++result_.faults["crash-mid-call"];
    Kill(c.node, true);
  }
}

void World::TickBody(int i) {
  Node& n = *nodes_[i];
  Refresh();
  // The runner's supervisor, then the agent's control thread: the very code the agent runs.
  n.runner->Supervise();
  n.local->ControlPass();
  Refresh();
  if (now_ >= n.next_restore_pass) {
    n.restorer->Pass();
    n.next_restore_pass = now_ + 1000;
  }
  const bool was = n.leadership->leading();
  if (n.leadership->Tick()) {
    if (!was) Trace(i, absl::StrCat("becomes steward leader, epoch ", n.leadership->term()));
    n.reconciler->Pass(n.leadership->term());
  }
}

void World::Write() {
  // A client writes through any client URL; it is acknowledged once committed.
  Refresh();
  for (const auto& n : nodes_) {
    if (n->serving_fence || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    ++c->rev;
    c->writes.emplace_back(c->rev, ++next_write_);
    ++result_.writes_acked;
    dirty_ = true;
    Refresh();
    return;
  }
}

Result World::Run() {
  std::uniform_int_distribution<int> dt(20, 300);
  for (int step = 0; step < o_.steps && result_.ok; ++step) {
    now_ += dt(rng_);
    dirty_ = true;
    Scheduled();
    if (o_.destroy_at >= 0 && step >= o_.destroy_at &&
        (o_.undestroy_at < 0 || step < o_.undestroy_at) &&
        (step == o_.destroy_at || !destroyed_ || (step - o_.destroy_at) % 200 == 0)) {
      OperatorDestroy();
    }
    if (o_.undestroy_at >= 0 && step >= o_.undestroy_at &&
        (destroyed_ || step == o_.undestroy_at)) {
      OperatorUndestroy();
    }
    if (step == o_.reimage_at) ScriptedReimage();
    if (o_.restart_every > 0 && step > 0 && step % o_.restart_every == 0) OperatorRestart();
    const int r = static_cast<int>(rng_() % 100);
    bool fault = false;
    if (o_.faults && std::uniform_real_distribution<double>(0, 1)(rng_) < o_.fault_rate) {
      Fault();
      fault = true;
    } else if (r < 20) {
      Write();
    } else {
      Tick(static_cast<int>(rng_() % nodes_.size()));
    }
    if (now_ >= next_backup_) {
      TakeBackup();
      next_backup_ = now_ + 20000;
    }
    if (o_.delta_every > 0 && now_ >= next_delta_) {
      TakeDelta();
      next_delta_ = now_ + o_.delta_every;
    }
    if (trap_sprung_ && !trap_done_) {
      LoseFirstLeader();
      fault = true;
    }
    Refresh();
    CheckWrites(fault);
    CheckOneQuorum();
    Prune();
    result_.steps = step + 1;
  }
  // Liveness: lift every fault; the cluster must be healthy at its size within the bound.
  if (result_.ok) {
    HealAll();
    if (destroyed_ && o_.undestroy_at >= 0) OperatorUndestroy();  // the store is back
    healing_ = true;                                              // no more crash points
    const Ms deadline = now_ + o_.liveness_bound;
    std::string why;
    int k = 0;
    while (now_ < deadline && result_.ok) {
      now_ += 100;
      dirty_ = true;
      Tick(k++ % static_cast<int>(nodes_.size()));
      if (now_ >= next_backup_) {
        TakeBackup();
        next_backup_ = now_ + 20000;
      }
      if (o_.delta_every > 0 && now_ >= next_delta_) {
        TakeDelta();
        next_delta_ = now_ + o_.delta_every;
      }
      CheckWrites(false);
      Prune();
      why.clear();
      if (Healthy(&why)) break;
    }
    result_.live_at_end = Healthy(&why);
    result_.end_state = why;
    CheckLiveness(why);
  }
  result_.virtual_ms = now_;
  result_.trace.assign(trace_.begin(), trace_.end());
  return result_;
}

namespace {

// The agents' own log lines go into the trace, under the node whose code wrote them.
class TraceSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit TraceSink(World* w) : w_(w) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text(msg.payload.data(), msg.payload.size());
    const int who = w_->speaker_ >= 0 ? w_->speaker_ : w_->current_;
    if (who >= 0) {
      w_->Trace(who, "log: " + text);
    } else {
      w_->Trace("log: " + text);
    }
  }
  void flush_() override {}

 private:
  World* w_;
};

}  // namespace

Result RunSimulation(const Options& options) {
  SetRulesOffForTesting(options.disabled_rules);
  auto previous = spdlog::default_logger();
  Result r;
  {
    World w(options);
    auto logger = std::make_shared<spdlog::logger>("sim", std::make_shared<TraceSink>(&w));
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
    r = w.Run();
    spdlog::set_default_logger(previous);
  }
  SetRulesOffForTesting({});
  return r;
}

}  // namespace steward::sim
