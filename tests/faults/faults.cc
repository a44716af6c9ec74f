#include "faults.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/layout.h"
#include "backup/open.h"
#include "backup/pipeline.h"
#include "control/records.h"
#include "etcd/agreement.h"
#include "etcd/keys.h"
#include "pki/node_certs.h"

namespace steward::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

const char* FaultName(FaultKind k) {
  switch (k) {
    case FaultKind::kKillEtcd:
      return "kill-etcd";
    case FaultKind::kKillAgent:
      return "kill-agent";
    case FaultKind::kKillNode:
      return "kill-node";
    case FaultKind::kKillEtcdLeader:
      return "kill-etcd-leader";
    case FaultKind::kKillStewardLeader:
      return "kill-steward-leader";
    case FaultKind::kKillLeaderMidJoin:
      return "kill-leader-mid-join";
    case FaultKind::kPauseAgent:
      return "pause-agent";
    case FaultKind::kPauseEtcd:
      return "pause-etcd";
    case FaultKind::kPauseNode:
      return "pause-node";
    case FaultKind::kPauseMajority:
      return "pause-majority";
    case FaultKind::kHangEtcd:
      return "hang-etcd";
    case FaultKind::kFlipValue:
      return "flip-value";
    case FaultKind::kWipe:
      return "wipe";
    case FaultKind::kPartialDataDir:
      return "partial-data-dir";
    case FaultKind::kQuorumStop:
      return "quorum-stop";
    case FaultKind::kTotalLoss:
      return "total-loss";
    case FaultKind::kKillCoordinatorMidRestore:
      return "kill-coordinator-mid-restore";
    case FaultKind::kStoreMissing:
      return "store-missing";
    case FaultKind::kSkewedClock:
      return "skewed-clock";
    case FaultKind::kFullDisk:
      return "full-disk";
    case FaultKind::kPartitionNode:
      return "partition-node";
    case FaultKind::kPartitionLeader:
      return "partition-steward-leader";
    case FaultKind::kCutLink:
      return "cut-link";
    case FaultKind::kCutOneWay:
      return "cut-one-way";
    case FaultKind::kMuteNode:
      return "mute-node";
    case FaultKind::kStoreDown:
      return "store-down";
    case FaultKind::kStoreSlow:
      return "store-slow";
    case FaultKind::kCount:
      break;
  }
  return "?";
}

std::string FaultUnavailable(FaultKind k) {
  if (k == FaultKind::kFullDisk && geteuid() != 0) return "needs root (mounts a small tmpfs)";
  if ((k == FaultKind::kPartitionNode || k == FaultKind::kPartitionLeader ||
       k == FaultKind::kCutLink || k == FaultKind::kCutOneWay || k == FaultKind::kMuteNode) &&
      geteuid() != 0) {
    return "needs root (network namespaces)";
  }
  return "";
}

namespace {

std::string Key(int64_t seq) { return absl::StrFormat("f/%010d", seq); }

// Changes the first byte of `value` where it follows `key` (within a KeyValue record) in the
// bbolt file at `db`, in every copy: the page structure stays valid, so etcd serves the changed
// value. The file's etcd must be stopped. Returns how many copies were changed.
int FlipValue(const std::string& db, const std::string& key, const std::string& value) {
  std::string bytes;
  {
    std::ifstream in(db, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  int n = 0;
  for (size_t at = bytes.find(key); at != std::string::npos; at = bytes.find(key, at + 1)) {
    // key (field 1), three revisions and a version as varints, then the value (field 5).
    const size_t v = bytes.find(value, at + key.size());
    if (v == std::string::npos || v > at + key.size() + 48) continue;
    bytes[v] = static_cast<char>(bytes[v] ^ 0x01);
    ++n;
  }
  if (n == 0) return 0;
  std::ofstream out(db, std::ios::binary | std::ios::in | std::ios::out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out.good() ? n : -1;
}

std::unique_ptr<EtcdClient> NewClient(const TestCluster& c, std::chrono::milliseconds timeout) {
  EtcdClient::Options o;
  o.timeout = timeout;
  if (auto creds = TlsChannelCredentials(c.CaCert(), c.AdminCert(), c.AdminKey()); creds.ok()) {
    o.credentials = *creds;
  }
  return std::make_unique<EtcdClient>(c.ClientUrls(), o);
}

// Every f/ key and its value; false if the range could not be read.
bool ReadAll(const TestCluster& c, std::map<std::string, std::string>* out) {
  auto client = NewClient(c, 10s);
  etcdserverpb::TxnRequest req;
  auto* range = req.add_success()->mutable_request_range();
  range->set_key("f/");
  range->set_range_end("f0");  // '/' + 1
  auto r = client->Txn(req);
  if (!r.ok() || r->responses_size() != 1) return false;
  for (const auto& kv : r->responses(0).response_range().kvs()) (*out)[kv.key()] = kv.value();
  return true;
}

const char kLibFaketime[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

}  // namespace

Writer::Writer(const TestCluster& c) : c_(c), thread_([this] { Run(); }) {}

Writer::~Writer() { Stop(); }

void Writer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Writer::Run() {
  auto client = NewClient(c_, 2000ms);
  int failures_in_a_row = 0;
  while (!stop_.load()) {
    const int64_t seq = seq_.fetch_add(1);
    const std::string value = absl::StrCat("v", seq);
    etcdserverpb::TxnRequest req;
    auto* put = req.add_success()->mutable_request_put();
    put->set_key(Key(seq));
    put->set_value(value);
    auto r = client->Txn(req);
    if (r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ledger_[seq] = {value, r->header().revision()};
      ++acked_;
      failures_in_a_row = 0;
    } else {
      ++failed_;
      // A channel that met a stopped or restarting etcd may back off for long: start afresh.
      if (++failures_in_a_row % 5 == 0) client = NewClient(c_, 2000ms);
    }
    std::this_thread::sleep_for(10ms);
  }
}

std::map<int64_t, Acked> Writer::Ledger() {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_;
}

size_t Writer::ForgetAfter(int64_t seq, int64_t revision) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto it = ledger_.begin(); it != ledger_.end() && it->first < seq;) {
    if (it->second.revision > revision) {
      it = ledger_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

constexpr char kS3EndpointMark[] = "S3_ENDPOINT_OF_THE_RIG";

FaultRig::FaultRig(int subnet, int nodes, int size, StoreKind store, bool upgrade)
    : subnet_(subnet), nodes_(nodes), size_(size), store_kind_(store), upgrade_(upgrade) {
  // Fast handover and replacement so cycles are short; backups every few seconds so a total
  // loss loses little.
  const std::string backup_timing = "  interval: 5s\n  before_change_min_interval: 5s\n";
  const std::string backup =
      store == StoreKind::kFile
          ? "backup:\n  store: file://ROOT/backups\n" + backup_timing
          : absl::StrCat("backup:\n  store: s3://backups/steward\n", backup_timing,
                         "  s3:\n    endpoint: ", kS3EndpointMark,
                         "\n    path_style: true\n    region: us-east-1\n"
                         "    access_key_id: S3RVER\n    secret_access_key: S3RVER\n");
  c_ = std::make_unique<TestCluster>(
      subnet, nodes, size,
      std::string(kFastLeader) +
          "  replace_after: 8s\n  learner_timeout: 30s\n  hash_check_interval: 2s\n",
      backup,
      /*netns=*/geteuid() == 0);
  // The watchdog's bound at its minimum, so that hang-etcd cycles are short.
  c_->ReplaceInConfigs("  stop_timeout: 5s\n", "  stop_timeout: 5s\n  hang_restart_after: 10s\n");
  if (upgrade) {
    c_->UseEtcd(kDebianEtcd);  // the roll starts on Debian 12's 3.4
    c_->ReplaceInConfigs(
        "  restart_backoff_max: 2s\n",
        absl::StrCat("  restart_backoff_max: 2s\n  versions:\n    ", EtcdVersionOf("/usr/bin/etcd"),
                     ": /usr/bin/etcd\n    ", EtcdVersionOf(ETCD35_BIN), ": ", ETCD35_BIN, "\n"));
  }
  if (store == StoreKind::kS3) {
    // In the test's namespace, where nodes in namespaces of their own reach it over the bridge.
    auto s3 = S3rver::Start({"backups"}, c_->netns() ? absl::StrCat("10.211.", subnet, ".254")
                                                     : std::string("127.0.0.1"));
    if (s3.ok()) {
      s3_ = std::move(*s3);
      c_->ReplaceInConfigs(kS3EndpointMark, s3_->Endpoint());
    } else {
      ADD_FAILURE() << "s3rver: " << s3.status();
    }
  }
  if (geteuid() == 0 && store == StoreKind::kFile) {
    // kFullDisk's node keeps its data on a small tmpfs of its own.
    const std::string dir = c_->DataDir(tmpfs_node_);
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=512m,mode=0700") == 0) tmpfs_ = dir;
  }
}

BackupConfig FaultRig::StoreConfig() const {
  BackupConfig bc;
  if (store_kind_ == StoreKind::kFile || !s3_) {
    bc.store = absl::StrCat("file://", c_->Root(), "/backups");
    return bc;
  }
  bc.store = "s3://backups/steward";
  bc.s3.endpoint = s3_->Endpoint();
  bc.s3.path_style = true;
  bc.s3.region = "us-east-1";
  bc.s3.access_key_id = S3rver::kAccessKey;
  bc.s3.secret_access_key = S3rver::kSecretKey;
  return bc;
}

void FaultRig::WipeNode(int i) {
  KillNode(i);
  fs::remove_all(c_->DataDir(i) + "/etcd");
  if (upgrade_) fs::remove(c_->DataDir(i) + "/etcd-version");
  c_->StartAgent(i);
}

FaultRig::~FaultRig() {
  writer_.reset();
  // Detached first (lazily: its etcd may still hold files there), so the cluster's teardown
  // can delete the plain directory left behind.
  if (!tmpfs_.empty()) ::umount2(tmpfs_.c_str(), MNT_DETACH);
  c_.reset();
  s3_.reset();  // after the agents: none of them is left talking to it
}

bool FaultRig::Start() {
  for (int i = 0; i < nodes_; ++i) c_->StartAgent(i);
  if (store_kind_ == StoreKind::kS3 && !s3_) return false;
  if (!WaitHealthyAtSize(90s)) return false;
  writer_ = std::make_unique<Writer>(*c_);
  if (upgrade_) {
    const std::string v35 = EtcdVersionOf(ETCD35_BIN);
    RunResult r = c_->Ctl({"configure-cluster", "--etcd-version", v35});
    if (r.exit_code != 0) {
      ADD_FAILURE() << "configure-cluster: " << r.output;
      return false;
    }
    const bool rolled = WaitFor(
        [&] {
          ClusterView v = c_->Status();
          if (v.members.size() != static_cast<size_t>(size_)) return false;
          for (const auto& m : v.members) {
            if (!m.healthy || !m.status || m.status->version != v35) return false;
          }
          return true;
        },
        240s);
    if (!rolled || !WaitHealthyAtSize(60s)) return false;
    std::cout << "rolled to etcd " << v35 << " before the faults" << std::endl;
  }
  return true;
}

int FaultRig::NodeOf(const std::string& name) const {
  if (name.size() < 2 || name[0] != 'n') return -1;
  const int i = std::atoi(name.c_str() + 1) - 1;
  return i >= 0 && i < nodes_ ? i : -1;
}

std::vector<int> FaultRig::MemberNodes() const {
  std::vector<int> out;
  for (const auto& m : c_->Status().members) {
    if (m.member.is_learner) continue;
    if (int i = NodeOf(m.member.name); i >= 0) out.push_back(i);
  }
  return out;
}

int FaultRig::EtcdLeaderNode() const {
  ClusterView v = c_->Status();
  for (const auto& m : v.members) {
    if (m.member.id == v.leader_id) return NodeOf(m.member.name);
  }
  return -1;
}

int FaultRig::StewardLeaderNode() const {
  auto client = NewClient(*c_, 3000ms);
  auto leader = client->Get(LeaderKey(absl::StrCat("it", subnet_)));
  if (!leader.ok() || !leader->has_value()) return -1;
  return NodeOf(**leader);
}

void FaultRig::KillNode(int i) {
  c_->SignalAgent(i, SIGKILL);
  c_->KillEtcd(i);
}

void FaultRig::Pause(const std::vector<pid_t>& pids, std::chrono::seconds d) {
  for (pid_t p : pids) {
    if (p > 0) ::kill(p, SIGSTOP);
  }
  std::this_thread::sleep_for(d);
  for (pid_t p : pids) {
    if (p > 0) ::kill(p, SIGCONT);
  }
}

bool FaultRig::WaitHealthyAtSize(std::chrono::seconds bound) const {
  return WaitFor(
      [&] {
        ClusterView v = c_->Status();
        if (!v.healthy || v.voters != size_ || v.healthy_voters != size_) return false;
        for (const auto& m : v.members) {
          if (m.member.is_learner) return false;
        }
        return true;
      },
      bound);
}

FaultRig::Snapshot FaultRig::Observe() const {
  Snapshot s;
  for (const auto& m : c_->Status().members) {
    if (m.status) s.raft_index[m.member.id] = m.status->raft_index;
  }
  return s;
}

std::string FaultRig::RestoredBackupRevision(int64_t* revision) const {
  auto store = OpenStore(StoreConfig());
  if (!store.ok()) return std::string(store.status().message());
  const std::string cluster = absl::StrCat("it", subnet_);
  auto intent = ReadRestoreIntent(**store, cluster);
  if (!intent.ok() || !intent->has_value()) return "no restore intent";
  auto listed = ListBackups(**store, cluster);
  if (!listed.ok()) return std::string(listed.status().message());
  for (const auto& b : *listed) {
    if (b.name == (*intent)->backup && b.meta) {
      // With delta backups the restore reaches past the full backup: every write up to there
      // must be back.
      *revision = std::max(b.meta->revision, (*intent)->delta_to);
      return "";
    }
  }
  return absl::StrCat("backup ", (*intent)->backup, " not listed");
}

void FaultRig::Check(const Snapshot& before, bool total_loss, int64_t loss_seq, CycleResult* r) {
  if (total_loss) {
    int64_t revision = 0;
    if (std::string why = RestoredBackupRevision(&revision); !why.empty()) {
      r->violations.push_back("cannot tell which backup was restored: " + why);
    } else {
      r->restored = true;
      r->restore_loss = writer_->ForgetAfter(loss_seq, revision);
    }
  }
  // Every acknowledged write, with its value. The ledger is copied before the keys are read:
  // a write acknowledged in between is not in the ledger copy, rather than missing from the read.
  const std::map<int64_t, Acked> ledger = writer_->Ledger();
  std::map<std::string, std::string> all;
  if (!ReadAll(*c_, &all)) {
    r->violations.push_back("could not read the keys back");
  } else {
    for (const auto& [seq, a] : ledger) {
      auto it = all.find(Key(seq));
      if (it == all.end() || it->second != a.value) {
        if (r->lost < 5) {
          r->violations.push_back(absl::StrCat("acknowledged ", Key(seq), " (revision ", a.revision,
                                               ") is ", it == all.end() ? "missing" : "changed"));
        }
        ++r->lost;
      }
    }
  }
  // One cluster ID, and no member rolled back.
  ClusterView v = c_->Status();
  uint64_t cluster_id = 0;
  for (const auto& m : v.members) {
    if (!m.status) continue;
    if (cluster_id == 0) cluster_id = m.status->cluster_id;
    if (m.status->cluster_id != cluster_id) {
      r->violations.push_back(absl::StrFormat("member %s answers for cluster %x, another for %x",
                                              m.member.name, m.status->cluster_id, cluster_id));
    }
    auto was = before.raft_index.find(m.member.id);
    if (!total_loss && was != before.raft_index.end() && m.status->raft_index < was->second) {
      r->violations.push_back(absl::StrFormat("member %s (%x) rolled back: raft index %d, was %d",
                                              m.member.name, m.member.id, m.status->raft_index,
                                              was->second));
    }
  }
}

CycleResult FaultRig::Cycle(FaultKind kind, std::mt19937& rng) {
  CycleResult r;
  r.kind = kind;
  const bool network = kind == FaultKind::kPartitionNode || kind == FaultKind::kPartitionLeader ||
                       kind == FaultKind::kCutLink || kind == FaultKind::kCutOneWay ||
                       kind == FaultKind::kMuteNode;
  const bool needs_s3 = kind == FaultKind::kStoreDown || kind == FaultKind::kStoreSlow;
  std::string why = FaultUnavailable(kind);
  if (why.empty() && needs_s3 && !s3_) why = "runs on the S3 rig (its server is what fails)";
  if (why.empty() && kind == FaultKind::kFullDisk && tmpfs_.empty()) {
    why = store_kind_ == StoreKind::kFile ? "the tmpfs could not be mounted"
                                          : "runs on the file-store rig";
  }
  if (why.empty() && network && !c_->netns()) why = "the network namespaces could not be made";
  if (!why.empty()) {
    r.skipped = true;
    r.skip_reason = why;
    return r;
  }
  const Snapshot before = Observe();
  const int64_t acked_before = writer_->acked();
  std::vector<int> voters = MemberNodes();
  if (voters.empty()) voters = {0};
  auto pick = [&](const std::vector<int>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  auto other_than = [&](int leader) {
    std::vector<int> out;
    for (int i : voters) {
      if (i != leader) out.push_back(i);
    }
    return out.empty() ? voters : out;
  };
  auto etcd_pid = [&](int i) { return c_->EtcdPid(i).value_or(0); };
  bool total_loss = false;
  int64_t loss_seq = 0;
  switch (kind) {
    case FaultKind::kKillEtcd:
      c_->KillEtcd(pick(other_than(EtcdLeaderNode())));
      break;
    case FaultKind::kKillAgent: {
      const int i = std::uniform_int_distribution<int>(0, nodes_ - 1)(rng);
      c_->SignalAgent(i, SIGKILL);
      c_->StartAgent(i);
      break;
    }
    case FaultKind::kKillNode: {
      const int i = pick(voters);
      KillNode(i);
      std::this_thread::sleep_for(1s);
      c_->StartAgent(i);
      break;
    }
    case FaultKind::kKillEtcdLeader:
      if (int i = EtcdLeaderNode(); i >= 0) c_->KillEtcd(i);
      break;
    case FaultKind::kKillStewardLeader:
      if (int i = StewardLeaderNode(); i >= 0) {
        c_->SignalAgent(i, SIGKILL);
        c_->StartAgent(i);
      }
      break;
    case FaultKind::kKillLeaderMidJoin: {
      const int i = pick(other_than(StewardLeaderNode()));
      KillNode(i);
      fs::remove_all(c_->DataDir(i) + "/etcd");
      if (upgrade_) fs::remove(c_->DataDir(i) + "/etcd-version");  // re-imaged (see kWipe)
      c_->StartAgent(i);
      // The leader removes the old entry and adds the node back as a learner: kill it then.
      WaitFor(
          [&] {
            for (const auto& m : c_->Status().members) {
              if (m.member.is_learner) return true;
            }
            return false;
          },
          30s);
      if (int l = StewardLeaderNode(); l >= 0) {
        c_->SignalAgent(l, SIGKILL);
        c_->StartAgent(l);
      }
      break;
    }
    case FaultKind::kPauseAgent: {
      const int i = std::uniform_int_distribution<int>(0, nodes_ - 1)(rng);
      Pause({c_->AgentPid(i)}, 5s);
      break;
    }
    case FaultKind::kPauseEtcd:
      Pause({etcd_pid(pick(voters))}, 5s);
      break;
    case FaultKind::kPauseNode: {
      const int i = pick(voters);
      Pause({c_->AgentPid(i), etcd_pid(i)}, 5s);
      break;
    }
    case FaultKind::kPauseMajority: {
      std::shuffle(voters.begin(), voters.end(), rng);
      std::vector<pid_t> pids;
      for (size_t k = 0; k < static_cast<size_t>(size_ / 2 + 1) && k < voters.size(); ++k) {
        pids.push_back(c_->AgentPid(voters[k]));
        pids.push_back(etcd_pid(voters[k]));
      }
      Pause(pids, 5s);
      break;
    }
    case FaultKind::kHangEtcd: {
      // Its agent restarts it after the bound; SIGCONT only if it is still the same process.
      const int i = pick(voters);
      const pid_t pid = etcd_pid(i);
      if (pid <= 0) break;
      ::kill(pid, SIGSTOP);
      // The bound (10 s) plus the watchdog's probes and the grace: within 30 s.
      const bool restarted = WaitFor([&] { return c_->EtcdPid(i) != pid; }, 30s);
      if (!restarted) {
        ::kill(pid, SIGCONT);
        ADD_FAILURE() << "hang-etcd: n" << i + 1 << "'s etcd (pid " << pid
                      << ") was not restarted in place within 30 s";
      }
      break;
    }
    case FaultKind::kFlipValue: {
      const int i = pick(other_than(EtcdLeaderNode()));
      const std::map<int64_t, Acked> ledger = writer_->Ledger();
      if (ledger.empty()) break;
      // The oldest acknowledged write still held: long in the DB file.
      const auto& [seq, acked] = *ledger.begin();
      const std::string name = absl::StrCat("n", i + 1);
      uint64_t old_id = 0;
      for (const auto& m : c_->Status().members) {
        if (m.member.name == name) old_id = m.member.id;
      }
      c_->SignalAgent(i, SIGTERM);
      if (!WaitFor([&] { return !c_->EtcdPid(i).has_value(); }, 20s)) KillNode(i);
      const int flipped = FlipValue(c_->DataDir(i) + "/etcd/member/snap/db", Key(seq), acked.value);
      c_->StartAgent(i);
      if (flipped <= 0) {
        r.note = absl::StrCat(Key(seq), " not found in ", name, "'s DB file");
        break;
      }
      const auto start = SteadyClock::now();
      auto client = NewClient(*c_, 10s);
      const bool repaired = WaitFor(
          [&] {
            // The old member is gone (set aside) and the cluster is whole again and agrees.
            for (const auto& m : c_->Status().members) {
              if (m.member.id == old_id) return false;
            }
            auto v = CompareMembers(*client, 10s);
            return v.ok() && v->majority && v->differing.empty() &&
                   v->agreeing.size() == static_cast<size_t>(size_);
          },
          150s);
      r.note = absl::StrCat(
          name, "'s ", Key(seq), " changed: ", repaired ? "repaired" : "NOT repaired", " in ",
          std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count(),
          " ms");
      if (!repaired) r.violations.push_back("flip-value: " + r.note);
      break;
    }
    case FaultKind::kWipe:
    case FaultKind::kPartialDataDir: {
      const int i = pick(voters);
      KillNode(i);
      fs::remove_all(c_->DataDir(i) + (kind == FaultKind::kWipe ? "/etcd" : "/etcd/member/wal"));
      // After a roll, a wiped node is a re-imaged one: it has forgotten which version it ran
      // (issue 32), and must learn it from the cluster.
      if (upgrade_ && kind == FaultKind::kWipe) fs::remove(c_->DataDir(i) + "/etcd-version");
      c_->StartAgent(i);
      break;
    }
    case FaultKind::kQuorumStop: {
      std::shuffle(voters.begin(), voters.end(), rng);
      const size_t n = std::min<size_t>(static_cast<size_t>(size_ / 2 + 1), voters.size());
      for (size_t k = 0; k < n; ++k) KillNode(voters[k]);
      std::this_thread::sleep_for(3s);
      for (size_t k = 0; k < n; ++k) c_->StartAgent(voters[k]);
      break;
    }
    case FaultKind::kTotalLoss:
    case FaultKind::kKillCoordinatorMidRestore: {
      total_loss = true;
      // The last restore's intent, if any: the one this loss brings is another.
      std::string old_intent;
      auto store = OpenStore(StoreConfig());
      // A total loss is meant to be restored: only once the store holds a complete backup of
      // this cluster (after store faults early in a run there may be none yet, and waiting for
      // an operator is then what the agents rightly do). Bounded.
      if (store.ok()) {
        const std::string cluster = absl::StrCat("it", subnet_);
        const auto until = SteadyClock::now() + 90s;
        auto has_backup = [&] {
          auto listed = ListBackups(**store, cluster);
          if (!listed.ok()) return false;
          for (const auto& b : *listed) {
            if (b.meta) return true;
          }
          return false;
        };
        while (!has_backup() && SteadyClock::now() < until) std::this_thread::sleep_for(500ms);
        if (!has_backup()) r.violations.push_back("no complete backup within 90 s to restore from");
      }
      if (store.ok()) {
        if (auto i = ReadRestoreIntent(**store, absl::StrCat("it", subnet_));
            i.ok() && i->has_value()) {
          old_intent = (*i)->id;
        }
      }
      // Every machine dies at once with its disk (a mount point's contents go, not the mount).
      for (int i = 0; i < nodes_; ++i) c_->SignalAgent(i, SIGKILL);
      for (int i = 0; i < nodes_; ++i) c_->KillEtcd(i);
      // Writes go on being acknowledged until the last etcd dies: the cut is taken after.
      loss_seq = writer_->NextSeq();
      for (int i = 0; i < nodes_; ++i) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(c_->DataDir(i), ec))
          fs::remove_all(e.path(), ec);
      }
      for (int i = 0; i < nodes_; ++i) c_->StartAgent(i);
      if (kind == FaultKind::kKillCoordinatorMidRestore) {
        // The coordinator is the lowest-named agent that answers: n1. Kill it as soon as this
        // loss's restore intent is written.
        // Polled fast: a small restore is done within a second of its first order.
        const auto deadline = SteadyClock::now() + 60s;
        bool seen = false, ordered = false, done = false;
        while (store.ok() && !seen && SteadyClock::now() < deadline) {
          auto intent = ReadRestoreIntent(**store, absl::StrCat("it", subnet_));
          if (intent.ok() && intent->has_value() && !(*intent)->cancelled &&
              (*intent)->id != old_intent) {
            seen = true;
            ordered = (*intent)->ordered;
            done = (*intent)->done;
          } else {
            std::this_thread::sleep_for(20ms);
          }
        }
        r.note = !seen     ? "no restore intent seen within 60 s"
                 : done    ? "the restore was done before the kill"
                 : ordered ? "killed mid-restore, its orders out"
                           : "killed mid-restore, before its orders";
        c_->SignalAgent(0, SIGKILL);
        std::this_thread::sleep_for(1s);
        c_->StartAgent(0);
      }
      break;
    }
    case FaultKind::kStoreMissing: {
      // The file store's root, or the S3 bucket (s3rver keeps a bucket as a directory: moved
      // away, the bucket does not exist).
      const std::string root = s3_ ? s3_->data_dir() + "/backups" : c_->Root() + "/backups";
      fs::rename(root, root + ".away");
      const int i = pick(voters);
      KillNode(i);
      std::this_thread::sleep_for(1s);
      c_->StartAgent(i);
      std::this_thread::sleep_for(9s);
      fs::rename(root + ".away", root);
      break;
    }
    case FaultKind::kSkewedClock: {
      const int i = pick(voters);
      c_->SignalAgent(i, SIGKILL);  // its etcd keeps running and is adopted
      c_->StartAgentWith(i, {"--config", c_->ConfigPath(i)},
                         {absl::StrCat("LD_PRELOAD=", kLibFaketime), "FAKETIME=+2h"});
      std::this_thread::sleep_for(2s);
      const int victim = pick(other_than(i));
      KillNode(victim);
      std::this_thread::sleep_for(1s);
      c_->StartAgent(victim);
      if (!WaitHealthyAtSize(90s)) r.violations.push_back("not healthy with a skewed agent");
      c_->SignalAgent(i, SIGKILL);
      c_->StartAgent(i);
      break;
    }
    case FaultKind::kFullDisk: {
      if (std::find(voters.begin(), voters.end(), tmpfs_node_) == voters.end()) {
        r.note = "n3 (the tmpfs node) is a spare now";
      }
      struct statvfs st {};
      const std::string fill = tmpfs_ + "/fill";
      if (::statvfs(tmpfs_.c_str(), &st) == 0) {
        const int fd = ::open(fill.c_str(), O_CREAT | O_WRONLY, 0600);
        if (fd >= 0) {
          // All of it: etcd's next WAL or backend write fails with ENOSPC.
          ::posix_fallocate(fd, 0, static_cast<off_t>(st.f_bavail * st.f_frsize));
          ::close(fd);
        }
      }
      std::this_thread::sleep_for(8s);
      fs::remove(fill);
      break;
    }
    case FaultKind::kPartitionNode: {
      const int i = pick(voters);
      const auto d = std::chrono::seconds(std::uniform_int_distribution<int>(4, 14)(rng));
      r.note = absl::StrCat("n", i + 1, " cut off for ", d.count(), " s");
      c_->Partition(i);
      std::this_thread::sleep_for(d);
      c_->Heal(i);
      break;
    }
    case FaultKind::kPartitionLeader: {
      const int i = StewardLeaderNode();
      if (i < 0) {
        r.note = "no steward leader to cut off";
        break;
      }
      r.note = absl::StrCat("n", i + 1, " (the steward leader) cut off for 8 s");
      c_->Partition(i);
      std::this_thread::sleep_for(8s);
      c_->Heal(i);
      break;
    }
    case FaultKind::kCutLink: {
      std::shuffle(voters.begin(), voters.end(), rng);
      if (voters.size() < 2) break;
      r.note = absl::StrCat("n", voters[0] + 1, " <-> n", voters[1] + 1, " cut for 8 s");
      c_->CutLink(voters[0], voters[1], true);
      std::this_thread::sleep_for(8s);
      c_->CutLink(voters[0], voters[1], false);
      break;
    }
    case FaultKind::kCutOneWay: {
      std::shuffle(voters.begin(), voters.end(), rng);
      if (voters.size() < 2) break;
      r.note = absl::StrCat("n", voters[0] + 1, " -> n", voters[1] + 1, " dropped for 8 s");
      if (!c_->CutOneWay(voters[0], voters[1], true)) r.violations.push_back("the cut failed");
      std::this_thread::sleep_for(8s);
      if (!c_->CutOneWay(voters[0], voters[1], false)) r.violations.push_back("the heal failed");
      break;
    }
    case FaultKind::kMuteNode: {
      // Half the time the steward leader: it hears its followers but they never hear it.
      const int l = StewardLeaderNode();
      const int i = l >= 0 && std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? l : pick(voters);
      r.note = absl::StrCat("n", i + 1, i == l ? " (the steward leader)" : "",
                            " sends to no node for 8 s");
      for (int j = 0; j < nodes_; ++j) {
        if (j != i && !c_->CutOneWay(i, j, true)) r.violations.push_back("a cut failed");
      }
      std::this_thread::sleep_for(8s);
      for (int j = 0; j < nodes_; ++j) {
        if (j != i && !c_->CutOneWay(i, j, false)) r.violations.push_back("a heal failed");
      }
      break;
    }
    case FaultKind::kStoreDown: {
      // Membership changes wait while the store cannot be read or written: the record of the
      // voters there is what proves a total loss later (rule V1, docs/simulation.md). So the
      // wiped member is not replaced yet, the leader says why, and it is replaced as soon as
      // the store is back (the time to healthy counts from then).
      const int i = pick(other_than(StewardLeaderNode()));
      auto ids = [&] {
        std::vector<uint64_t> out;
        for (const auto& m : c_->Status().members) out.push_back(m.member.id);
        std::sort(out.begin(), out.end());
        return out;
      };
      const std::vector<uint64_t> members_before = ids();
      s3_->Stop();
      WipeNode(i);
      std::string said;
      const bool waits = WaitFor(
          [&] {
            RunResult got = c_->Ctl({"get", "-o", "json"});
            said = got.output;
            return said.find("backup store") != std::string::npos &&
                   said.find("membership changes wait") != std::string::npos;
          },
          20s);
      const bool unchanged = ids() == members_before;
      r.note = absl::StrCat("n", i + 1, " wiped with the store down; the leader ",
                            waits ? "waited for the store, and said so" : "DID NOT SAY WHY",
                            unchanged ? "" : ", BUT THE MEMBERS CHANGED");
      if (!waits) r.violations.push_back("no wait for the store in `get`: " + said);
      if (!unchanged) r.violations.push_back("the membership changed while the store was down");
      if (absl::Status st = s3_->Restart(); !st.ok()) {
        r.violations.push_back(absl::StrCat("s3rver did not come back: ", st.message()));
      }
      break;
    }
    case FaultKind::kStoreSlow: {
      // A store that answers slowly still answers: healing goes on while it crawls.
      const int i = pick(other_than(StewardLeaderNode()));
      const pid_t pid = s3_->pid();
      std::atomic<bool> crawling{true};
      std::thread slow([&] {
        while (crawling.load() && pid > 0) {
          ::kill(pid, SIGSTOP);
          std::this_thread::sleep_for(400ms);
          ::kill(pid, SIGCONT);
          std::this_thread::sleep_for(100ms);
        }
      });
      // Whatever happens below, the thread ends and s3rver runs again.
      struct Resume {
        std::atomic<bool>& crawling;
        std::thread& slow;
        pid_t pid;
        ~Resume() {
          crawling = false;
          if (slow.joinable()) slow.join();
          if (pid > 0) ::kill(pid, SIGCONT);
        }
      } resume{crawling, slow, pid};
      const auto wiped = SteadyClock::now();
      WipeNode(i);
      const bool healed = WaitHealthyAtSize(90s);
      const auto took =
          std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - wiped);
      r.note = absl::StrCat("n", i + 1, " wiped, ", healed ? "healed" : "NOT healed", " in ",
                            took.count(), " ms with the store at 1/5 speed");
      if (!healed) r.violations.push_back("a slow store stopped healing: " + r.note);
      break;
    }
    case FaultKind::kCount:
      break;
  }
  const auto fault_end = SteadyClock::now();
  r.recovered = WaitHealthyAtSize(total_loss ? 240s : 120s);
  r.to_healthy =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - fault_end);
  if (!r.recovered) {
    r.violations.push_back(absl::StrCat("not back to ", size_, " healthy voters in time"));
  } else {
    // A moment for the writer to land writes on the recovered cluster.
    std::this_thread::sleep_for(500ms);
    Check(before, total_loss, loss_seq, &r);
  }
  r.acked = writer_->acked() - acked_before;
  return r;
}

std::string SummaryTable(const std::vector<CycleResult>& results) {
  struct Row {
    int cycles = 0, recovered = 0, skipped = 0, restores = 0;
    std::vector<int64_t> ms;
    int64_t acked = 0;
    size_t lost = 0, restore_loss = 0;
    std::string skip_reason;
  };
  std::map<int, Row> rows;
  Row total;
  for (const auto& r : results) {
    for (Row* row : {&rows[static_cast<int>(r.kind)], &total}) {
      ++row->cycles;
      if (r.skipped) {
        ++row->skipped;
        row->skip_reason = r.skip_reason;
        continue;
      }
      if (r.recovered) {
        ++row->recovered;
        row->ms.push_back(r.to_healthy.count());
      }
      row->acked += r.acked;
      row->lost += r.lost;
      row->restore_loss += r.restore_loss;
      if (r.restored) ++row->restores;
    }
  }
  auto line = [](const std::string& name, Row& row) {
    std::sort(row.ms.begin(), row.ms.end());
    const double median = row.ms.empty() ? 0 : row.ms[row.ms.size() / 2] / 1000.0;
    const double max = row.ms.empty() ? 0 : row.ms.back() / 1000.0;
    if (row.skipped == row.cycles && row.cycles > 0) {
      return absl::StrFormat("| %-28s | %6d | skipped: %s |\n", name, row.cycles, row.skip_reason);
    }
    return absl::StrFormat("| %-28s | %6d | %9d | %8.1f | %6.1f | %8d | %4d | %8d | %12d |\n", name,
                           row.cycles, row.recovered, median, max, row.acked, row.lost,
                           row.restores, row.restore_loss);
  };
  std::string out =
      "| fault                        | cycles | recovered | median s | max s  | acked    | lost "
      "| restores | restore loss |\n"
      "|------------------------------|--------|-----------|----------|--------|----------|------"
      "|----------|--------------|\n";
  for (auto& [kind, row] : rows) out += line(FaultName(static_cast<FaultKind>(kind)), row);
  out += line("all", total);
  return out;
}

}  // namespace steward::testing
