#include "sim/world.h"

#include <algorithm>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/start_view.h"
#include "backup/layout.h"
#include "etcd/keys.h"
#include "backup/pipeline.h"
#include "common/rules.h"
#include "etcd/member_id.h"
#include "openssl/sha.h"
#include "reconcile/admission.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace steward::sim {
namespace {

using std::chrono::milliseconds;

// Thrown from inside a call to model the caller's process dying at that point: it unwinds the
// agent's code, whose objects are then destroyed like a dead process's memory.
struct CrashPoint {
  int node;
};

struct Kv {
  std::string value;
  int64_t create = 0, mod = 0, version = 0, lease = 0;
};

struct Member {
  uint64_t id = 0;
  std::string name;  // empty until started (runtime-added members)
  std::string peer_url;
  bool learner = false;
  bool started = false;
};

using Writes = std::vector<std::pair<int64_t, int>>;  // (revision, write id), acknowledged

struct Cluster {
  uint64_t id = 0;
  std::vector<Member> members;
  std::set<uint64_t> removed;
  int64_t rev = 1;
  Writes writes;
  std::map<std::string, Kv> kv;
  std::map<int64_t, std::pair<Ms, Ms>> leases;  // id -> (expiry, ttl)
  int64_t next_lease = 0x1000;
  uint64_t leader = 0;
  bool had_leader = false;
  std::string origin;  // "bootstrap" or "restore <id>"
};

struct Disk {
  DataDirState state = DataDirState::kEmpty;
  uint64_t cluster = 0, member = 0;
  int64_t rev = 0;            // the revision this member's data holds
  std::vector<Member> seen;   // its locally served member list
  // Markers and files beside etcd's data dir (lost only with the whole node).
  bool joined = false, bootstrapping = false;
  // The WAL's commit index (ReadWalCommit): the initial members' configuration entries at a
  // bootstrap, more once a leader's entries were accepted.
  uint64_t wal_commit = 0;
  bool EverJoined() const { return steward::EverJoined(joined, wal_commit, 3); }
  std::string restore_id;
  bool fenced = false;
  uint64_t newest_term = 0;
  std::string newest_leader;
};

enum class Want { kNone, kOnData, kJoin, kBootstrap };

struct BackupData {
  int64_t revision = 0;
  Writes writes;
  std::map<std::string, Kv> kv;
  std::map<int64_t, Ms> lease_ttls;
  uint64_t cluster = 0;
};

std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char c : d) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

class World;

// Virtual time, per node: one steady time for all, wall time with the node's skew.
class SimClock : public Clock {
 public:
  SimClock(World* w, int node) : w_(w), node_(node) {}
  std::chrono::steady_clock::time_point Now() override;
  std::chrono::system_clock::time_point WallNow() override;
  void SleepFor(milliseconds d) override;

 private:
  World* w_;
  int node_;
};

// The backup store: objects in memory; it can be down (Unavailable), not mounted
// (FailedPrecondition, as FileStore says for a missing root) or emptied.
class SimStore : public BackupStore {
 public:
  enum class Mode { kUp, kDown, kMissing };
  Mode mode = Mode::kUp;
  std::map<std::string, std::string> objects;

  std::string Describe() const override { return "sim://store"; }
  absl::Status Check() const {
    if (mode == Mode::kDown) return absl::UnavailableError("store down");
    if (mode == Mode::kMissing) return absl::FailedPreconditionError("store root missing (not mounted?)");
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string&) override {
    return absl::UnimplementedError("the simulation writes whole objects");
  }
  absl::Status Put(const std::string& key, const std::string& content) override {
    if (auto s = Check(); !s.ok()) return s;
    objects[key] = content;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key) override {
    if (auto s = Check(); !s.ok()) return s;
    auto it = objects.find(key);
    if (it == objects.end()) return absl::NotFoundError(key);
    return it->second;
  }
  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    auto text = Get(key);
    if (!text.ok()) return text.status();
    return sink(*text);
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    if (auto s = Check(); !s.ok()) return s;
    std::vector<ObjectInfo> out;
    for (auto it = objects.lower_bound(prefix); it != objects.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      out.push_back({it->first, it->second.size()});
    }
    return out;
  }
  absl::Status Delete(const std::string& key) override {
    if (auto s = Check(); !s.ok()) return s;
    objects.erase(key);
    return absl::OkStatus();
  }
};

class SimEtcd;
class SimPeer;

struct Node {
  int index = 0;
  NodeSpec spec;
  Config config;
  bool initial = false;
  bool agent_up = true;
  Ms restart_at = -1;  // a crashed node comes back then
  Ms paused_until = 0;
  bool etcd_up = false;
  Want want = Want::kNone;
  bool member_data_seen = false;  // DataLostUnderEtcd
  bool held = false;  // the leader stopped etcd
  peer::StartRequest join;
  Disk disk;
  Ms skew = 0;
  std::string last_start_reason;
  std::unique_ptr<SimClock> clock;
  std::unique_ptr<SimEtcd> cluster_client, peers_client;
  std::map<std::string, std::unique_ptr<SimPeer>> initial_agents;
  std::unique_ptr<Leadership> leadership;
  std::unique_ptr<RestoreCoordinator> restorer;
  std::unique_ptr<Reconciler> reconciler;
  Ms next_restore_pass = 0;
};

class World {
 public:
  explicit World(const Options& o);
  ~World();
  Result Run();

  // --- used by the seams ---
  Ms now() const { return now_; }
  Ms Wall(int node) const { return kWallEpoch + now_ + nodes_[node]->skew; }
  void Sleep(Ms d) {
    now_ += d;
    dirty_ = true;
  }
  void CallPoint(int caller);  // may throw CrashPoint
  bool Reach(int a, int b) const {
    return a == b || (!cuts_.count({a, b}) && !cuts_.count({b, a}));
  }
  bool Paused(int n) const { return nodes_[n]->paused_until > now_; }
  bool AgentAnswers(int caller, int n) const {
    return nodes_[n]->agent_up && !Paused(n) && Reach(caller, n);
  }
  // The node whose etcd serves on `url` for `caller`, or -1.
  int Answering(int caller, const std::string& url);
  Cluster* ClusterOf(int n) {
    auto it = clusters_.find(nodes_[n]->disk.cluster);
    return it == clusters_.end() ? nullptr : &it->second;
  }
  // The member serves on its cluster's quorum side (the leader reaches it).
  bool InQuorum(int n);
  void Refresh();
  void Trace(const std::string& line);
  void Trace(int node, const std::string& line) { Trace(absl::StrCat(nodes_[node]->spec.name, " ", line)); }
  void Violation(const std::string& what);
  int NodeByPeerUrl(const std::string& url) const;
  Member* FindMember(Cluster& c, uint64_t id) {
    for (auto& m : c.members) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  int NodeOfMember(const Cluster& c, uint64_t id) const;
  peer::NodeState StateOf(int n);
  absl::Status Admit(int n, const peer::OrderHeader& h, const char* what, bool promise);
  absl::Status OrderJoin(int n, const peer::StartRequest& req);
  absl::Status OrderStop(int n);
  absl::Status OrderWipe(int n, const peer::OrderHeader& h);
  absl::Status OrderRestore(int n, const peer::RestoreRequest& req);
  absl::Status OrderUnfence(int n, const peer::UnfenceRequest& req);
  std::mt19937_64& rng() { return rng_; }
  SimStore& store() { return store_; }
  Result& result() { return result_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  bool stopped() const { return !result_.ok; }
  std::map<uint64_t, Cluster>& clusters() { return clusters_; }

  static constexpr Ms kWallEpoch = 1'790'000'000'000;  // 2026-09

 private:
  void Boot(int n);     // (re)start a node's agent: fresh objects, the disk as it was
  void Kill(int n, bool etcd_too);
  void Tick(int n);
  void TickBody(int n);
  void StartEtcdAsWanted(int n);
  void Bootstrap(int n);
  void TryJoin(int n);
  void Write();
  void TakeBackup();
  void Fault();
  void Scheduled();
  void HealAll();
  bool Healthy(std::string* why);
  bool EvidenceOfExistence(int except) const;
  // Clusters whose voters' disks still hold a majority of them.
  std::vector<uint64_t> ClustersAbleToReachQuorum() const;
  void CheckWrites(bool after_fault);
  // A member leaving the fence serves clients: no lease (lock, leader key) of the lost cluster
  // may still be alive in it.
  void CheckNoRestoredLease(int n);
  void Prune();

  Options o_;
  std::mt19937_64 rng_;
  Ms now_ = 0;
  bool dirty_ = true;
  Ms refreshed_at_ = -1;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<uint64_t, Cluster> clusters_;
  SimStore store_;
  std::set<std::pair<int, int>> cuts_;
  Ms heal_cuts_at_ = -1, heal_store_at_ = -1;
  std::map<std::string, BackupData> backups_;
  std::string last_backup_;  // the newest backup by history: the one taken last
  // Leases each restored cluster brought back from its backup (none may outlive the fence).
  std::map<uint64_t, std::set<int64_t>> restored_leases_;
  int next_write_ = 0;
  std::set<int> lost_;  // writes no longer held (to a fault, or a justified restore)
  std::set<std::string> restores_seen_;
  std::deque<std::string> trace_;
  Ms next_backup_ = 20000;
  bool in_fault_ = false;
  bool healing_ = false;
  bool in_pause_ = false;
  bool trap_sprung_ = false, trap_done_ = false;  // Options::lose_first_leader
 public:
  int current_ = -1;  // the node whose code runs (for its log lines in the trace)
 private:
  Result result_;
};

// ---- seams ----

std::chrono::steady_clock::time_point SimClock::Now() {
  return std::chrono::steady_clock::time_point(milliseconds(w_->now() + 1'000'000));
}
std::chrono::system_clock::time_point SimClock::WallNow() {
  return std::chrono::system_clock::time_point(milliseconds(w_->Wall(node_)));
}
void SimClock::SleepFor(milliseconds d) {
  w_->CallPoint(node_);
  w_->Sleep(std::max<Ms>(1, d.count()));
}

class SimEtcd : public EtcdApi {
 public:
  SimEtcd(World* w, int caller, std::vector<std::string> urls)
      : w_(w), caller_(caller), urls_(std::move(urls)) {}
  const std::vector<std::string>& endpoints() const override { return urls_; }

  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cluster_id) override {
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

  std::vector<MemberInfo> ListOf(int n, uint64_t* cluster_id) {
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
          mi.client_urls = {w_->nodes()[holder]->config.ClientUrl(w_->nodes()[holder]->spec)};
        }
        mi.is_learner = m.learner;
        out.push_back(mi);
      }
      return out;
    }
  }

  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t* cluster_id) override {
    // The read barrier: only a member on the quorum side serves it. (Rule "L1" off: the list
    // is served locally, as MemberList does, which is what the agents used before.)
    if (RuleOff("L1")) return MemberList(cluster_id);
    auto c = Quorum();
    if (!c.ok()) return c.status();
    return ListOf(c->second, cluster_id);
  }

  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>& peer_urls,
                                       bool learner) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    Cluster& cl = *c->first;
    for (const auto& m : cl.members) {
      if (m.learner) return absl::FailedPreconditionError("etcdserver: too many learner members in cluster");
      if (m.peer_url == peer_urls.front()) return absl::FailedPreconditionError("etcdserver: Peer URLs already exists");
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
    w_->Trace(caller_, absl::StrCat("MemberAdd learner ", HexId(id), " ", m.peer_url, " to ", HexId(cl.id)));
    MemberInfo mi;
    mi.id = id;
    mi.peer_urls = peer_urls;
    mi.is_learner = learner;
    Dirty();
    w_->CallPoint(caller_);
    return mi;
  }

  absl::Status MemberRemove(uint64_t id) override {
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

  absl::Status MemberPromote(uint64_t id) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    Cluster& cl = *c->first;
    Member* m = w_->FindMember(cl, id);
    if (m == nullptr) return absl::NotFoundError("etcdserver: member not found");
    if (!m->learner) return absl::FailedPreconditionError("etcdserver: can only promote a learner member");
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

  absl::Status Put(const std::string& key, const std::string& value, int64_t lease) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    Cluster& cl = *c->first;
    if (lease != 0 && !cl.leases.count(lease)) return absl::NotFoundError("etcdserver: requested lease not found");
    PutKv(cl, key, value, lease);
    ++cl.rev;
    Dirty();
    w_->CallPoint(caller_);
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    auto it = c->first->kv.find(key);
    if (it == c->first->kv.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second.value);
  }

  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds ttl) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    int64_t id = c->first->next_lease++;
    const Ms t = std::chrono::duration_cast<milliseconds>(ttl).count();
    c->first->leases[id] = {w_->now() + t, t};
    w_->CallPoint(caller_);
    return id;
  }

  absl::Status LeaseRevoke(int64_t lease) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    Cluster& cl = *c->first;
    if (!cl.leases.erase(lease)) return absl::NotFoundError("etcdserver: requested lease not found");
    DropLeaseKeys(cl, lease);
    Dirty();
    w_->CallPoint(caller_);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    std::vector<int64_t> out;
    for (const auto& [id, l] : c->first->leases) out.push_back(id);
    return out;
  }

  absl::Status LeaseKeepAliveOnce(int64_t lease) override {
    auto c = Quorum();
    if (!c.ok()) return c.status();
    auto it = c->first->leases.find(lease);
    if (it == c->first->leases.end()) return absl::NotFoundError("lease expired");
    it->second.first = w_->now() + it->second.second;
    return absl::OkStatus();
  }

  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) override {
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
        case etcdserverpb::Compare::CREATE: have = kv ? kv->create : 0; want = cmp.create_revision(); break;
        case etcdserverpb::Compare::MOD: have = kv ? kv->mod : 0; want = cmp.mod_revision(); break;
        case etcdserverpb::Compare::VERSION: have = kv ? kv->version : 0; want = cmp.version(); break;
        case etcdserverpb::Compare::LEASE: have = kv ? kv->lease : 0; want = cmp.lease(); break;
        case etcdserverpb::Compare::VALUE:
          is_string = true;
          if (kv == nullptr) { ok = false; continue; }  // etcd: a missing key fails VALUE compares
          hv = kv->value;
          wv = cmp.value();
          break;
        default: return absl::UnimplementedError("compare target");
      }
      int r = is_string ? hv.compare(wv) : (have < want ? -1 : have > want ? 1 : 0);
      bool pass = false;
      switch (cmp.result()) {
        case etcdserverpb::Compare::EQUAL: pass = r == 0; break;
        case etcdserverpb::Compare::NOT_EQUAL: pass = r != 0; break;
        case etcdserverpb::Compare::GREATER: pass = r > 0; break;
        case etcdserverpb::Compare::LESS: pass = r < 0; break;
        default: return absl::UnimplementedError("compare result");
      }
      ok = ok && pass;
    }
    etcdserverpb::TxnResponse resp;
    resp.set_succeeded(ok);
    bool wrote = false;
    for (const auto& op : ok ? req.success() : req.failure()) {
      auto* r = resp.add_responses();
      if (op.has_request_put()) {
        const auto& p = op.request_put();
        if (p.lease() != 0 && !cl.leases.count(p.lease())) return absl::NotFoundError("etcdserver: requested lease not found");
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
    resp.mutable_header()->set_revision(cl.rev);
    w_->CallPoint(caller_);
    return resp;
  }

  absl::StatusOr<MemberStatus> Status(const std::string& url, milliseconds) override {
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
    st.version = "3.4.23";
    return st;
  }

  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    milliseconds) override {
    return absl::UnimplementedError("the simulation takes backups itself");
  }

 private:
  // The cluster behind the first answering endpoint whose member is on the quorum side, and
  // the node that answered.
  absl::StatusOr<std::pair<Cluster*, int>> Quorum() {
    w_->CallPoint(caller_);
    w_->Refresh();
    for (const auto& url : urls_) {
      int n = w_->Answering(caller_, url);
      if (n < 0 || !w_->InQuorum(n)) continue;
      return std::make_pair(w_->ClusterOf(n), n);
    }
    return absl::UnavailableError("etcdserver: no leader reachable");
  }
  void PutKv(Cluster& cl, const std::string& key, const std::string& value, int64_t lease,
             int64_t rev = 0) {
    if (rev == 0) rev = cl.rev + 1;
    Kv& kv = cl.kv[key];
    if (kv.create == 0) kv.create = rev;
    kv.mod = rev;
    ++kv.version;
    kv.value = value;
    kv.lease = lease;
  }
  static void DropLeaseKeys(Cluster& cl, int64_t lease) {
    for (auto it = cl.kv.begin(); it != cl.kv.end();) {
      it = it->second.lease == lease ? cl.kv.erase(it) : std::next(it);
    }
    ++cl.rev;
  }
  void Dirty() { w_->Sleep(0); }

  World* w_;
  int caller_;
  std::vector<std::string> urls_;
};

class SimPeer : public PeerApi {
 public:
  SimPeer(World* w, int caller, int target) : w_(w), caller_(caller), target_(target) {}
  absl::StatusOr<peer::NodeState> GetState(milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    return w_->StateOf(target_);
  }
  absl::Status Join(const peer::StartRequest& req, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, req.header(), "join", false); !s.ok()) return s;
    return Done(w_->OrderJoin(target_, req));
  }
  absl::Status StopEtcd(const peer::OrderHeader& h, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, h, "stop", false); !s.ok()) return s;
    return Done(w_->OrderStop(target_));
  }
  absl::Status Wipe(const peer::OrderHeader& h, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, h, "wipe", false); !s.ok()) return s;
    return Done(w_->OrderWipe(target_, h));
  }
  absl::Status Promise(const peer::OrderHeader& h, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    return Done(w_->Admit(target_, h, "promise", true));
  }
  absl::Status Restore(const peer::RestoreRequest& req, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, req.header(), "restore", false); !s.ok()) return s;
    return Done(w_->OrderRestore(target_, req));
  }
  absl::Status Unfence(const peer::UnfenceRequest& req, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, req.header(), "unfence", false); !s.ok()) return s;
    return Done(w_->OrderUnfence(target_, req));
  }

 private:
  absl::Status Reach() {
    w_->CallPoint(caller_);
    if (!w_->AgentAnswers(caller_, target_)) {
      return absl::DeadlineExceededError(
          absl::StrCat("agent ", w_->nodes()[target_]->spec.name, " does not answer"));
    }
    return absl::OkStatus();
  }
  // The order ran; the caller may still die before it hears so.
  absl::Status Done(absl::Status s) {
    w_->CallPoint(caller_);
    return s;
  }
  World* w_;
  int caller_, target_;
};

// ---- the world ----

World::World(const Options& o) : o_(o), rng_(o.seed) {
  Config base;
  base.cluster.name = "sim";
  base.cluster.size = 3;
  base.cluster.replace_after = milliseconds(10000);
  base.cluster.learner_timeout = milliseconds(20000);
  base.cluster.leader_lease_ttl = milliseconds(5000);
  base.tls.mode = "off";
  base.backup.store = "sim://store";
  base.backup.auto_restore = true;
  base.etcd.etcdutl = "/sim/etcdutl";
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
    n->initial = i < base.cluster.size;
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
  static const char* kWant[] = {"none", "on-data", "join", "bootstrap"};
  static const char* kData[] = {"empty", "partial", "member"};
  for (const auto& n : nodes_) {
    const Disk& d = n->disk;
    Trace(n->index, absl::StrCat("state: agent ", n->agent_up ? "up" : "down", ", etcd ",
                                 n->etcd_up ? "up" : "down", ", wants ",
                                 kWant[static_cast<int>(n->want)], n->held ? " (held)" : "",
                                 ", data ", kData[static_cast<int>(d.state)], " cluster ",
                                 HexId(d.cluster), " member ", HexId(d.member),
                                 d.fenced ? " fenced" : "", " restore ", d.restore_id,
                                 d.EverJoined() ? " joined" : ""));
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
    ++result_.faults["pause-mid-call"];
    Trace(caller, "PAUSED in the middle of a call");
    while (now_ < until && result_.ok) {
      now_ += 50 + static_cast<Ms>(rng_() % 250);
      dirty_ = true;
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
    if (n->disk.state != DataDirState::kMember || n->disk.fenced != fence) return -1;
    return n->index;
  }
  return -1;
}

bool World::InQuorum(int n) {
  Cluster* c = ClusterOf(n);
  if (c == nullptr || c->leader == 0 || nodes_[n]->disk.state != DataDirState::kMember) return false;
  if (!nodes_[n]->etcd_up || Paused(n) || FindMember(*c, nodes_[n]->disk.member) == nullptr) return false;
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

peer::NodeState World::StateOf(int i) {
  Node& n = *nodes_[i];
  Refresh();
  peer::NodeState s;
  s.set_node_name(n.spec.name);
  s.set_etcd_running(n.etcd_up || n.want != Want::kNone);
  s.set_has_data(n.disk.state == DataDirState::kMember);
  if (s.has_data()) {
    s.set_member_id(n.disk.member);
    s.set_cluster_id(n.disk.cluster);
  }
  s.set_fenced(n.disk.fenced);
  s.set_can_bump_revision(true);
  s.set_restore_id(n.disk.restore_id);
  // The leader asks every pass: "joined" is marked as soon as a leader is seen.
  if (s.has_data() && !n.disk.joined && !n.disk.fenced && InQuorum(i)) n.disk.joined = true;
  if (n.disk.EverJoined()) n.disk.joined = true;  // EverJoined() writes the marker
  s.set_ever_joined(n.disk.EverJoined());
  s.set_bootstrapping(n.disk.bootstrapping && !n.disk.EverJoined());
  if (InQuorum(i)) s.set_raft_index(static_cast<uint64_t>(ClusterOf(i)->rev));
  s.set_highest_term(n.disk.newest_term);
  s.set_highest_term_leader(n.disk.newest_leader);
  return s;
}

absl::Status World::Admit(int i, const peer::OrderHeader& h, const char* what, bool promise) {
  Disk& d = nodes_[i]->disk;
  OrderView v;
  v.what = what;
  v.is_promise = promise;
  v.term = h.term();
  v.leader = h.leader();
  v.newest_term = d.newest_term;
  v.newest_leader = d.newest_leader;
  Admission a = AdmitOrder(v);
  if (!a.status.ok()) {
    Trace(i, absl::StrCat("refuses ", what, " from ", h.leader(), " term ", h.term(), " (", a.rule, ")"));
    return a.status;
  }
  if (h.term() > d.newest_term || (h.term() == d.newest_term && h.leader() != d.newest_leader)) {
    d.newest_term = h.term();
    d.newest_leader = h.leader();
  }
  return absl::OkStatus();
}

absl::Status World::OrderJoin(int i, const peer::StartRequest& req) {
  Node& n = *nodes_[i];
  if (n.disk.state == DataDirState::kPartial && n.want == Want::kNone) n.disk.state = DataDirState::kEmpty;
  if (n.disk.state == DataDirState::kMember) {
    return absl::AlreadyExistsError("the data dir already holds a member; wipe it first");
  }
  if (n.want != Want::kNone) return absl::OkStatus();
  Trace(i, absl::StrCat("join order from ", req.header().leader()));
  n.held = false;
  n.join = req;
  n.want = Want::kJoin;
  TryJoin(i);
  return absl::OkStatus();
}

absl::Status World::OrderStop(int i) {
  Node& n = *nodes_[i];
  n.held = true;
  n.want = Want::kNone;
  n.etcd_up = false;
  dirty_ = true;
  Trace(i, "stop order");
  return absl::OkStatus();
}

absl::Status World::OrderWipe(int i, const peer::OrderHeader& h) {
  Node& n = *nodes_[i];
  WipeView v;
  v.has_member_data = n.disk.state == DataDirState::kMember;
  if (v.has_member_data) v.member_id = n.disk.member;
  if (v.has_member_data) {
    auto members = n.peers_client->LinearizableMemberList(&v.list_cluster_id);
    v.list_ok = members.ok();
    if (members.ok()) {
      for (const auto& m : *members) v.member_ids.push_back(m.id);
    } else {
      v.list_error = std::string(members.status().message());
    }
  }
  v.leader_cluster_id = h.cluster_id();
  WipeDecision d = DecideWipe(v);
  if (d.action != WipeAction::kSetAside) {
    if (d.action == WipeAction::kRefuse) Trace(i, absl::StrCat("refuses wipe (", d.rule, ")"));
    return d.status;
  }
  // Ground truth: a member of a live cluster (one whose voters still hold a majority of their
  // data) is never wiped while it is in the member list. A minority survivor of a cluster that
  // a justified restore replaced is set aside like its restore order would have.
  auto able = ClustersAbleToReachQuorum();
  if (Cluster* c = ClusterOf(i); c != nullptr && FindMember(*c, n.disk.member) != nullptr &&
                                 std::count(able.begin(), able.end(), c->id) > 0) {
    Violation(absl::StrCat("node ", n.spec.name, " wiped member ", HexId(n.disk.member),
                           " while it is still in cluster ", HexId(c->id), "'s member list"));
  }
  Trace(i, absl::StrCat("wipes its data (member ", HexId(n.disk.member), ") on the order of ",
                        h.leader(), " (", d.rule, ")"));
  ++result_.wipes;
  n.etcd_up = false;
  n.want = Want::kNone;
  n.disk.state = DataDirState::kEmpty;
  n.disk.wal_commit = 0;
  n.disk.cluster = n.disk.member = 0;
  n.disk.rev = 0;
  n.disk.seen.clear();
  n.disk.fenced = false;
  dirty_ = true;
  return absl::OkStatus();
}

absl::Status World::OrderRestore(int i, const peer::RestoreRequest& req) {
  Node& n = *nodes_[i];
  if (n.disk.restore_id == req.restore_id() &&
      (!req.member() || n.disk.state == DataDirState::kMember)) {
    return absl::OkStatus();
  }
  // The node fetches and checks the backup before it touches its data.
  auto meta_text = store_.Get(MetaKey("sim", req.backup()));
  if (!meta_text.ok()) return meta_text.status();
  auto data = backups_.find(req.backup());
  if (data == backups_.end()) return absl::DataLossError("no such backup");
  // The restored cluster: the same on every node of the intent.
  uint64_t cid = 0x5eed;
  std::vector<Member> members;
  for (const auto& m : req.initial_cluster()) {
    Member mm;
    mm.id = InitialMemberId({m.peer_url()}, req.token());
    mm.name = m.name();
    mm.peer_url = m.peer_url();
    mm.started = true;
    members.push_back(mm);
    cid = Mix(cid, mm.id);
  }
  // Checked whenever the restored cluster comes into being: the first order, and any order
  // that would bring it back after it was lost.
  if (!restores_seen_.count(req.restore_id()) || !clusters_.count(cid)) {
    if (!restores_seen_.count(req.restore_id())) ++result_.restores;
    restores_seen_.insert(req.restore_id());
    // Ground truth: a restore is justified only when no cluster can reach quorum any more.
    for (uint64_t c : ClustersAbleToReachQuorum()) {
      Violation(absl::StrCat("restore ", req.restore_id(), " of ", req.backup(),
                             " started while cluster ", HexId(c),
                             " still holds a majority of its voters' data"));
    }
    std::set<int> in_backup;
    for (const auto& [rev, w] : data->second.writes) in_backup.insert(w);
    int lost = 0;
    for (int w = 1; w <= next_write_; ++w) {
      if (!in_backup.count(w) && !lost_.count(w)) {
        lost_.insert(w);
        ++lost;
      }
    }
    result_.writes_lost_to_restores += lost;
    // Ground truth: the newest backup is the one taken last (backups are taken only of the
    // live cluster), whatever the takers' clocks said.
    if (!last_backup_.empty() && req.backup() != last_backup_ &&
        data->second.revision < backups_[last_backup_].revision) {
      Violation(absl::StrCat("restore ", req.restore_id(), " chose backup ", req.backup(),
                             " (revision ", data->second.revision, ") over the newest, ",
                             last_backup_, " (revision ", backups_[last_backup_].revision, ")"));
    }
    Trace(i, absl::StrCat("first to restore ", req.backup(), " (restore ", req.restore_id(),
                          "): ", lost, " acknowledged writes newer than the backup are given up"));
  }
  if (!clusters_.count(cid)) {
    Cluster c;
    c.id = cid;
    c.members = members;
    c.writes = data->second.writes;
    c.kv = data->second.kv;
    c.rev = data->second.revision + static_cast<int64_t>(req.bump_revision());
    for (const auto& [lease, ttl] : data->second.lease_ttls) c.leases[lease] = {now_ + ttl, ttl};
    c.next_lease = 0x100000 + static_cast<int64_t>(rng_() % 1000);
    c.origin = "restore " + req.restore_id();
    for (const auto& [lease, ttl] : data->second.lease_ttls) restored_leases_[cid].insert(lease);
    clusters_[cid] = c;
    Trace(i, absl::StrCat("restored cluster ", HexId(cid), " at revision ", c.rev));
  }
  Trace(i, absl::StrCat("restores ", req.backup(), req.member() ? " as a member" : " (not a member)",
                        req.fenced() ? ", fenced" : ""));
  n.etcd_up = false;
  n.held = false;
  n.disk.state = DataDirState::kEmpty;
  n.disk.wal_commit = 0;
  n.disk.cluster = n.disk.member = 0;
  n.disk.rev = 0;
  n.disk.seen.clear();
  n.disk.fenced = false;
  n.want = Want::kNone;
  n.disk.restore_id = req.restore_id();
  if (req.member()) {
    n.disk.state = DataDirState::kMember;
    n.disk.cluster = cid;
    n.disk.member = InitialMemberId({n.config.PeerUrl(n.spec)}, req.token());
    n.disk.rev = clusters_[cid].rev;
    n.disk.seen = members;
    n.disk.fenced = req.fenced();
    n.want = Want::kOnData;
    n.etcd_up = true;
  }
  dirty_ = true;
  return absl::OkStatus();
}

absl::Status World::OrderUnfence(int i, const peer::UnfenceRequest& req) {
  Node& n = *nodes_[i];
  if (n.disk.restore_id != req.restore_id()) {
    return absl::FailedPreconditionError("not fenced for that restore");
  }
  if (n.disk.fenced) {
    Trace(i, "unfenced");
    CheckNoRestoredLease(i);
  }
  n.disk.fenced = false;
  dirty_ = true;
  return absl::OkStatus();
}

void World::Boot(int i) {
  Node& n = *nodes_[i];
  n.reconciler.reset();
  n.restorer.reset();
  n.leadership.reset();
  n.agent_up = true;
  n.restart_at = -1;
  n.held = false;
  // A restarted agent adopts an etcd that still runs; otherwise it decides afresh.
  n.want = n.etcd_up ? Want::kOnData : Want::kNone;
  std::vector<std::string> others;
  for (const auto& m : nodes_) {
    if (m->index != i) others.push_back(m->config.ClientUrl(m->spec));
  }
  n.peers_client = std::make_unique<SimEtcd>(this, i, others);
  n.cluster_client = std::make_unique<SimEtcd>(this, i, n.config.AllClientUrls());
  n.initial_agents.clear();
  for (int k = 0; k < n.config.cluster.size; ++k) {
    if (k != i) n.initial_agents[nodes_[k]->spec.name] = std::make_unique<SimPeer>(this, i, k);
  }
  ControlEnv env;
  env.clock = n.clock.get();
  env.parallel = false;
  env.dial_agent = [this, i](const NodeSpec& target) -> std::unique_ptr<PeerApi> {
    for (const auto& m : nodes_) {
      if (m->spec.name == target.name) return std::make_unique<SimPeer>(this, i, m->index);
    }
    return nullptr;
  };
  env.dial_etcd = [this, i](const std::vector<std::string>& urls,
                            milliseconds) -> std::unique_ptr<EtcdApi> {
    return std::make_unique<SimEtcd>(this, i, urls);
  };
  env.nonce = [this] { return static_cast<uint32_t>(rng_() & 0xffff); };
  n.leadership = std::make_unique<Leadership>(
      n.cluster_client.get(), LeaderKey(n.config), EpochKey(n.config), n.spec.name,
      std::chrono::duration_cast<std::chrono::seconds>(n.config.cluster.leader_lease_ttl));
  n.restorer = std::make_unique<RestoreCoordinator>(n.config, &store_, n.cluster_client.get(), env);
  Node* np = &n;
  n.reconciler = std::make_unique<Reconciler>(
      n.config, n.cluster_client.get(), &store_, nullptr,
      [np] { return np->restorer->RestorePending(); }, [np] { return np->leadership->Confirm(); },
      env, [np](uint64_t floor) { return np->leadership->Raise(floor); });
  n.next_restore_pass = now_;
  dirty_ = true;
}

void World::Kill(int i, bool etcd_too) {
  Node& n = *nodes_[i];
  n.agent_up = false;
  n.reconciler.reset();
  n.restorer.reset();
  n.leadership.reset();
  if (etcd_too) {
    n.etcd_up = false;
    n.want = Want::kNone;
  }
  n.restart_at = now_ + 1000 + static_cast<Ms>(rng_() % 20000);
  dirty_ = true;
}

void World::Bootstrap(int i) {
  Node& n = *nodes_[i];
  const std::string token = n.config.ClusterToken();
  uint64_t cid = 0x5eed;
  std::vector<Member> members;
  for (int k = 0; k < n.config.cluster.size; ++k) {
    const Node& m = *nodes_[k];
    Member mm;
    mm.id = InitialMemberId({m.config.PeerUrl(m.spec)}, token);
    mm.name = m.spec.name;  // initial members carry their names from the start
    mm.peer_url = m.config.PeerUrl(m.spec);
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
  n.disk.wal_commit = 3;  // the initial members' configuration entries
  n.disk.seen = it->second.members;
  n.etcd_up = true;
  dirty_ = true;
}

void World::TryJoin(int i) {
  Node& n = *nodes_[i];
  const std::string mine = n.config.PeerUrl(n.spec);
  for (const auto& m : n.join.initial_cluster()) {
    int k = NodeByPeerUrl(m.peer_url());
    if (k < 0 || k == i || Answering(i, nodes_[k]->config.ClientUrl(nodes_[k]->spec)) < 0) continue;
    if (!InQuorum(k)) continue;
    Cluster* c = ClusterOf(k);
    for (const auto& e : c->members) {
      if (e.peer_url == mine && !e.started) {
        n.disk.state = DataDirState::kMember;
        n.disk.cluster = c->id;
        n.disk.member = e.id;
        n.disk.rev = 0;
        n.disk.seen = c->members;
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

void World::StartEtcdAsWanted(int i) {
  Node& n = *nodes_[i];
  if (n.etcd_up || Paused(i)) return;
  switch (n.want) {
    case Want::kNone:
      return;
    case Want::kOnData:
      if (n.disk.state == DataDirState::kMember) {
        n.etcd_up = true;
        dirty_ = true;
      }
      return;
    case Want::kJoin:
      if (n.disk.state == DataDirState::kMember) {
        n.etcd_up = true;
        dirty_ = true;
      } else {
        TryJoin(i);
      }
      return;
    case Want::kBootstrap:
      if (n.disk.state == DataDirState::kMember) {
        n.etcd_up = true;
        dirty_ = true;
      }
      return;
  }
}

void World::Tick(int i) {
  Node& n = *nodes_[i];
  if (!n.agent_up || Paused(i)) return;
  const int outer = current_;
  current_ = i;
  try {
    TickBody(i);
    current_ = outer;
  } catch (const CrashPoint& c) {
    current_ = outer;
    Trace(c.node, "CRASH in the middle of a call (agent and etcd)");
    ++result_.faults["crash-mid-call"];
    Kill(c.node, true);
  }
}

void World::TickBody(int i) {
  Node& n = *nodes_[i];
  Refresh();
  if (n.want == Want::kNone) n.member_data_seen = false;
  if (n.want != Want::kNone && n.disk.state == DataDirState::kMember) n.member_data_seen = true;
  if (DataLostUnderEtcd(n.want != Want::kNone, n.want == Want::kOnData, n.member_data_seen,
                        n.disk.state)) {
    Trace(i, "its member's data dir is gone under etcd: stops etcd (D1)");
    n.want = Want::kNone;
    n.etcd_up = false;
    n.member_data_seen = false;
    dirty_ = true;
  }
  StartEtcdAsWanted(i);
  if (n.want == Want::kNone && !n.held) {
    std::map<std::string, PeerApi*> initial;
    for (auto& [name, p] : n.initial_agents) initial[name] = p.get();
    if (n.disk.EverJoined()) n.disk.joined = true;
    StartFacts facts{n.disk.state, n.disk.EverJoined()};
    StartView view = GatherStartView(n.config, facts, *n.peers_client, initial, &store_, false);
    StartDecision d = DecideStart(view);
    if (d.reason != n.last_start_reason) {
      Trace(i, absl::StrCat("start decision: ", StartActionName(d.action), ": ", d.reason));
      n.last_start_reason = d.reason;
    }
    switch (d.action) {
      case StartAction::kWait:
        break;
      case StartAction::kSetPartialAside:
        n.disk.state = DataDirState::kEmpty;
        break;
      case StartAction::kStartOnData:
        n.want = Want::kOnData;
        n.etcd_up = true;
        dirty_ = true;
        break;
      case StartAction::kBootstrap:
        n.disk.bootstrapping = true;
        n.want = Want::kBootstrap;
        Bootstrap(i);
        break;
    }
  }
  Refresh();
  if (n.etcd_up && !n.disk.joined && !n.disk.fenced && InQuorum(i)) {
    CallPoint(i);  // the agent asks its etcd for a leader before it writes the marker
    n.disk.joined = true;
  }
  if (n.disk.fenced) {
    // MaybeUnfenceSelf: the store says the restore is settled.
    auto intent = ReadRestoreIntent(store_, "sim");
    if (intent.ok() && intent->has_value() && (*intent)->id == n.disk.restore_id &&
        ((*intent)->settled || (*intent)->done)) {
      Trace(i, "unfences itself (the restore is settled)");
      CheckNoRestoredLease(i);
      n.disk.fenced = false;
      dirty_ = true;
    }
  }
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
    if (n->disk.fenced || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    ++c->rev;
    c->writes.emplace_back(c->rev, ++next_write_);
    ++result_.writes_acked;
    dirty_ = true;
    Refresh();
    return;
  }
}

void World::TakeBackup() {
  // The leader's scheduler, as a model: a snapshot of a member on the quorum side.
  Refresh();
  for (const auto& n : nodes_) {
    if (n->disk.fenced || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    BackupMeta m;
    m.cluster = "sim";
    m.cluster_id = c->id;
    m.revision = c->rev;
    m.etcd_version = "3.4.23";
    m.member = n->spec.name;
    m.node = n->spec.name;
    const Ms wall = Wall(n->index);
    m.unix_time = wall / 1000;
    m.name = BackupName(std::chrono::system_clock::time_point(milliseconds(wall)), c->rev);
    if (auto it = c->kv.find(EtcdGenerationKey("sim")); it != c->kv.end()) {
      (void)absl::SimpleAtoi(it->second.value, &m.generation);
    }
    const std::string bytes = "sim-snapshot " + m.name;
    m.db_size = m.compressed_size = bytes.size();
    m.sha256 = Sha256Hex(bytes);
    m.db_sha256 = m.sha256;
    if (!store_.Put(SnapshotKey("sim", m.name), bytes).ok()) return;
    BackupData data;
    data.revision = c->rev;
    data.writes = c->writes;
    data.kv = c->kv;
    for (const auto& [id, l] : c->leases) data.lease_ttls[id] = l.second;
    data.cluster = c->id;
    backups_[m.name] = data;
    if (!store_.Put(MetaKey("sim", m.name), MetaToJson(m).dump()).ok()) return;
    last_backup_ = m.name;
    // The created marker, as the leader writes it.
    if (!store_.objects.count(CreatedMarkerKey("sim"))) {
      (void)store_.Put(CreatedMarkerKey("sim"), "{\"cluster\":\"sim\"}");
    }
    Trace(n->index, absl::StrCat("backup ", m.name, " (generation ", m.generation, ", ",
                                 c->writes.size(), " writes)"));
    return;
  }
}

bool World::EvidenceOfExistence(int except) const {
  for (const auto& n : nodes_) {
    if (n->index == except) continue;
    if (n->disk.joined) return true;
    if (n->disk.state == DataDirState::kMember) {
      auto it = clusters_.find(n->disk.cluster);
      if (it != clusters_.end() && it->second.had_leader) return true;
    }
  }
  for (const auto& [key, v] : store_.objects) {
    if (key == CreatedMarkerKey("sim") || key.rfind(BackupsPrefix("sim"), 0) == 0) return true;
  }
  return false;
}

std::vector<uint64_t> World::ClustersAbleToReachQuorum() const {
  std::vector<uint64_t> out;
  for (const auto& [id, c] : clusters_) {
    int voters = 0, held = 0;
    for (const auto& m : c.members) {
      if (m.learner) continue;
      ++voters;
      if (NodeOfMember(c, m.id) >= 0) ++held;
    }
    if (voters > 0 && held * 2 > voters && c.had_leader) out.push_back(id);
  }
  return out;
}

void World::CheckWrites(bool after_fault) {
  std::vector<char> held(static_cast<size_t>(next_write_) + 1, 0);
  for (const auto& [id, c] : clusters_) {
    int64_t rev = -1;
    for (const auto& n : nodes_) {
      if (n->disk.state == DataDirState::kMember && n->disk.cluster == id) rev = std::max(rev, n->disk.rev);
    }
    for (const auto& [r, w] : c.writes) {
      if (r <= rev) held[static_cast<size_t>(w)] = 1;
    }
  }
  for (int w = 1; w <= next_write_; ++w) {
    if (held[static_cast<size_t>(w)] || lost_.count(w)) continue;
    lost_.insert(w);
    if (after_fault) {
      ++result_.writes_lost_to_faults;
    } else {
      Violation(absl::StrCat("acknowledged write ", w, " is lost (no disk holds it) and no "
                             "justified restore gave it up"));
      return;
    }
  }
}

void World::CheckNoRestoredLease(int i) {
  Cluster* c = ClusterOf(i);
  if (c == nullptr) return;
  for (int64_t lease : restored_leases_[c->id]) {
    if (c->leases.count(lease)) {
      Violation(absl::StrCat("node ", nodes_[i]->spec.name, " serves clients while lease ",
                             absl::StrFormat("%x", lease),
                             " from the backup is still alive (a lost lock would live on)"));
      return;
    }
  }
}

void World::Prune() {
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    bool held = false;
    for (const auto& n : nodes_) {
      if (n->disk.state == DataDirState::kMember && n->disk.cluster == it->first) held = true;
    }
    // Keep an initial cluster that is still being bootstrapped.
    it = !held && it->second.had_leader ? clusters_.erase(it) : std::next(it);
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
      node.disk.wal_commit = 0;
      node.disk.cluster = node.disk.member = 0;
      node.disk.rev = 0;
      node.disk.seen.clear();
      node.disk.fenced = false;
      break;
    case 8:
      kind = "partial-data";
      if (!node.etcd_up && node.disk.state == DataDirState::kEmpty) node.disk.state = DataDirState::kPartial;
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

bool World::Healthy(std::string* why) {
  Refresh();
  for (const auto& [id, c] : clusters_) {
    if (c.leader == 0) continue;
    int voters = 0, up = 0, learners = 0;
    for (const auto& m : c.members) {
      if (m.learner) {
        ++learners;
        continue;
      }
      ++voters;
      int n = NodeOfMember(c, m.id);
      if (n >= 0 && InQuorum(n) && !nodes_[n]->disk.fenced) ++up;
    }
    if (voters == 3 && up == 3 && learners == 0) {
      *why = absl::StrCat("cluster ", HexId(id), " healthy with 3 voters");
      return true;
    }
    *why = absl::StrCat("cluster ", HexId(id), ": ", up, "/", voters, " voters up, ", learners,
                        " learners");
  }
  if (why->empty()) *why = "no cluster has a leader";
  return false;
}

Result World::Run() {
  std::uniform_int_distribution<int> dt(20, 300);
  for (int step = 0; step < o_.steps && result_.ok; ++step) {
    now_ += dt(rng_);
    dirty_ = true;
    Scheduled();
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
    if (trap_sprung_ && !trap_done_) {
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
      fault = true;
    }
    Refresh();
    CheckWrites(fault);
    if (clusters_.size() > 1) {
      auto able = ClustersAbleToReachQuorum();
      if (able.size() > 1) {
        Violation(absl::StrCat("two clusters can reach quorum: ", HexId(able[0]), " and ",
                               HexId(able[1])));
      }
    }
    Prune();
    result_.steps = step + 1;
  }
  // Liveness: lift every fault; the cluster must be healthy at its size within the bound.
  if (result_.ok) {
    HealAll();
    healing_ = true;  // no more crash points
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
      CheckWrites(false);
      Prune();
      why.clear();
      if (Healthy(&why)) break;
    }
    result_.live_at_end = Healthy(&why);
    result_.end_state = why;
    if (result_.ok && !result_.live_at_end) {
      // The agents must heal by themselves when a cluster still holds a majority of its
      // voters' data, or when nothing survives and a backup does (restore). Otherwise waiting
      // for an operator is right: a minority that survives with data is never overwritten.
      bool survivors = false;
      for (const auto& n : nodes_) survivors |= n->disk.state == DataDirState::kMember;
      if (!ClustersAbleToReachQuorum().empty() || (!survivors && !backups_.empty())) {
        Violation(absl::StrCat("not healthy ", o_.liveness_bound / 1000,
                               "s after the faults stopped: ", why));
      } else {
        result_.end_state += survivors ? " (a minority survives with data: waiting for an operator is right)"
                                       : " (total loss without a backup: waiting for an operator is right)";
      }
    }
  }
  result_.virtual_ms = now_;
  result_.trace.assign(trace_.begin(), trace_.end());
  return result_;
}

// The agents' own log lines go into the trace, under the node whose code wrote them.
class TraceSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit TraceSink(World* w) : w_(w) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text(msg.payload.data(), msg.payload.size());
    if (w_->current_ >= 0) {
      w_->Trace(w_->current_, "log: " + text);
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
