// The fault injector. Per step (Fault): an etcd, an agent or a whole node killed, a node
// paused, partitioned or cut off one way, a split into two sides, a wiped or partial data dir,
// a re-imaged node, clock skew and jumps, the store down or unmounted, two nodes stopped at
// once, total loss, and (with deltas) a delta object lost. Inside the agents' code (CallPoint):
// the caller's process dies at a call (CrashPoint unwinds it) or stops there while the world
// goes on. Scripted faults (Options::reimage_at, lose_first_leader), what heals by itself
// (Scheduled) and the end of the fault phase (HealAll). The fault kinds are counted in
// Result::faults. Each draws from the world's seeded streams, in a fixed order: the same seed
// gives the same faults.
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/world.h"

namespace steward::sim {

void World::CallPoint(int caller) {
  // Only the node whose code runs now can die or stop here: a call made on behalf of another
  // node (an order's handler asking its own etcd) belongs to that node's process, and its
  // failure reaches the caller as an error, not as the caller's death.
  if (caller != current_) return;
  if (trap_sprung_ && !trap_done_) throw CrashPoint{caller};
  if (in_fault_ || healing_ || !o_.faults || o_.crash_point_rate <= 0) return;
  const double x = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (x < o_.crash_point_rate) throw CrashPoint{caller};
  if (x < 2 * o_.crash_point_rate && !in_pause_) {
    // The caller's process stops here (SIGSTOP, a long GC, a VM migration) while the world
    // goes on, then resumes in the middle of what it was doing, with what it observed before.
    in_pause_ = true;
    Node& n = *nodes_[caller];
    const Ms until = now_ + 2000 + static_cast<Ms>(rng_() % 20000);
    n.paused_until = until;
    ++n.mid_call_pauses;
    ++result_.faults["pause-mid-call"];
    Trace(caller, "PAUSED in the middle of a call");
    while (result_.ok) {
      now_ += 50 + static_cast<Ms>(rng_() % 250);
      dirty_ = true;
      if (now_ >= until) break;  // it resumes before anyone else sees it running again
      Scheduled();
      const int other = static_cast<int>(rng_() % nodes_.size());
      if (rng_() % 5 == 0) {
        Write();
      } else if (other != caller) {  // the caller is still inside its call
        Tick(other);
      }
      Refresh();
      CheckWrites(false);
    }
    Trace(caller, "resumes");
    in_pause_ = false;
  }
}

void World::Scheduled() {
  for (auto& n : nodes_) {
    if (!n->agent_up && n->restart_at >= 0 && now_ >= n->restart_at) {
      Trace(n->index, "agent restarts");
      Boot(n->index);
    }
  }
  if (heal_cuts_at_ >= 0 && now_ >= heal_cuts_at_) {
    cuts_.clear();
    heal_cuts_at_ = -1;
    dirty_ = true;
    Trace("network healed");
  }
  if (heal_store_at_ >= 0 && now_ >= heal_store_at_) {
    store_.mode = SimStore::Mode::kUp;
    heal_store_at_ = -1;
    Trace("store back");
  }
}

void World::Fault() {
  // A delta object lost (a bad disk, a careless cleanup): its chain ends before it. Drawn from
  // the deltas' own stream, so runs without deltas see the same faults as before.
  if (o_.delta_every > 0 && delta_rng_() % 10 == 0) {
    std::vector<const DeltaRecord*> stored;
    for (const auto& [base, chain] : deltas_) {
      for (const auto& d : chain) {
        if (store_.objects.count(d.object_key)) stored.push_back(&d);
      }
    }
    if (!stored.empty()) {
      const DeltaRecord& d = *stored[delta_rng_() % stored.size()];
      store_.objects.erase(d.object_key);
      ++result_.faults["delta-lost"];
      Trace(absl::StrCat("FAULT delta-lost: ", d.object_key));
      dirty_ = true;
      return;
    }
  }
  // flip-value: one member's data changed (a bit flipped on its disk), never two at once (then
  // no majority agrees, and nothing is repaired by design). Its own stream, as the deltas'.
  if (o_.diverge && diverge_rng_() % 6 == 0) {
    bool any = false;
    for (const auto& m : nodes_) any = any || m->disk.diverged != 0;
    const int n = static_cast<int>(diverge_rng_() % nodes_.size());
    Disk& d = nodes_[n]->disk;
    if (!any && d.state == DataDirState::kMember && d.member != 0) {
      d.diverged = 1 + diverge_rng_() % 1000;
      ++result_.faults["flip-value"];
      Trace(n, "FAULT flip-value: its data now differs from the others'");
      dirty_ = true;
      return;
    }
  }
  in_fault_ = true;
  const int n = static_cast<int>(rng_() % nodes_.size());
  const std::string name = nodes_[n]->spec.name;
  Node& node = *nodes_[n];
  std::string kind;
  switch (rng_() % 16) {
    case 0:
      kind = "kill-etcd";
      node.etcd_up = false;
      break;
    case 1:
      kind = "crash-agent";
      if (node.agent_up) Kill(n, false);
      break;
    case 2:
    case 3:
      kind = "crash-node";
      if (node.agent_up || node.etcd_up) Kill(n, true);
      break;
    case 4:
      kind = "pause";
      node.paused_until = now_ + 1000 + static_cast<Ms>(rng_() % 30000);
      break;
    case 5: {
      kind = "partition-node";
      for (const auto& m : nodes_) {
        if (m->index != n) cuts_.insert({n, m->index});
      }
      heal_cuts_at_ = now_ + 5000 + static_cast<Ms>(rng_() % 60000);
      break;
    }
    case 6: {
      kind = "cut-one-way";
      int m = static_cast<int>(rng_() % nodes_.size());
      if (m != n) cuts_.insert({n, m});
      heal_cuts_at_ = now_ + 5000 + static_cast<Ms>(rng_() % 60000);
      break;
    }
    case 7:
      kind = "wipe-data";
      node.etcd_up = false;
      node.disk.state = DataDirState::kEmpty;
      ClearData(node.disk);  // etcd's data dir only: the markers beside it stay
      break;
    case 8:
      kind = "partial-data";
      if (!node.etcd_up && node.disk.state == DataDirState::kEmpty)
        node.disk.state = DataDirState::kPartial;
      break;
    case 9:
      kind = "reimage";
      Kill(n, true);
      node.disk = Disk();
      break;
    case 10:
      kind = "skew";
      node.skew = (static_cast<Ms>(rng_() % 7200) - 3600) * 1000;
      break;
    case 11:
      kind = "store-down";
      store_.mode = SimStore::Mode::kDown;
      heal_store_at_ = now_ + 5000 + static_cast<Ms>(rng_() % 60000);
      break;
    case 12:
      kind = "store-unmounted";
      store_.mode = SimStore::Mode::kMissing;
      heal_store_at_ = now_ + 5000 + static_cast<Ms>(rng_() % 60000);
      break;
    case 13:
      kind = "quorum-stop";
      for (int k = 0; k < 2; ++k) Kill((n + k) % static_cast<int>(nodes_.size()), true);
      break;
    case 14:
      if (rng_() % 4 != 0) {
        kind = "heal-network";
        cuts_.clear();
        break;
      }
      kind = "total-loss";
      for (auto& m : nodes_) {
        Kill(m->index, true);
        m->disk = Disk();
      }
      break;
    case 15:
      if (rng_() % 2 == 0) {
        kind = "clock-jump";
        node.skew += 3600 * 1000;
        break;
      }
      // A partition into two sides, each node on a random side.
      kind = "split";
      {
        std::vector<int> side(nodes_.size());
        for (auto& x : side) x = static_cast<int>(rng_() % 2);
        for (size_t a = 0; a < nodes_.size(); ++a) {
          for (size_t b = 0; b < nodes_.size(); ++b) {
            if (side[a] != side[b]) cuts_.insert({static_cast<int>(a), static_cast<int>(b)});
          }
        }
      }
      heal_cuts_at_ = now_ + 5000 + static_cast<Ms>(rng_() % 60000);
      break;
  }
  ++result_.faults[kind];
  Trace(absl::StrCat("FAULT ", kind, " on ", name));
  dirty_ = true;
  in_fault_ = false;
}

void World::HealAll() {
  cuts_.clear();
  store_.mode = SimStore::Mode::kUp;
  heal_cuts_at_ = heal_store_at_ = -1;
  for (auto& n : nodes_) {
    n->paused_until = 0;
    n->skew = 0;
    if (!n->agent_up) Boot(n->index);
  }
  dirty_ = true;
  Trace("HEAL: every fault is lifted");
}

void World::ScriptedReimage() {
  for (auto& m : nodes_) {
    if (!m->etcd_up || m->disk.state != DataDirState::kMember) continue;
    Trace(m->index, "FAULT reimage (scripted)");
    ++result_.faults["reimage"];
    Kill(m->index, true);
    m->disk = Disk();
    break;
  }
}

void World::LoseFirstLeader() {
  trap_done_ = true;
  in_fault_ = true;
  int reimaged = -1;
  for (auto& m : nodes_) {
    if (reimaged < 0 && m->disk.state == DataDirState::kMember) reimaged = m->index;
    Kill(m->index, true);
  }
  if (reimaged >= 0) nodes_[reimaged]->disk = Disk();
  Trace(absl::StrCat("FAULT every node dies as the first leader is elected; ",
                     reimaged >= 0 ? nodes_[reimaged]->spec.name : "none", " is re-imaged"));
  ++result_.faults["lose-first-leader"];
  in_fault_ = false;
}

}  // namespace steward::sim
