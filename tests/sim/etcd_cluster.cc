// The etcd model's own life, as World methods (the state is in etcd_cluster.h): which node
// answers on a URL, who is on a cluster's quorum side, raft (Refresh: a leader needs a majority
// of the voters up and reachable; the quorum side catches up, publishes itself and learns the
// member list; a removed member that learns it stops; expired leases take their keys), what
// etcd does when the runner starts it (start on its data, bootstrap the cluster its flags name,
// join a cluster that expects it, refuse a join from a lower minor version), and forgetting
// clusters no disk holds. Bootstrapping over a cluster that existed is checked here.
#include "sim/etcd_cluster.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "etcd/member_id.h"
#include "etcd/version.h"
#include "sim/world.h"

namespace steward::sim {

int World::NodeByPeerUrl(const std::string& url) const {
  for (const auto& n : nodes_) {
    if (n->config.PeerUrl(n->spec) == url) return n->index;
  }
  return -1;
}

int World::NodeOfMember(const Cluster& c, uint64_t id) const {
  for (const auto& n : nodes_) {
    if (n->disk.state == DataDirState::kMember && n->disk.cluster == c.id && n->disk.member == id) {
      return n->index;
    }
  }
  return -1;
}

int World::Answering(int caller, const std::string& url) {
  for (const auto& n : nodes_) {
    const bool client = n->config.ClientUrl(n->spec) == url;
    const bool fence = n->config.FenceUrl(n->spec) == url;
    if (!client && !fence) continue;
    if (!n->etcd_up || Paused(n->index) || !Reach(caller, n->index)) return -1;
    if (n->disk.state != DataDirState::kMember || n->serving_fence != fence) return -1;
    return n->index;
  }
  return -1;
}

bool World::InQuorum(int n) {
  Cluster* c = ClusterOf(n);
  if (c == nullptr || c->leader == 0 || nodes_[n]->disk.state != DataDirState::kMember)
    return false;
  if (!nodes_[n]->etcd_up || Paused(n) || FindMember(*c, nodes_[n]->disk.member) == nullptr)
    return false;
  int l = NodeOfMember(*c, c->leader);
  return l >= 0 && Reach(n, l);
}

void World::Refresh() {
  if (!dirty_ && refreshed_at_ == now_) return;
  dirty_ = false;
  refreshed_at_ = now_;
  for (auto& [id, c] : clusters_) {
    // Expired leases take their keys with them.
    for (auto it = c.leases.begin(); it != c.leases.end();) {
      if (it->second.first <= now_ && c.leader != 0) {
        int64_t lease = it->first;
        it = c.leases.erase(it);
        for (auto k = c.kv.begin(); k != c.kv.end();) {
          k = k->second.lease == lease ? c.kv.erase(k) : std::next(k);
        }
        ++c.rev;
      } else {
        ++it;
      }
    }
    auto up = [&](const Member& m) {
      int n = NodeOfMember(c, m.id);
      return n >= 0 && nodes_[n]->etcd_up && !Paused(n) ? n : -1;
    };
    int voters = 0;
    for (const auto& m : c.members) voters += m.learner ? 0 : 1;
    auto valid = [&](const Member& l) {
      int ln = up(l);
      if (ln < 0 || l.learner) return false;
      int reach = 0;
      for (const auto& v : c.members) {
        int vn = up(v);
        if (!v.learner && vn >= 0 && Reach(ln, vn)) ++reach;
      }
      return reach * 2 > voters;
    };
    Member* current = c.leader ? FindMember(c, c.leader) : nullptr;
    if (current == nullptr || !valid(*current)) {
      uint64_t before = c.leader;
      c.leader = 0;
      for (const auto& m : c.members) {
        if (valid(m)) {
          c.leader = m.id;
          break;
        }
      }
      if (c.leader != before) {
        Trace(absl::StrCat("cluster ", HexId(c.id), ": raft leader ",
                           c.leader ? HexId(c.leader) : std::string("none")));
      }
    }
    if (c.leader == 0) continue;
    if (!c.had_leader && o_.lose_first_leader && !trap_done_) trap_sprung_ = true;
    c.had_leader = true;
    int ln = NodeOfMember(c, c.leader);
    // The quorum side catches up, publishes itself and learns the current member list.
    for (auto& m : c.members) {
      int n = up(m);
      if (n < 0 || !Reach(n, ln)) continue;
      Disk& d = nodes_[n]->disk;
      d.rev = c.rev;
      d.wal_commit = 3 + static_cast<uint64_t>(c.rev);
      if (!m.started) {
        m.started = true;
        m.name = nodes_[n]->spec.name;
      }
    }
    for (auto& m : c.members) {
      int n = up(m);
      if (n >= 0 && Reach(n, ln)) nodes_[n]->disk.seen = c.members;
    }
  }
  // A member that learns it was removed stops (etcd exits; the agent keeps restarting it).
  for (auto& n : nodes_) {
    if (!n->etcd_up || n->disk.state != DataDirState::kMember) continue;
    Cluster* c = ClusterOf(n->index);
    if (c != nullptr && c->leader != 0 && FindMember(*c, n->disk.member) == nullptr) {
      int ln = NodeOfMember(*c, c->leader);
      if (ln >= 0 && Reach(n->index, ln)) n->etcd_up = false;
    }
  }
}

void World::StartEtcd(int i) {
  Node& n = *nodes_[i];
  if (n.etcd_up || Paused(i)) return;
  const std::vector<std::string>& flags = n.etcd_flags;
  n.running_flags = flags;
  if (n.disk.state == DataDirState::kMember) {
    // etcd starts on its data; the cluster flags are ignored.
    n.etcd_up = true;
    n.serving_fence = Flag(flags, "listen-client-urls") == n.config.FenceUrl(n.spec);
    dirty_ = true;
    return;
  }
  n.serving_fence = false;
  if (Flag(flags, "initial-cluster-state") == "new") {
    Bootstrap(i, flags);
  } else {
    TryJoin(i, flags);
  }
}

void World::Bootstrap(int i, const std::vector<std::string>& flags) {
  Node& n = *nodes_[i];
  // etcd bootstraps the cluster its flags name (on an empty data dir).
  const std::string token = Flag(flags, "initial-cluster-token");
  uint64_t cid = 0x5eed;
  std::vector<Member> members;
  for (absl::string_view entry : absl::StrSplit(Flag(flags, "initial-cluster"), ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    Member mm;
    mm.id = InitialMemberId({kv.second}, token);
    mm.name = kv.first;  // initial members carry their names from the start
    mm.peer_url = kv.second;
    members.push_back(mm);
    cid = Mix(cid, mm.id);
  }
  auto it = clusters_.find(cid);
  if (it == clusters_.end()) {
    if (EvidenceOfExistence(i)) {
      Violation(absl::StrCat("node ", n.spec.name,
                             " bootstraps an empty cluster although the cluster existed"));
    }
    Cluster c;
    c.id = cid;
    c.members = members;
    c.origin = "bootstrap";
    it = clusters_.emplace(cid, c).first;
    ++result_.bootstraps;
    Trace(i, absl::StrCat("bootstraps the initial cluster ", HexId(cid)));
  } else {
    // Starting an initial member whose entry never ran is how the initial cluster completes
    // (etcd accepts it); an entry that has run would come back empty under its old identity.
    const uint64_t mine = InitialMemberId({n.config.PeerUrl(n.spec)}, token);
    Member* m = FindMember(it->second, mine);
    if (it->second.had_leader && (m == nullptr || m->started)) {
      Violation(absl::StrCat("node ", n.spec.name, " bootstraps (empty) into initial cluster ",
                             HexId(cid), " whose entry for it has run"));
    }
  }
  n.disk.state = DataDirState::kMember;
  n.disk.cluster = cid;
  n.disk.member = InitialMemberId({n.config.PeerUrl(n.spec)}, token);
  n.disk.rev = 0;
  n.disk.wal_commit = members.size();  // the initial members' configuration entries
  n.disk.seen = it->second.members;
  n.etcd_up = true;
  dirty_ = true;
}

std::string World::RunningVersion(const Cluster& c) const {
  std::string highest;
  for (const auto& m : nodes_) {
    if (!m->etcd_up || m->disk.cluster != c.id) continue;
    const std::string v = VersionOfBinary(m->binary);
    if (highest.empty() || MinorBelow(highest, v)) highest = v;
  }
  return highest;
}

void World::TryJoin(int i, const std::vector<std::string>& flags) {
  Node& n = *nodes_[i];
  const std::string mine = n.config.PeerUrl(n.spec);
  for (absl::string_view entry : absl::StrSplit(Flag(flags, "initial-cluster"), ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    int k = NodeByPeerUrl(kv.second);
    if (k < 0 || k == i || Answering(i, nodes_[k]->config.ClientUrl(nodes_[k]->spec)) < 0) continue;
    if (!InQuorum(k)) continue;
    Cluster* c = ClusterOf(k);
    for (const auto& e : c->members) {
      if (e.peer_url == mine && !e.started) {
        if (const std::string running = RunningVersion(*c);
            MinorBelow(VersionOfBinary(n.binary), running)) {
          Trace(i, absl::StrCat("etcd ", VersionOfBinary(n.binary), " exits: incompatible with ",
                                "current running cluster (", running, ")"));
          break;
        }
        n.disk.state = DataDirState::kMember;
        n.disk.cluster = c->id;
        n.disk.member = e.id;
        n.disk.rev = 0;
        n.disk.seen = c->members;
        // A joining member gets the leader's snapshot, its data as it is, changed or not.
        const int l = NodeOfMember(*c, c->leader);
        n.disk.diverged = l >= 0 ? nodes_[l]->disk.diverged : 0;
        n.etcd_up = true;
        dirty_ = true;
        Trace(i, absl::StrCat("etcd joins cluster ", HexId(c->id), " as ", HexId(e.id)));
        return;
      }
    }
  }
  // etcd exits ("member not found"); the runner tries again. A join that fails after etcd
  // created its dirs leaves a partial data dir now and then.
  if (rng_() % 8 == 0) n.disk.state = DataDirState::kPartial;
}

void World::Prune() {
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    bool held = false;
    for (const auto& n : nodes_) {
      if (n->disk.state == DataDirState::kMember && n->disk.cluster == it->first) held = true;
    }
    // Keep an initial cluster that is still being bootstrapped.
    if (!held && it->second.had_leader) {
      if (it->second.served) lost_rev_ = std::max(lost_rev_, it->second.rev);
      it = clusters_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace steward::sim
