#include "sim/etcd_api.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rules.h"
#include "etcd/keys.h"
#include "etcd/member_id.h"
#include "sim/disk_model.h"
#include "sim/world.h"

namespace steward::sim {

using std::chrono::milliseconds;

absl::StatusOr<std::vector<MemberInfo>> SimEtcd::MemberList(uint64_t* cluster_id) {
  w_->CallPoint(caller_);
  w_->Refresh();
  for (const auto& url : urls_) {
    int n = w_->Answering(caller_, url);
    if (n < 0) continue;
    // etcd 3.4 serves the member list from the member's own state: stale out of quorum.
    return ListOf(n, cluster_id);
  }
  return absl::UnavailableError("no member answers");
}

std::vector<MemberInfo> SimEtcd::ListOf(int n, uint64_t* cluster_id) {
  {
    const Disk& d = w_->nodes()[n]->disk;
    if (cluster_id) *cluster_id = d.cluster;
    std::vector<MemberInfo> out;
    for (const auto& m : d.seen) {
      MemberInfo mi;
      mi.id = m.id;
      mi.name = m.name;
      mi.peer_urls = {m.peer_url};
      int holder = w_->NodeByPeerUrl(m.peer_url);
      if (m.started && holder >= 0) {
        // What the member published when its etcd last started: the fence URL while fenced.
        const Node& h = *w_->nodes()[holder];
        mi.client_urls = {h.serving_fence ? h.config.FenceUrl(h.spec) : h.config.ClientUrl(h.spec)};
      }
      mi.is_learner = m.learner;
      out.push_back(mi);
    }
    return out;
  }
}

absl::StatusOr<std::vector<MemberInfo>> SimEtcd::LinearizableMemberList(uint64_t* cluster_id) {
  // The read barrier: only a member on the quorum side serves it. (Rule "L1" off: the list
  // is served locally, as MemberList does, which is what the agents used before.)
  if (RuleOff("L1")) return MemberList(cluster_id);
  auto c = Quorum();
  if (!c.ok()) return c.status();
  return ListOf(c->second, cluster_id);
}

absl::StatusOr<MemberInfo> SimEtcd::MemberAdd(const std::vector<std::string>& peer_urls,
                                              bool learner) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  for (const auto& m : cl.members) {
    if (m.learner)
      return absl::FailedPreconditionError("etcdserver: too many learner members in cluster");
    if (m.peer_url == peer_urls.front())
      return absl::FailedPreconditionError("etcdserver: Peer URLs already exists");
  }
  // etcd derives the ID from the peer URLs and the answering member's Unix second.
  const Ms wall = w_->Wall(c->second);
  uint64_t id = InitialMemberId(peer_urls, std::to_string(wall / 1000));
  if (cl.removed.count(id) || w_->FindMember(cl, id)) {
    return absl::FailedPreconditionError("etcdserver: member not found (ID reused)");
  }
  Member m;
  m.id = id;
  m.peer_url = peer_urls.front();
  m.learner = learner;
  cl.members.push_back(m);
  w_->Trace(caller_,
            absl::StrCat("MemberAdd learner ", HexId(id), " ", m.peer_url, " to ", HexId(cl.id)));
  MemberInfo mi;
  mi.id = id;
  mi.peer_urls = peer_urls;
  mi.is_learner = learner;
  Dirty();
  w_->CallPoint(caller_);
  return mi;
}

absl::Status SimEtcd::MemberRemove(uint64_t id) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  Member* m = w_->FindMember(cl, id);
  if (m == nullptr) return absl::NotFoundError("etcdserver: member not found");
  if (!m->learner) {
    // etcd's strict reconfiguration check: the remaining voters that are started and
    // connected to the leader must still be a quorum of the remaining voters.
    int voters = 0, active = 0;
    int leader_node = w_->NodeOfMember(cl, cl.leader);
    for (const auto& v : cl.members) {
      if (v.learner || v.id == id) continue;
      ++voters;
      int n = w_->NodeOfMember(cl, v.id);
      if (n >= 0 && leader_node >= 0 && w_->nodes()[n]->etcd_up && !w_->Paused(n) &&
          w_->Reach(n, leader_node)) {
        ++active;
      }
    }
    if (active < voters / 2 + 1) {
      return absl::FailedPreconditionError(
          "etcdserver: re-configuration failed due to not enough started members");
    }
  }
  w_->Trace(caller_, absl::StrCat("MemberRemove ", HexId(id), " from ", HexId(cl.id)));
  cl.members.erase(std::remove_if(cl.members.begin(), cl.members.end(),
                                  [&](const Member& x) { return x.id == id; }),
                   cl.members.end());
  cl.removed.insert(id);
  if (cl.leader == id) cl.leader = 0;
  Dirty();
  w_->CallPoint(caller_);
  return absl::OkStatus();
}

absl::Status SimEtcd::MemberPromote(uint64_t id) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  Member* m = w_->FindMember(cl, id);
  if (m == nullptr) return absl::NotFoundError("etcdserver: member not found");
  if (!m->learner)
    return absl::FailedPreconditionError("etcdserver: can only promote a learner member");
  int n = w_->NodeOfMember(cl, id);
  if (n < 0 || !w_->InQuorum(n) || w_->nodes()[n]->disk.rev < cl.rev) {
    return absl::FailedPreconditionError(
        "etcdserver: can only promote a learner member which is in sync with leader");
  }
  m->learner = false;
  w_->Trace(caller_, absl::StrCat("MemberPromote ", HexId(id), " in ", HexId(cl.id)));
  Dirty();
  w_->CallPoint(caller_);
  return absl::OkStatus();
}

absl::Status SimEtcd::MoveLeader(const std::string&, uint64_t target, milliseconds) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  Member* m = w_->FindMember(cl, target);
  if (m == nullptr || m->learner) {
    return absl::FailedPreconditionError("etcdserver: bad leader transferee");
  }
  int n = w_->NodeOfMember(cl, target);
  if (n < 0 || !w_->InQuorum(n) || w_->nodes()[n]->disk.rev < cl.rev) {
    return absl::DeadlineExceededError(
        "etcdserver: request timed out, leader transfer took too long");
  }
  cl.leader = target;
  w_->Trace(caller_, absl::StrCat("MoveLeader to ", HexId(target), " in ", HexId(cl.id)));
  Dirty();
  w_->CallPoint(caller_);
  return absl::OkStatus();
}

absl::Status SimEtcd::Put(const std::string& key, const std::string& value, int64_t lease) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  if (lease != 0 && !cl.leases.count(lease))
    return absl::NotFoundError("etcdserver: requested lease not found");
  PutKv(cl, key, value, lease);
  ++cl.rev;
  Dirty();
  if (key == StatusKey("sim")) w_->CheckRepair(value);
  w_->CallPoint(caller_);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> SimEtcd::Get(const std::string& key) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  auto it = c->first->kv.find(key);
  if (it == c->first->kv.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second.value);
}

absl::StatusOr<int64_t> SimEtcd::LeaseGrant(std::chrono::seconds ttl) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  int64_t id = c->first->next_lease++;
  const Ms t = std::chrono::duration_cast<milliseconds>(ttl).count();
  c->first->leases[id] = {w_->now() + t, t};
  w_->CallPoint(caller_);
  return id;
}

absl::Status SimEtcd::LeaseRevoke(int64_t lease) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  if (!cl.leases.erase(lease)) return absl::NotFoundError("etcdserver: requested lease not found");
  DropLeaseKeys(cl, lease);
  Dirty();
  w_->CallPoint(caller_);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> SimEtcd::LeaseLeases() {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  std::vector<int64_t> out;
  for (const auto& [id, l] : c->first->leases) out.push_back(id);
  return out;
}

absl::Status SimEtcd::LeaseKeepAliveOnce(int64_t lease) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  auto it = c->first->leases.find(lease);
  if (it == c->first->leases.end()) return absl::NotFoundError("lease expired");
  it->second.first = w_->now() + it->second.second;
  return absl::OkStatus();
}

absl::StatusOr<etcdserverpb::TxnResponse> SimEtcd::Txn(const etcdserverpb::TxnRequest& req) {
  auto c = Quorum();
  if (!c.ok()) return c.status();
  Cluster& cl = *c->first;
  bool ok = true;
  for (const auto& cmp : req.compare()) {
    auto it = cl.kv.find(cmp.key());
    const Kv* kv = it == cl.kv.end() ? nullptr : &it->second;
    int64_t have = 0, want = 0;
    std::string hv, wv;
    bool is_string = false;
    switch (cmp.target()) {
      case etcdserverpb::Compare::CREATE:
        have = kv ? kv->create : 0;
        want = cmp.create_revision();
        break;
      case etcdserverpb::Compare::MOD:
        have = kv ? kv->mod : 0;
        want = cmp.mod_revision();
        break;
      case etcdserverpb::Compare::VERSION:
        have = kv ? kv->version : 0;
        want = cmp.version();
        break;
      case etcdserverpb::Compare::LEASE:
        have = kv ? kv->lease : 0;
        want = cmp.lease();
        break;
      case etcdserverpb::Compare::VALUE:
        is_string = true;
        if (kv == nullptr) {
          ok = false;
          continue;
        }  // etcd: a missing key fails VALUE compares
        hv = kv->value;
        wv = cmp.value();
        break;
      default:
        return absl::UnimplementedError("compare target");
    }
    int r = is_string ? hv.compare(wv) : (have < want ? -1 : have > want ? 1 : 0);
    bool pass = false;
    switch (cmp.result()) {
      case etcdserverpb::Compare::EQUAL:
        pass = r == 0;
        break;
      case etcdserverpb::Compare::NOT_EQUAL:
        pass = r != 0;
        break;
      case etcdserverpb::Compare::GREATER:
        pass = r > 0;
        break;
      case etcdserverpb::Compare::LESS:
        pass = r < 0;
        break;
      default:
        return absl::UnimplementedError("compare result");
    }
    ok = ok && pass;
  }
  etcdserverpb::TxnResponse resp;
  resp.set_succeeded(ok);
  bool wrote = false, replayed = false;
  for (const auto& op : ok ? req.success() : req.failure()) {
    auto* r = resp.add_responses();
    if (op.has_request_put()) {
      const auto& p = op.request_put();
      if (p.lease() != 0 && !cl.leases.count(p.lease()))
        return absl::NotFoundError("etcdserver: requested lease not found");
      // A delta's write, replayed by a restore: the write is held again, at this revision.
      if (int w = 0; absl::StartsWith(p.key(), kWriteKeyPrefix) &&
                     absl::SimpleAtoi(p.key().substr(kWriteKeyPrefix.size()), &w)) {
        cl.writes.emplace_back(cl.rev + 1, w);
        w_->Replayed(cl.id, w);
        wrote = replayed = true;
        r->mutable_response_put();
        continue;
      }
      PutKv(cl, p.key(), p.value(), p.lease(), cl.rev + 1);
      wrote = true;
      r->mutable_response_put();
    } else if (op.has_request_range()) {
      auto* rr = r->mutable_response_range();
      auto it = cl.kv.find(op.request_range().key());
      if (it != cl.kv.end()) {
        auto* kv = rr->add_kvs();
        kv->set_key(it->first);
        kv->set_value(it->second.value);
        kv->set_create_revision(it->second.create);
        kv->set_mod_revision(it->second.mod);
        kv->set_version(it->second.version);
        kv->set_lease(it->second.lease);
        rr->set_count(1);
      }
    } else if (op.has_request_delete_range()) {
      if (cl.kv.erase(op.request_delete_range().key())) wrote = true;
      r->mutable_response_delete_range();
    }
  }
  if (wrote) {
    ++cl.rev;
    Dirty();
  }
  // Committed: on the quorum's disks before the answer, as a client's write (World::Write).
  // (Only for replayed writes, whose durability the world checks, so that runs without
  // deltas replay as before.)
  if (replayed) w_->Refresh();
  resp.mutable_header()->set_revision(cl.rev);
  w_->CallPoint(caller_);
  return resp;
}

absl::StatusOr<MemberStatus> SimEtcd::Status(const std::string& url, milliseconds) {
  w_->CallPoint(caller_);
  w_->Refresh();
  int n = w_->Answering(caller_, url);
  if (n < 0) return absl::DeadlineExceededError(absl::StrCat(url, " does not answer"));
  const Disk& d = w_->nodes()[n]->disk;
  Cluster* cl = w_->ClusterOf(n);
  MemberStatus st;
  st.endpoint = url;
  st.member_id = d.member;
  st.cluster_id = d.cluster;
  const bool q = w_->InQuorum(n);
  st.revision = q ? cl->rev : d.rev;
  st.raft_index = static_cast<uint64_t>(st.revision);
  st.leader = q ? cl->leader : 0;
  if (cl != nullptr) {
    if (Member* m = w_->FindMember(*cl, d.member)) st.is_learner = m->learner;
  }
  st.version = VersionOfBinary(w_->nodes()[n]->binary);
  return st;
}

absl::StatusOr<EtcdApi::KvHash> SimEtcd::HashKVOf(const std::string& url, int64_t revision,
                                                  milliseconds) {
  w_->CallPoint(caller_);
  w_->Refresh();
  int n = w_->Answering(caller_, url);
  if (n < 0) return absl::DeadlineExceededError(absl::StrCat(url, " does not answer"));
  const Disk& d = w_->nodes()[n]->disk;
  Cluster* cl = w_->ClusterOf(n);
  const int64_t held = w_->InQuorum(n) && cl != nullptr ? cl->rev : d.rev;
  if (revision > held) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision is a future revision");
  }
  uint64_t h =
      (d.cluster * 0x9e3779b97f4a7c15ULL) ^ (static_cast<uint64_t>(revision) * 0xff51afd7ULL);
  if (d.diverged != 0) h ^= 0xc4ceb9fe1a85ec53ULL * d.diverged;
  return KvHash{static_cast<uint32_t>(h ^ (h >> 32)), 1};
}

absl::StatusOr<uint64_t> SimEtcd::Snapshot(const std::string&,
                                           const std::function<absl::Status(std::string_view)>&,
                                           milliseconds) {
  return absl::UnimplementedError("the simulation takes backups itself");
}

absl::StatusOr<std::pair<Cluster*, int>> SimEtcd::Quorum() {
  w_->CallPoint(caller_);
  w_->Refresh();
  for (const auto& url : urls_) {
    int n = w_->Answering(caller_, url);
    if (n < 0 || !w_->InQuorum(n)) continue;
    return std::make_pair(w_->ClusterOf(n), n);
  }
  return absl::UnavailableError("etcdserver: no leader reachable");
}

void SimEtcd::PutKv(Cluster& cl, const std::string& key, const std::string& value, int64_t lease,
                    int64_t rev) {
  if (rev == 0) rev = cl.rev + 1;
  Kv& kv = cl.kv[key];
  if (kv.create == 0) kv.create = rev;
  kv.mod = rev;
  ++kv.version;
  kv.value = value;
  kv.lease = lease;
}

void SimEtcd::DropLeaseKeys(Cluster& cl, int64_t lease) {
  for (auto it = cl.kv.begin(); it != cl.kv.end();) {
    it = it->second.lease == lease ? cl.kv.erase(it) : std::next(it);
  }
  ++cl.rev;
}

void SimEtcd::Dirty() { w_->Sleep(0); }

}  // namespace steward::sim
