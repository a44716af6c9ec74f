#include "sim/world.h"

#include <algorithm>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "node/local_node.h"
#include "node/node_disk.h"
#include "node/start_view.h"
#include "peer/server.h"
#include "backup/delta.h"
#include "backup/layout.h"
#include "etcd/keys.h"
#include "backup/pipeline.h"
#include "common/rules.h"
#include "etcd/member_id.h"
#include "etcd/version.h"
#include "openssl/sha.h"
#include "peer/admission.h"
#include "reconcile/destroy.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace steward::sim {
namespace {

// Options::upgraded: the two binaries, and what each says to --version.
constexpr char kEtcd34[] = "/usr/bin/etcd";
constexpr char kEtcd35[] = "/opt/etcd-3.5.16/etcd";
std::string VersionOfBinary(const std::string& path) {
  return path == kEtcd35 ? "3.5.16" : "3.4.23";
}

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
  // Whether any member has served clients. A restored cluster does only once a member drops its
  // fence: before that it holds nothing but the backup and the deltas replayed (all in the
  // store), and replacing it loses nothing (RestoreCoordinator::Supersede).
  bool served = true;
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
  std::string fenced;  // the "fenced" marker: the restore whose fenced start etcd is in
  std::string leader_term;  // the "leader-term" marker (TermGuard's "<term> <leader>")
  std::string destroyed;    // the "destroyed" marker: the destroy this node stopped etcd for
  std::string etcd_version;  // the "etcd-version" marker (Options::upgraded)
  // The data set aside last (removed/<label>; one copy, as FsNodeDisk keeps), and a restore's
  // staged data dir.
  std::shared_ptr<Disk> removed;
  std::string removed_label;
  std::shared_ptr<Disk> staged;
};

// etcd's data dir only (the markers beside it stay).
void ClearData(Disk& d) {
  d.state = DataDirState::kEmpty;
  d.cluster = d.member = 0;
  d.rev = 0;
  d.seen.clear();
  d.wal_commit = 0;
}
void CopyData(const Disk& from, Disk& to) {
  to.state = from.state;
  to.cluster = from.cluster;
  to.member = from.member;
  to.rev = from.rev;
  to.seen = from.seen;
  to.wal_commit = from.wal_commit;
}

// "--name=value" flags as the runner gets them (RenderEtcdFlags).
std::string Flag(const std::vector<std::string>& flags, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (const auto& f : flags) {
    if (f.rfind(prefix, 0) == 0) return f.substr(prefix.size());
  }
  return "";
}

struct BackupData {
  int64_t revision = 0;
  Writes writes;
  int64_t generation = 0;
  std::map<std::string, Kv> kv;
  std::map<int64_t, Ms> lease_ttls;
  uint64_t cluster = 0;
};

// A stored delta backup, as the world wrote it: the acknowledged writes of (from, to].
struct DeltaRecord {
  int64_t from = 0, to = 0;
  Writes writes;
  std::string object_key, meta_key;
};

// The key an acknowledged write is stored under in a delta (the model's etcd keeps writes as a
// ledger, not as keys): a replay putting it back brings the write back.
constexpr absl::string_view kWriteKeyPrefix = "sim-w/";

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
  // The object appears whole at Commit (as a file renamed into place, or an S3 upload).
  class Writer : public ObjectWriter {
   public:
    Writer(SimStore* store, std::string key) : store_(store), key_(std::move(key)) {}
    absl::Status Write(std::string_view chunk) override {
      if (auto s = store_->Check(); !s.ok()) return s;
      bytes_.append(chunk);
      return absl::OkStatus();
    }
    absl::Status Commit() override { return store_->Put(key_, bytes_); }

   private:
    SimStore* store_;
    std::string key_, bytes_;
  };
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    if (auto s = Check(); !s.ok()) return s;
    return std::unique_ptr<ObjectWriter>(new Writer(this, key));
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
class SimDisk;
class SimRunner;

struct Node {
  int index = 0;
  NodeSpec spec;
  Config config;
  bool initial = false;
  bool agent_up = true;
  Ms restart_at = -1;  // a crashed node comes back then
  Ms paused_until = 0;
  bool etcd_up = false;
  bool in_code = false;  // its Tick is on the stack
  bool serving_fence = false;  // etcd listens on the fence URL, not the client URL
  // The runner: what the agent asked for (ProcessRunner's state, which dies with the agent).
  bool runner_wanted = false;
  std::vector<std::string> etcd_flags;
  int restarts = 0;
  std::string binary;  // the etcd binary the runner starts (Options::upgraded)
  Disk disk;
  Ms skew = 0;
  std::unique_ptr<SimClock> clock;
  std::unique_ptr<SimDisk> disk_seam;
  std::unique_ptr<SimRunner> runner;
  std::unique_ptr<SimEtcd> cluster_client, peers_client, local_client;
  std::map<std::string, std::unique_ptr<SimPeer>> initial_agents;
  // The agent's node side, the very code the agent runs (node/local_node.h).
  std::unique_ptr<TermGuard> terms;
  std::unique_ptr<LocalNode> local;
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
    // A node whose code is on the stack (stopped inside a call) holds its locks: an order to
    // it would wait, and here times out.
    return nodes_[n]->agent_up && !Paused(n) && Reach(caller, n) &&
           (n == caller || !nodes_[n]->in_code);
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
  absl::Status Admit(int n, const peer::OrderHeader& h, const char* what, bool promise);
  // What etcd does when the runner starts it with `flags` (on member data: start on it; on an
  // empty dir: bootstrap or join as the flags say).
  void StartEtcd(int n);
  // Ground truth for the disk seam: etcd's data of node `n` is about to be set aside or
  // deleted; a restore's snapshot restore is about to build cluster data; a fence is dropped.
  void BeforeDataGoes(int n, const std::string& why);
  absl::Status RestoreCluster(int n, const std::string& backup, const SnapshotRestore& r,
                              Disk* staged);
  void CheckNoRestoredLease(int n);
  // A replay put write `w` back into cluster `cluster`.
  void Replayed(uint64_t cluster, int w);
  // Node `n` is about to serve clients: its restore's replay must have brought every write
  // the restore counted on.
  void CheckReplayed(int n);
  // Whether the in-place edit refuses `backup` (Options::in_place_refusals): the same answer on
  // every node, as for one backup's bytes.
  bool InPlaceRefuses(const std::string& backup) const {
    uint64_t h = 1469598103934665603ull;
    for (char ch : backup) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    return static_cast<double>(h % 1000) < o_.in_place_refusals * 1000;
  }
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
  void Bootstrap(int n, const std::vector<std::string>& flags);
  void TryJoin(int n, const std::vector<std::string>& flags);
  // The highest version a running member of `c` runs (Options::upgraded).
  std::string RunningVersion(const Cluster& c) const;
  void Write();
  void TakeBackup();
  // The leader's DeltaWriter, as a model: stores the acknowledged writes since the end of the
  // chain it follows (Options::delta_every).
  void TakeDelta();
  // The writes the intact part of `backup`'s chain holds, its snapshot's included, up to
  // `to` (0: the whole intact chain). An object or meta gone from the store ends it.
  // `reached` (optional): the revision the intact part reaches.
  std::set<int> HeldByChain(const std::string& backup, int64_t to, int64_t* reached = nullptr) const;
  void Fault();
  void Scheduled();
  void HealAll();
  bool Healthy(std::string* why);
  bool EvidenceOfExistence(int except) const;
  // Clusters whose voters' disks still hold a majority of them; only those that have served
  // clients unless `unserved_too` (Cluster::served).
  std::vector<uint64_t> ClustersAbleToReachQuorum(bool unserved_too = false) const;
  void CheckWrites(bool after_fault);
  void Prune();

  Options o_;
  std::mt19937_64 rng_;
  Ms now_ = 0;
  bool dirty_ = true;
  Ms refreshed_at_ = -1;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<uint64_t, Cluster> clusters_;
  // The highest revision a cluster that served clients reached before it was lost (pruned).
  int64_t lost_rev_ = 0;
  SimStore store_;
  std::set<std::pair<int, int>> cuts_;
  Ms heal_cuts_at_ = -1, heal_store_at_ = -1;
  std::map<std::string, BackupData> backups_;
  std::string last_backup_;  // the newest backup by history: the one taken last
  std::string prev_backup_;  // the one taken before it
  // Delta backups (Options::delta_every): each base's chain as stored, the base the writer
  // follows and where its chain ends, when it notices a newer backup; its own random stream,
  // so that runs without deltas stay as they were.
  std::map<std::string, std::vector<DeltaRecord>> deltas_;
  std::string delta_base_;
  Ms delta_switch_at_ = -1;
  Ms next_delta_ = 0;
  std::mt19937_64 delta_rng_;
  // Writes a restore's replay owes the cluster it restored (held in the store until then).
  std::map<uint64_t, std::set<int>> pending_replay_;
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
  bool destroyed_ = false;  // the store holds the operator's destroy mark
  bool undestroy_pending_ = false;
 public:
  bool destroyed() const { return destroyed_; }
  bool StoreUp() const { return store_.mode == SimStore::Mode::kUp; }
  // The operator: stewardctl destroy --force / undestroy (Options::destroy_at).
  void OperatorDestroy();
  void OperatorUndestroy();
  int current_ = -1;  // the node whose code runs (only it can crash or pause mid-call)
  int speaker_ = -1;  // the node whose log lines these are (an order's handler: the target)
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
    bool wrote = false, replayed = false;
    for (const auto& op : ok ? req.success() : req.failure()) {
      auto* r = resp.add_responses();
      if (op.has_request_put()) {
        const auto& p = op.request_put();
        if (p.lease() != 0 && !cl.leases.count(p.lease())) return absl::NotFoundError("etcdserver: requested lease not found");
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
    st.version = VersionOfBinary(w_->nodes()[n]->binary);
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

// The peers' API: a call reaches a node's agent only if it runs, is not paused and the link
// works; the order then goes through the node's real TermGuard and LocalNode.
class SimPeer : public PeerApi {
 public:
  SimPeer(World* w, int caller, int target) : w_(w), caller_(caller), target_(target) {}
  absl::StatusOr<peer::NodeState> GetState(milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    Speaker speaker(w_, target_);
    Node& n = *w_->nodes()[target_];
    w_->Refresh();
    peer::NodeState st = n.local->State();
    st.set_highest_term(n.terms->newest());
    st.set_highest_term_leader(n.terms->newest_leader());
    return st;
  }
  absl::Status Join(const peer::StartRequest& req, milliseconds) override {
    return Order(req.header(), "join", [&](LocalNode& l) { return l.Join(req); });
  }
  absl::Status StopEtcd(const peer::OrderHeader& h, milliseconds) override {
    return Order(h, "stop", [&](LocalNode& l) { return l.StopEtcd(); });
  }
  absl::Status Wipe(const peer::OrderHeader& h, milliseconds) override {
    return Order(h, "wipe", [&](LocalNode& l) { return l.Wipe(h); });
  }
  absl::Status Promise(const peer::OrderHeader& h, milliseconds) override {
    if (auto s = Reach(); !s.ok()) return s;
    return Done(w_->Admit(target_, h, "promise", true));
  }
  absl::Status Restore(const peer::RestoreRequest& req, milliseconds) override {
    return Order(req.header(), "restore", [&](LocalNode& l) { return l.Restore(req); });
  }
  absl::Status Unfence(const peer::UnfenceRequest& req, milliseconds) override {
    return Order(req.header(), "unfence", [&](LocalNode& l) { return l.Unfence(req); });
  }
  absl::Status SwitchVersion(const peer::SwitchVersionRequest& req, milliseconds) override {
    // (The simulation has no etcd versions: etcd.versions is empty, so no upgrade is planned.)
    return Order(req.header(), "switch-version", [&](LocalNode& l) { return l.SwitchVersion(req); });
  }

 private:
  // The target's log lines while its handler runs.
  struct Speaker {
    Speaker(World* w, int n) : w(w), before(w->speaker_) { w->speaker_ = n; }
    ~Speaker() { w->speaker_ = before; }
    World* w;
    int before;
  };
  template <typename Fn>
  absl::Status Order(const peer::OrderHeader& h, const char* what, Fn fn) {
    if (auto s = Reach(); !s.ok()) return s;
    if (auto s = w_->Admit(target_, h, what, false); !s.ok()) return s;
    absl::Status result;
    {
      Speaker speaker(w_, target_);
      result = fn(*w_->nodes()[target_]->local);
    }
    return Done(result);
  }
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

// The node's disk over the world's model of it; the world checks its ground truth as data
// goes (BeforeDataGoes) and as a restore builds a cluster (RestoreCluster).
class SimDisk : public NodeDisk {
 public:
  SimDisk(World* w, int node) : w_(w), node_(node) {}
  Disk& d() { return w_->nodes()[node_]->disk; }
  std::string DataDir() const override {
    return w_->nodes()[node_]->config.EtcdDataDir();
  }
  DataDirState State() override { return d().state; }
  absl::StatusOr<WalIdentity> Identity() override {
    if (d().state != DataDirState::kMember) return absl::NotFoundError("no WAL");
    return WalIdentity{d().member, d().cluster};
  }
  absl::StatusOr<uint64_t> WalCommit() override {
    if (d().state != DataDirState::kMember) return absl::NotFoundError("no WAL");
    return d().wal_commit;
  }
  absl::Status SetAside(const std::string& label, std::string* moved_to) override {
    moved_to->clear();
    if (d().state == DataDirState::kEmpty) return absl::OkStatus();
    const std::string dest = "/sim/removed/" + label;
    if (d().removed && d().removed_label == label) {
      // A retried order: the first attempt's copy stays.
      w_->BeforeDataGoes(node_, "deletes what is left of its data dir");
      ClearData(d());
      *moved_to = dest;
      return absl::OkStatus();
    }
    w_->BeforeDataGoes(node_, "sets its data aside to " + label);
    d().removed = std::make_shared<Disk>();
    CopyData(d(), *d().removed);
    d().removed_label = label;
    ClearData(d());
    *moved_to = dest;
    return absl::OkStatus();
  }
  absl::Status SetPartialAside(std::string* moved_to) override {
    if (d().state == DataDirState::kPartial) ClearData(d());
    *moved_to = "/sim/partial-aside";
    return absl::OkStatus();
  }
  absl::Status PutBack(const std::string&) override {
    if (!d().removed) return absl::NotFoundError("nothing set aside");
    CopyData(*d().removed, d());
    w_->Refresh();
    return absl::OkStatus();
  }
  absl::Status RemoveData() override {
    if (d().state != DataDirState::kEmpty) w_->BeforeDataGoes(node_, "deletes its data dir");
    ClearData(d());
    return absl::OkStatus();
  }
  bool Has(Marker m) override { return !Read(m).empty(); }
  std::string Read(Marker m) override {
    switch (m) {
      case Marker::kJoined: return d().joined ? "1" : "";
      case Marker::kInitialBootstrap: return d().bootstrapping ? "1" : "";
      case Marker::kFenced: return d().fenced;
      case Marker::kRestoreId: return d().restore_id;
      case Marker::kLeaderTerm: return d().leader_term;
      case Marker::kDestroyed: return d().destroyed;
      case Marker::kEtcdVersion: return d().etcd_version;
    }
    return "";
  }
  absl::Status Write(Marker m, const std::string& content) override {
    switch (m) {
      case Marker::kJoined: d().joined = true; break;
      case Marker::kInitialBootstrap: d().bootstrapping = true; break;
      case Marker::kFenced: d().fenced = content; break;
      case Marker::kRestoreId: d().restore_id = content; break;
      case Marker::kLeaderTerm: d().leader_term = content; break;
      case Marker::kDestroyed: d().destroyed = content; break;
      case Marker::kEtcdVersion: d().etcd_version = content; break;
    }
    return absl::OkStatus();
  }
  absl::Status Remove(Marker m) override {
    switch (m) {
      case Marker::kJoined: d().joined = false; break;
      case Marker::kInitialBootstrap: d().bootstrapping = false; break;
      case Marker::kFenced:
        // The node's etcd will serve clients: no lease of the lost cluster may live on.
        if (!d().fenced.empty()) w_->CheckNoRestoredLease(node_);
        if (!d().fenced.empty()) w_->CheckReplayed(node_);
        d().fenced.clear();
        break;
      case Marker::kRestoreId: d().restore_id.clear(); break;
      case Marker::kLeaderTerm: d().leader_term.clear(); break;
      case Marker::kDestroyed: d().destroyed.clear(); break;
      case Marker::kEtcdVersion: d().etcd_version.clear(); break;
    }
    return absl::OkStatus();
  }
  absl::Status StageBackup(BackupStore& store, const std::string& cluster,
                           const BackupMeta& meta) override {
    d().staged.reset();
    auto bytes = store.Get(SnapshotKey(cluster, meta.name));
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() != meta.compressed_size) return absl::DataLossError("size mismatch");
    staged_backup_ = meta.name;
    return absl::OkStatus();
  }
  absl::Status RestoreStaged(const SnapshotRestore& r) override {
    if (staged_backup_.empty()) return absl::FailedPreconditionError("nothing staged");
    if (r.bump_revision > 0) {
      // The bump is made in place (unless the edit refuses the backup) or by etcdutl; etcd
      // 3.4's etcdctl cannot make it, and no tool at all is named when only the edit can.
      const bool in_place = (r.in_place || r.tool.empty()) && !w_->InPlaceRefuses(staged_backup_);
      if (!in_place && !absl::EndsWith(r.tool, "etcdutl")) {
        w_->Violation(absl::StrCat("node ", w_->nodes()[node_]->spec.name, " restores ",
                                   staged_backup_, " with a revision bump that ",
                                   r.tool.empty() ? "the refused in-place edit" : r.tool,
                                   " cannot make"));
        return absl::InternalError("cannot bump");
      }
    }
    auto staged = std::make_shared<Disk>();
    if (auto s = w_->RestoreCluster(node_, staged_backup_, r, staged.get()); !s.ok()) return s;
    d().staged = staged;
    return absl::OkStatus();
  }
  absl::Status CheckStagedInPlace(const SnapshotRestore&) override {
    if (staged_backup_.empty()) return absl::FailedPreconditionError("nothing staged");
    if (w_->InPlaceRefuses(staged_backup_)) {
      // The edit refuses with more than one code (bolt.cc).
      return staged_backup_.size() % 2 == 0
                 ? absl::DataLossError("corrupt: (modelled) a DB the in-place edit does not know")
                 : absl::FailedPreconditionError("(modelled) a nested bucket where none is kept");
    }
    return absl::OkStatus();
  }
  absl::Status InstallStaged() override {
    if (d().state != DataDirState::kEmpty) return absl::FailedPreconditionError("data dir exists");
    if (!d().staged) return absl::FailedPreconditionError("nothing restored");
    CopyData(*d().staged, d());
    d().staged.reset();
    return absl::OkStatus();
  }
  void ClearStaging() override { staged_backup_.clear(); }

 private:
  World* w_;
  int node_;
  std::string staged_backup_;
};

// The runner: etcd as the agent asked for it. Its supervision (restarting an etcd that exited,
// after asking LocalNode::MayRestart) runs when the world ticks the node.
class SimRunner : public Runner {
 public:
  SimRunner(World* w, int node) : w_(w), node_(node) {}
  Node& n() { return *w_->nodes()[node_]; }
  std::optional<pid_t> Adopt() override {
    return n().etcd_up ? std::optional<pid_t>(1000 + node_) : std::nullopt;
  }
  void Run(std::vector<std::string> flags) override {
    // While destroyed, the only start allowed is the documented gap: a node that never learned
    // of the destroy (no marker) restarting its member's own data while the store cannot be
    // read (a store outage must not keep a member down). Everything else breaks SD1 (it
    // recorded the destroy), SD2 (it could read the mark) or creates something (a bootstrap,
    // a join, a restore on an empty dir).
    if (w_->destroyed() && !n().etcd_up) {
      const bool gap = n().disk.destroyed.empty() && !w_->StoreUp() &&
                       n().disk.state == DataDirState::kMember;
      if (!gap) {
        w_->Violation(absl::StrCat("node ", n().spec.name,
                                   " is asked to run etcd while the cluster is destroyed"));
      }
    }
    n().runner_wanted = true;
    n().etcd_flags = std::move(flags);
    n().restarts = 0;
    if (!n().etcd_up) w_->StartEtcd(node_);
  }
  absl::Status Stop() override {
    n().runner_wanted = false;
    if (n().etcd_up) {
      n().etcd_up = false;
      w_->Refresh();
    }
    return absl::OkStatus();
  }
  absl::Status Stop(milliseconds) override { return Stop(); }
  bool wanted() const override { return w_->nodes()[node_]->runner_wanted; }
  std::optional<pid_t> pid() const override {
    return w_->nodes()[node_]->etcd_up ? std::optional<pid_t>(1000 + node_) : std::nullopt;
  }
  int restarts() const override { return w_->nodes()[node_]->restarts; }
  void SetBinary(const std::string& binary) override { n().binary = binary; }
  // ProcessRunner's supervisor: an etcd that exited is started again, unless D1 says no.
  void Supervise() {
    if (!n().runner_wanted || n().etcd_up || w_->Paused(node_)) return;
    std::string why;
    if (!n().local->MayRestart(&why)) {
      n().runner_wanted = false;
      spdlog::error("not restarting etcd: {}", why);
      return;
    }
    ++n().restarts;
    w_->StartEtcd(node_);
  }

 private:
  World* w_;
  int node_;
};

// ---- the world ----

World::World(const Options& o)
    : o_(o), rng_(o.seed), next_delta_(o.delta_every), delta_rng_(o.seed ^ 0xde17a5) {
  Config base;
  base.cluster.name = "sim";
  base.cluster.size = 3;
  base.cluster.replace_after = milliseconds(10000);
  base.cluster.learner_timeout = milliseconds(20000);
  base.cluster.leader_lease_ttl = milliseconds(5000);
  base.tls.mode = "off";
  base.backup.store = "sim://store";
  base.backup.auto_restore = true;
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
    Trace(n->index, absl::StrCat("state: agent ", n->agent_up ? "up" : "down", ", etcd ",
                                 n->etcd_up ? (n->serving_fence ? "up (fenced port)" : "up") : "down",
                                 n->runner_wanted ? ", runner: wanted " : ", runner: not wanted ",
                                 Flag(n->etcd_flags, "initial-cluster-state"),
                                 ", data ", kData[static_cast<int>(d.state)], " cluster ",
                                 HexId(d.cluster), " member ", HexId(d.member),
                                 d.fenced.empty() ? "" : " fenced " + d.fenced, " restore ", d.restore_id,
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

absl::Status World::Admit(int i, const peer::OrderHeader& h, const char* what, bool promise) {
  Node& n = *nodes_[i];
  absl::Status s = promise ? n.terms->Promise(h.term(), h.leader()) : [&] {
    OrderView v;
    v.what = what;
    v.term = h.term();
    v.leader = h.leader();
    return n.terms->Admit(v);
  }();
  if (!s.ok()) Trace(i, absl::StrCat("refuses ", what, " from ", h.leader(), " term ", h.term(), ": ", s.message()));
  return s;
}

void World::BeforeDataGoes(int i, const std::string& why) {
  Node& n = *nodes_[i];
  Trace(i, absl::StrCat(why, " (member ", HexId(n.disk.member), " of cluster ", HexId(n.disk.cluster), ")"));
  if (n.disk.state != DataDirState::kMember) return;
  ++result_.wipes;
  // Ground truth: a member of a live cluster (one whose voters still hold a majority of their
  // data) is never wiped while it is in the member list. A minority survivor of a cluster that
  // a justified restore replaced is set aside like its restore order would have.
  auto able = ClustersAbleToReachQuorum();
  if (Cluster* c = ClusterOf(i); c != nullptr && FindMember(*c, n.disk.member) != nullptr &&
                                 std::count(able.begin(), able.end(), c->id) > 0) {
    Violation(absl::StrCat("node ", n.spec.name, " wiped member ", HexId(n.disk.member),
                           " while it is still in cluster ", HexId(c->id), "'s member list"));
  }
  dirty_ = true;
}

absl::Status World::RestoreCluster(int i, const std::string& backup, const SnapshotRestore& r,
                                   Disk* staged) {
  Node& n = *nodes_[i];
  auto data = backups_.find(backup);
  if (data == backups_.end()) return absl::DataLossError("no such backup");
  // The restored cluster: the same on every node of the intent.
  uint64_t cid = 0x5eed;
  std::vector<Member> members;
  for (const auto& [name, url] : r.initial_cluster) {
    Member mm;
    mm.id = InitialMemberId({url}, r.token);
    mm.name = name;
    mm.peer_url = url;
    mm.started = true;
    members.push_back(mm);
    cid = Mix(cid, mm.id);
  }
  const std::string restore_id = r.token;  // the restore's token names it
  // Checked whenever the restored cluster comes into being: the first order, and any order
  // that would bring it back after it was lost.
  if (!restores_seen_.count(restore_id) || !clusters_.count(cid)) {
    if (!restores_seen_.count(restore_id)) ++result_.restores;
    restores_seen_.insert(restore_id);
    if (destroyed_) {
      Violation(absl::StrCat("restore ", restore_id, " applied while the cluster is destroyed"));
    }
    // Ground truth: a restore is justified only when no cluster can reach quorum any more.
    for (uint64_t c : ClustersAbleToReachQuorum()) {
      Violation(absl::StrCat("restore ", restore_id, " of ", backup,
                             " started while cluster ", HexId(c),
                             " still holds a majority of its voters' data"));
    }
    // What the restore brings back: the backup, and the deltas its intent replays.
    int64_t delta_to = 0;
    {
      const auto mode = store_.mode;  // the world reads the store, whatever the agents see
      store_.mode = SimStore::Mode::kUp;
      auto intent = ReadRestoreIntent(store_, "sim");
      store_.mode = mode;
      if (intent.ok() && intent->has_value() && (*intent)->token == r.token) {
        delta_to = (*intent)->delta_to;
      }
    }
    int64_t reached = 0;
    std::set<int> in_backup =
        HeldByChain(backup, delta_to > data->second.revision ? delta_to : -1, &reached);
    // A delta the intent counted on was lost since it was chosen: this restore cannot settle,
    // and the one that replaces it (RestoreCoordinator::Supersede) is checked instead.
    const bool damaged = delta_to > data->second.revision && reached < delta_to;
    pending_replay_.clear();  // this restore decides what is owed now
    std::set<int>& owed = pending_replay_[cid];
    for (int w : in_backup) owed.insert(w);
    for (const auto& [rev, w] : data->second.writes) owed.erase(w);
    // Ground truth (deltas): the intact chain of the newest backup, and of the one before it
    // (the writer may still follow it right after a full backup), holds these writes; a restore
    // must give none of them up. (Older chains end before the newest backup's revision.)
    if (o_.delta_every > 0 && !last_backup_.empty() && !damaged) {
      const BackupData& newest = backups_[last_backup_];
      for (const std::string& b : {last_backup_, prev_backup_}) {
        if (b.empty() || backups_[b].cluster != newest.cluster ||
            backups_[b].generation != newest.generation) {
          continue;
        }
        for (int w : HeldByChain(b, 0)) {
          if (in_backup.count(w)) continue;
          Violation(absl::StrCat("restore ", restore_id, " of ", backup, " (deltas to revision ",
                                 delta_to, ") gives up acknowledged write ", w,
                                 ", which the intact chain of backup ", b, " holds"));
          break;
        }
      }
    }
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
    // (Its deltas may take an older backup past the newest's revision: then it is the better.)
    if (!last_backup_.empty() && backup != last_backup_ &&
        std::max(data->second.revision, delta_to) < backups_[last_backup_].revision) {
      Violation(absl::StrCat("restore ", restore_id, " chose backup ", backup,
                             " (revision ", data->second.revision, ") over the newest, ",
                             last_backup_, " (revision ", backups_[last_backup_].revision, ")"));
    }
    Trace(i, absl::StrCat("first to restore ", backup, " (", restore_id, "): ", lost,
                          " acknowledged writes newer than the backup",
                          delta_to > 0 ? absl::StrCat(" and its deltas to revision ", delta_to) : "",
                          " are given up; ", owed.size(), " to be replayed"));
  }
  if (!clusters_.count(cid)) {
    Cluster c;
    c.id = cid;
    c.members = members;
    c.writes = data->second.writes;
    c.kv = data->second.kv;
    c.rev = data->second.revision + static_cast<int64_t>(r.bump_revision);
    // No revision served twice: a client's watch or cache that knows revision N must never be
    // served another N (etcdutl's bump, or the in-place edit's). Revisions of a restored
    // cluster that never served clients (still fenced) were seen by the agents alone.
    int64_t served = lost_rev_;
    for (const auto& [id, other] : clusters_) {
      if (other.served) served = std::max(served, other.rev);
    }
    bool all_can_bump = true, all_config_can_bump = true;
    for (const auto& node : nodes_) {
      all_config_can_bump = all_config_can_bump && (!node->config.etcd.etcdutl.empty() ||
                                                     node->config.etcd.restore_in_place);
      all_can_bump = all_can_bump && (!node->config.etcd.etcdutl.empty() ||
                                       (node->config.etcd.restore_in_place &&
                                        !InPlaceRefuses(backup)));
    }
    ++(r.bump_revision == 0 ? result_.unbumped_restores : result_.bumped_restores);
    // Not raised although a majority of its members could raise it (the others are healed by
    // a join): only a node that cannot at all (config) is a reason to restore without it.
    if (r.bump_revision == 0 && all_config_can_bump) {
      size_t capable = 0;
      for (const auto& m : members) {
        const int k = NodeByPeerUrl(m.peer_url);
        if (k < 0) continue;
        const Config& mc = nodes_[static_cast<size_t>(k)]->config;
        if (!mc.etcd.etcdutl.empty() || (mc.etcd.restore_in_place && !InPlaceRefuses(backup))) {
          ++capable;
        }
      }
      if (capable * 2 > members.size()) {
        Violation(absl::StrCat("restore ", restore_id, " does not raise the revision though ",
                               capable, " of its ", members.size(), " members could"));
      }
    }
    if (all_can_bump && c.rev <= served) {
      Violation(absl::StrCat("restore ", restore_id, " starts its cluster at revision ", c.rev,
                             " though revision ", served,
                             " was served before: revisions would be served twice"));
    }
    for (const auto& [lease, ttl] : data->second.lease_ttls) c.leases[lease] = {now_ + ttl, ttl};
    c.next_lease = 0x100000 + static_cast<int64_t>(rng_() % 1000);
    c.origin = "restore " + restore_id;
    c.served = false;
    for (const auto& [lease, ttl] : data->second.lease_ttls) restored_leases_[cid].insert(lease);
    clusters_[cid] = c;
    Trace(i, absl::StrCat("restored cluster ", HexId(cid), " at revision ", c.rev));
  }
  staged->state = DataDirState::kMember;
  staged->cluster = cid;
  staged->member = InitialMemberId({n.config.PeerUrl(n.spec)}, r.token);
  staged->rev = clusters_[cid].rev;
  staged->seen = members;
  staged->wal_commit = members.size();
  dirty_ = true;
  return absl::OkStatus();
}

void World::StartEtcd(int i) {
  Node& n = *nodes_[i];
  if (n.etcd_up || Paused(i)) return;
  const std::vector<std::string>& flags = n.etcd_flags;
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

void World::Boot(int i) {
  Node& n = *nodes_[i];
  n.reconciler.reset();
  n.restorer.reset();
  n.leadership.reset();
  n.local.reset();
  n.agent_up = true;
  n.restart_at = -1;
  n.runner_wanted = false;
  n.restarts = 0;
  std::vector<std::string> others;
  for (const auto& m : nodes_) {
    if (m->index != i) others.push_back(m->config.ClientUrl(m->spec));
  }
  n.peers_client = std::make_unique<SimEtcd>(this, i, others);
  n.cluster_client = std::make_unique<SimEtcd>(this, i, n.config.AllClientUrls());
  n.local_client = std::make_unique<SimEtcd>(
      this, i, std::vector<std::string>{n.config.ClientUrl(n.spec), n.config.FenceUrl(n.spec)});
  n.initial_agents.clear();
  for (int k = 0; k < n.config.cluster.size; ++k) {
    if (k != i) n.initial_agents[nodes_[k]->spec.name] = std::make_unique<SimPeer>(this, i, k);
  }
  // The node side, as the agent wires it (Agent::Wire), over the simulated seams.
  if (!n.disk_seam) n.disk_seam = std::make_unique<SimDisk>(this, i);
  n.runner = std::make_unique<SimRunner>(this, i);
  // As Agent's constructor: the version the marker names, else etcd.binary.
  auto chosen = n.config.etcd.versions.find(n.disk.etcd_version);
  n.binary = chosen != n.config.etcd.versions.end() ? chosen->second : n.config.etcd.binary;
  SimDisk* disk = n.disk_seam.get();
  n.terms = std::make_unique<TermGuard>(
      [disk] { return disk->Read(Marker::kLeaderTerm); },
      [disk](const std::string& text) { return disk->Write(Marker::kLeaderTerm, text); });
  LocalNodeEnv le;
  le.disk = disk;
  le.runner = n.runner.get();
  le.peers = n.peers_client.get();
  le.local = n.local_client.get();
  for (auto& [name, p] : n.initial_agents) le.initial_agents[name] = p.get();
  le.store = &store_;
  le.clock = n.clock.get();
  le.parallel = false;
  if (o_.upgraded) {  // what the agent's probe finds (Agent::Start)
    std::vector<EtcdBinary> binaries = {{"", n.config.etcd.binary,
                                         VersionOfBinary(n.config.etcd.binary), ""}};
    for (const auto& [version, path] : n.config.etcd.versions) {
      binaries.push_back({version, path, VersionOfBinary(path), ""});
    }
    le.binaries = [binaries] { return binaries; };
  }
  n.local = std::make_unique<LocalNode>(n.config, std::move(le));
  // A restarted agent adopts an etcd that still runs; otherwise it decides afresh.
  if (n.runner->Adopt()) n.local->AdoptRunning();
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
  n.local.reset();
  n.terms.reset();
  n.runner.reset();
  n.runner_wanted = false;  // nobody restarts etcd while the agent is down
  if (etcd_too) n.etcd_up = false;
  n.restart_at = now_ + 1000 + static_cast<Ms>(rng_() % 20000);
  dirty_ = true;
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

void World::TakeBackup() {
  // The leader's scheduler, as a model: a snapshot of a member on the quorum side.
  Refresh();
  for (const auto& n : nodes_) {
    if (n->serving_fence || !InQuorum(n->index)) continue;
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
    // The snapshot holds exactly the committed revisions (DeltaWriter and ChooseRestoreBase
    // compare chains against it).
    m.revision_max = c->rev;
    m.finished_unix_ms = wall;
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
    data.generation = m.generation;
    backups_[m.name] = data;
    if (!store_.Put(MetaKey("sim", m.name), MetaToJson(m).dump()).ok()) return;
    prev_backup_ = last_backup_;
    last_backup_ = m.name;
    // The delta writer notices a newer backup within DeltaWriter's kBaseCheckEvery (30 s, well
    // under backup.interval); here within 15 s, under the 20 s between backups.
    if (o_.delta_every > 0) delta_switch_at_ = now_ + static_cast<Ms>(delta_rng_() % 15000);
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

std::vector<uint64_t> World::ClustersAbleToReachQuorum(bool unserved_too) const {
  std::vector<uint64_t> out;
  for (const auto& [id, c] : clusters_) {
    if (!c.served && !unserved_too) continue;
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
  // A restore's replay still owes its cluster these: the store holds them meanwhile (also
  // when that cluster is lost again before the replay: the next restore replays them, or
  // counts them as given up).
  for (const auto& [cid, owed] : pending_replay_) {
    for (int w : owed) held[static_cast<size_t>(w)] = 1;
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

void World::TakeDelta() {
  Refresh();
  for (const auto& n : nodes_) {
    if (n->serving_fence || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    // A chain follows a complete backup of this very cluster (NewestBase).
    if (last_backup_.empty() || backups_[last_backup_].cluster != c->id) return;
    if (delta_base_.empty() || backups_[delta_base_].cluster != c->id) delta_base_ = last_backup_;
    if (delta_base_ != last_backup_ && now_ >= delta_switch_at_) {
      // What the old chain got last stays there; the new one starts at the newer backup.
      Trace(n->index, absl::StrCat("deltas move on to backup ", last_backup_));
      delta_base_ = last_backup_;
    }
    std::vector<DeltaRecord>& chain = deltas_[delta_base_];
    DeltaRecord d;
    d.from = chain.empty() ? backups_[delta_base_].revision : chain.back().to;
    d.to = c->rev;
    backup::DeltaChunk chunk;
    chunk.set_cluster("sim");
    chunk.set_cluster_id(c->id);
    chunk.set_base(delta_base_);
    chunk.set_from_revision(d.from);
    chunk.set_to_revision(d.to);
    for (const auto& [rev, w] : c->writes) {
      if (rev <= d.from || rev > d.to) continue;
      auto* r = chunk.add_revisions();
      r->set_revision(rev);
      r->set_unix_ms(Wall(n->index));
      auto* e = r->add_events();
      e->set_type(etcdserverpb::Event::PUT);
      e->mutable_kv()->set_key(absl::StrCat(kWriteKeyPrefix, w));
      e->mutable_kv()->set_value(absl::StrCat(w));
      e->mutable_kv()->set_create_revision(rev);
      e->mutable_kv()->set_mod_revision(rev);
      e->mutable_kv()->set_version(1);
      d.writes.emplace_back(rev, w);
    }
    // As DeltaWriter: no change to keep, nothing stored (the next delta starts here too).
    if (d.writes.empty()) return;
    auto m = WriteDelta(store_, chunk, n->spec.name);
    if (!m.ok()) {
      Trace(n->index, absl::StrCat("delta after ", delta_base_, " not stored: ", m.status().message()));
      return;
    }
    d.object_key = DeltaObjectKey("sim", delta_base_, m->name);
    d.meta_key = DeltaMetaKey("sim", delta_base_, m->name);
    chain.push_back(d);
    ++result_.deltas;
    Trace(n->index, absl::StrCat("delta ", m->name, " after ", delta_base_, " (", d.writes.size(),
                                 " writes)"));
    return;
  }
}

std::set<int> World::HeldByChain(const std::string& backup, int64_t to, int64_t* reached) const {
  std::set<int> out;
  auto b = backups_.find(backup);
  if (b == backups_.end()) return out;
  for (const auto& [rev, w] : b->second.writes) out.insert(w);
  int64_t end = b->second.revision;
  if (reached != nullptr) *reached = end;
  if (to < 0) return out;
  auto chain = deltas_.find(backup);
  if (chain == deltas_.end()) return out;
  for (const DeltaRecord& d : chain->second) {
    if (to != 0 && d.from >= to) break;
    if (!store_.objects.count(d.object_key) || !store_.objects.count(d.meta_key)) break;
    for (const auto& [rev, w] : d.writes) {
      if (to == 0 || rev <= to) out.insert(w);
    }
    end = d.to;
  }
  if (reached != nullptr) *reached = end;
  return out;
}

void World::Replayed(uint64_t cluster, int w) {
  auto it = pending_replay_.find(cluster);
  if (it != pending_replay_.end() && it->second.erase(w) > 0) ++result_.writes_replayed;
}

void World::CheckReplayed(int i) {
  Cluster* c = ClusterOf(i);
  if (c == nullptr) return;
  c->served = true;
  auto it = pending_replay_.find(c->id);
  if (it == pending_replay_.end() || it->second.empty()) return;
  Violation(absl::StrCat("node ", nodes_[i]->spec.name, " serves clients of restored cluster ",
                         HexId(c->id), " while its replay still owes ", it->second.size(),
                         " acknowledged write(s), e.g. ", *it->second.begin()));
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
    if (!held && it->second.had_leader) {
      if (it->second.served) lost_rev_ = std::max(lost_rev_, it->second.rev);
      it = clusters_.erase(it);
    } else {
      ++it;
    }
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
      if (n >= 0 && InQuorum(n) && !nodes_[n]->serving_fence) ++up;
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

void World::OperatorDestroy() {
  const std::string cluster = nodes_[0]->config.cluster.name;
  // X4: not while a restore is under way (or the store cannot tell).
  auto intent = ReadRestoreIntent(store_, cluster);
  if (!intent.ok() || (intent->has_value() && !(*intent)->done && !(*intent)->cancelled)) return;
  if (!destroyed_) {
    DestroyMark mark;
    mark.id = absl::StrCat("sim-", result_.destroys + 1);
    mark.by = "operator";
    if (!WriteDestroyMark(store_, cluster, mark).ok()) return;  // the store is down: later
    destroyed_ = true;
    ++result_.destroys;
    Trace(absl::StrCat("OPERATOR destroy ", mark.id));
  }
  auto mark = ReadDestroyMark(store_, cluster);
  if (!mark.ok() || !mark->has_value()) return;
  // --force: the agents that answer carry it out; the others when they come back.
  for (auto& n : nodes_) {
    if (!n->agent_up || Paused(n->index) || !n->local) continue;
    peer::DestroyRequest req;
    req.set_destroy_id((*mark)->id);
    speaker_ = n->index;
    absl::Status s = n->local->Destroy(req);
    speaker_ = -1;
    Trace(n->index, absl::StrCat("destroy: ", s.ok() ? "carried out" : std::string(s.message())));
  }
  dirty_ = true;
}

void World::OperatorUndestroy() {
  const std::string cluster = nodes_[0]->config.cluster.name;
  if (destroyed_) {
    if (!ClearDestroyMark(store_, cluster).ok()) return;  // the store is down: later
    destroyed_ = false;
    Trace("OPERATOR undestroy");
  }
  undestroy_pending_ = false;
  for (auto& n : nodes_) {
    if (!n->agent_up || Paused(n->index) || !n->local) continue;
    peer::DestroyRequest req;
    req.set_undo(true);
    speaker_ = n->index;
    absl::Status s = n->local->Destroy(req);
    speaker_ = -1;
    if (!s.ok()) undestroy_pending_ = true;
  }
  dirty_ = true;
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
    if (o_.undestroy_at >= 0 && step >= o_.undestroy_at && (destroyed_ || step == o_.undestroy_at)) {
      OperatorUndestroy();
    }
    if (step == o_.reimage_at) {
      for (auto& m : nodes_) {
        if (!m->etcd_up || m->disk.state != DataDirState::kMember) continue;
        Trace(m->index, "FAULT reimage (scripted)");
        ++result_.faults["reimage"];
        Kill(m->index, true);
        m->disk = Disk();
        break;
      }
    }
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
    if (destroyed_ && o_.undestroy_at >= 0) OperatorUndestroy();  // the store is back
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
    if (result_.ok && !result_.live_at_end && !destroyed_) {
      // The agents must heal by themselves when a cluster still holds a majority of its
      // voters' data, or when nothing survives and a backup does (restore). Otherwise waiting
      // for an operator is right: a minority that survives with data is never overwritten.
      bool survivors = false;
      for (const auto& n : nodes_) survivors |= n->disk.state == DataDirState::kMember;
      // (A restored cluster that never served counts: its fenced members wait for the agents.)
      if (!ClustersAbleToReachQuorum(/*unserved_too=*/true).empty() ||
          (!survivors && !backups_.empty())) {
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
