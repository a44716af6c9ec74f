#include "agent/agent.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <future>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"
#include "backup/layout.h"
#include "backup/open.h"
#include "backup/pipeline.h"
#include "common/subprocess.h"
#include "etcd/flags.h"
#include "etcd/member_id.h"
#include "etcd/wal.h"
#include "pki/node_certs.h"
#include "runner/process_runner.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

Agent::Agent(Config config) : config_(std::move(config)) {
  ProcessRunner::Options o;
  o.binary = config_.etcd.binary;
  o.data_dir = config_.EtcdDataDir();
  o.pid_path = config_.EtcdPidPath();
  o.log_path = config_.EtcdLogPath();
  o.stop_timeout = config_.etcd.stop_timeout;
  o.backoff_min = config_.etcd.restart_backoff_min;
  o.backoff_max = config_.etcd.restart_backoff_max;
  runner_ = std::make_unique<ProcessRunner>(o);
  terms_ = std::make_unique<TermGuard>(config_.node.data_dir + "/leader-term");
}

absl::Status Agent::Wire() {
  // Credentials first: every client and server below uses them.
  std::shared_ptr<grpc::ChannelCredentials> client_creds;
  std::shared_ptr<grpc::ServerCredentials> server_creds = grpc::InsecureServerCredentials();
  if (config_.tls.enabled()) {
    const TlsPaths t = config_.Tls();
    auto cc = TlsChannelCredentials(t.ca, t.client_cert, t.client_key);
    if (!cc.ok()) return Annotate(cc.status(), "tls");
    auto sc = TlsServerCredentials(t.ca, t.agent_cert, t.agent_key);
    if (!sc.ok()) return Annotate(sc.status(), "tls");
    client_creds = *cc;
    server_creds = *sc;
  }
  std::vector<std::string> others;
  for (const auto& n : config_.cluster.nodes) {
    if (n.name != config_.node.name) others.push_back(config_.ClientUrl(n));
  }
  EtcdClient::Options co;
  co.credentials = client_creds;
  co.timeout = milliseconds(1000);
  peers_client_ = std::make_unique<EtcdClient>(others, co);
  local_client_ = std::make_unique<EtcdClient>(
      std::vector<std::string>{config_.ClientUrl(config_.self())}, co);
  co.timeout = milliseconds(2000);
  cluster_client_ = std::make_unique<EtcdClient>(config_.AllClientUrls(), co);
  for (int i = 0; i < config_.cluster.size; ++i) {
    const NodeSpec& n = config_.cluster.nodes[static_cast<size_t>(i)];
    if (n.name == config_.node.name) continue;
    initial_agents_[n.name] = std::make_unique<PeerClient>(config_.AgentAddress(n), client_creds);
  }
  server_ = std::make_unique<PeerServer>(
      config_.AgentAddress(config_.self()), this, terms_.get(), server_creds,
      config_.tls.enabled() ? std::optional<std::string>(config_.cluster.name) : std::nullopt);
  leadership_ = std::make_unique<Leadership>(
      cluster_client_.get(), LeaderKey(config_), EpochKey(config_), config_.node.name,
      std::chrono::duration_cast<std::chrono::seconds>(config_.cluster.leader_lease_ttl));
  if (auto store = OpenStore(config_.backup); store.ok()) {
    store_ = std::move(*store);
  } else {
    return Annotate(store.status(), "backup.store");
  }
  if (store_) {
    backups_ = std::make_unique<BackupScheduler>(config_, store_.get(), cluster_client_.get());
    restorer_ = std::make_unique<RestoreCoordinator>(config_, store_.get(), cluster_client_.get(),
                                                     RealControlEnv(config_, client_creds));
  }
  reconciler_ = std::make_unique<Reconciler>(
      config_, cluster_client_.get(), store_.get(), backups_.get(),
      [this] { return restorer_ != nullptr && restorer_->RestorePending(); },
      [this] { return leadership_->Confirm(); }, RealControlEnv(config_, client_creds),
      [this](uint64_t floor) { return leadership_->Raise(floor); });
  return absl::OkStatus();
}

Agent::~Agent() { Shutdown(false); }

absl::Status Agent::Start() {
  if (absl::Status s = MakeDirs(config_.node.data_dir, 0700); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("node.data_dir: ", s.message()));
  }
  spdlog::info("steward {} starting: node {} ({}), cluster {} of {} node(s), size {}",
               STEWARD_VERSION, config_.node.name, config_.self().host, config_.cluster.name,
               config_.cluster.nodes.size(), config_.cluster.size);
  // TLS files are checked (or issued) before etcd or the agent API start.
  if (absl::Status s = PrepareNodeTls(config_); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("tls: ", s.message()));
  }
  if (!config_.tls.enabled()) {
    spdlog::warn("TLS is OFF (tls.mode: off): etcd and the agent API accept anyone who can "
                 "reach them");
  } else {
    spdlog::info("TLS: mode {}, client and peer certificate authentication on", config_.tls.mode);
  }
  if (absl::Status s = Wire(); !s.ok()) return absl::FailedPreconditionError(Msg(s));
  if (store_) {
    spdlog::info("backups: {} every {}s", store_->Describe(),
                 std::chrono::duration_cast<std::chrono::seconds>(config_.backup.interval).count());
  } else {
    spdlog::warn("no backup.store configured: this cluster is not backed up");
  }
  if (absl::Status s = server_->Start(); !s.ok()) return s;
  if (auto pid = runner_->Adopt()) {
    // Keep the member serving; only record how to start it should it exit.
    RunEtcd(LaunchForData(), /*on_data=*/true);
  }
  control_ = std::thread([this] { ControlLoop(); });
  leadership_thread_ = std::thread([this] { LeadershipLoop(); });
  reconcile_thread_ = std::thread([this] { ReconcileLoop(); });
  return absl::OkStatus();
}

void Agent::Shutdown(bool stop_etcd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (reconcile_thread_.joinable()) reconcile_thread_.join();
  if (leadership_thread_.joinable()) leadership_thread_.join();
  if (control_.joinable()) control_.join();
  if (stop_etcd && leadership_) {
    // Hand leadership over at once rather than after the lease TTL.
    leadership_->Resign();
  }
  if (server_) server_->Shutdown();
  if (stop_etcd) {
    if (absl::Status s = runner_->Stop(); !s.ok()) spdlog::error("stopping etcd: {}", s.message());
  }
}

bool Agent::SleepFor(milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

void Agent::RunEtcd(const EtcdLaunch& launch, bool on_data) {
  started_on_data_ = on_data;
  member_data_seen_ = false;
  runner_->Run(RenderEtcdFlags(launch));
}

bool Agent::HasMemberData() const { return DataState() == DataDirState::kMember; }

DataDirState Agent::DataState() const {
  std::error_code ec;
  const fs::path member = fs::path(config_.EtcdDataDir()) / "member";
  if (!fs::exists(member, ec)) return DataDirState::kEmpty;
  // etcd opens its backend (member/snap/db) before it creates the WAL; a WAL segment is what
  // shows that raft state, and so anything acknowledged, was ever written here.
  for (const auto& e : fs::directory_iterator(member / "wal", ec)) {
    if (e.path().extension() == ".wal") return DataDirState::kMember;
  }
  return DataDirState::kPartial;
}

bool Agent::SetPartialDataAside() {
  if (DataState() != DataDirState::kPartial) return true;
  // Its own place, replacing only an earlier partial dir: removed/ keeps the last copy of real
  // member data (a wiped member, the data a restore replaced), which this must not push out.
  const fs::path dest = fs::path(config_.node.data_dir) / "partial-aside";
  std::error_code ec;
  fs::remove_all(dest, ec);
  fs::rename(config_.EtcdDataDir(), dest, ec);
  if (ec) {
    spdlog::error("setting aside a partial data dir: {}", ec.message());
    return false;
  }
  spdlog::warn("data dir {} held no WAL (a start or join that failed before etcd wrote one): "
               "moved to {}; this node now counts as empty",
               config_.EtcdDataDir(), dest.string());
  return true;
}

bool Agent::EverJoined() const {
  if (fs::exists(config_.node.data_dir + "/joined")) return true;
  // The marker is written once the agent sees a leader, but a leader may have come and gone
  // unseen (the agent died first): the WAL's commit index tells. Past the initial members'
  // configuration entries, a majority accepted a leader's entries; returning empty under this
  // identity could then lose them. (Read only until the marker exists.)
  if (DataState() != DataDirState::kMember) return false;
  auto commit = ReadWalCommit(config_.EtcdDataDir());
  if (!commit.ok() || !steward::EverJoined(false, *commit, config_.cluster.size)) return false;
  spdlog::info("the WAL shows a leader committed entries (commit index {}): this member has "
               "been part of a running cluster", *commit);
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/joined", "1\n"); !s.ok()) {
    spdlog::warn("writing the joined marker: {}", s.message());
  }
  return true;
}

bool Agent::Bootstrapping() const {
  return !EverJoined() && fs::exists(config_.node.data_dir + "/initial-bootstrap");
}

void Agent::MarkJoined() {
  if (EverJoined()) return;
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/joined", "1\n"); !s.ok()) {
    spdlog::warn("writing the joined marker: {}", s.message());
  }
}

void Agent::Note(const std::string& msg) {
  repeats_.Say(msg, [](const std::string& m) { spdlog::info("{}", m); });
}

void Agent::ControlLoop() {
  const auto started = std::chrono::steady_clock::now();
  auto next_restore_pass = started;
  auto next_tls_check = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  auto next_off_warning = std::chrono::steady_clock::now() + std::chrono::hours(1);
  do {
    if (std::chrono::steady_clock::now() >= next_off_warning) {
      if (!config_.tls.enabled()) spdlog::warn("TLS is OFF (tls.mode: off)");
      next_off_warning += std::chrono::hours(1);
    }
    if (config_.tls.mode == "issued" && std::chrono::steady_clock::now() >= next_tls_check) {
      // etcd reads its certificate files on every handshake: renewed files apply at once.
      auto renewed = RenewNodeTls(config_, std::chrono::system_clock::now());
      if (!renewed.ok()) {
        spdlog::error("renewing certificates: {}", renewed.status().message());
      } else if (*renewed) {
        // etcd picks the new files up on its next handshakes; the agent's own channels hold
        // the old ones, so the agent restarts itself (etcd keeps running and is adopted).
        spdlog::info("renewed this node's certificates (two-thirds of their lifetime had "
                     "passed); restarting the agent to load them");
        ::kill(::getpid(), SIGHUP);
      }
      // Check often enough that even short test lifetimes are renewed in time.
      next_tls_check = std::chrono::steady_clock::now() +
                       std::min<std::chrono::milliseconds>(std::chrono::minutes(1),
                                                           config_.tls.cert_lifetime / 20);
    }
    if (!runner_->wanted() && !held_) {
      std::lock_guard<std::mutex> lock(order_mu_);
      member_data_seen_ = false;
      if (!runner_->wanted() && !held_) MaybeStartEtcd();
    }
    if (runner_->wanted() && DataState() == DataDirState::kMember) member_data_seen_ = true;
    if (DataLostUnderEtcd(runner_->wanted(), started_on_data_, member_data_seen_, DataState())) {
      std::lock_guard<std::mutex> lock(order_mu_);
      if (DataLostUnderEtcd(runner_->wanted(), started_on_data_, member_data_seen_,
                            DataState())) {
        spdlog::error("the data dir {} of the running member is gone; stopping etcd rather than "
                      "restarting it on an empty dir under the old identity; the leader "
                      "replaces the member", config_.EtcdDataDir());
        if (absl::Status s = runner_->Stop(); !s.ok()) {
          spdlog::error("stopping etcd: {}", s.message());
        }
        member_data_seen_ = false;
      }
    }
    // "Joined" means the member has been part of a cluster with a leader, not merely started:
    // the bootstrap rule tells a bootstrap in progress from a cluster that existed by it.
    if (!EverJoined() && runner_->pid() && HasMemberData()) {
      auto st = local_client_->Status(config_.ClientUrl(config_.self()), milliseconds(300));
      if (st.ok() && st->leader != 0) MarkJoined();
    }
    // A fresh bootstrap that etcd refused (a peer says this member was bootstrapped before)
    // leaves a partial data dir, and restarting it with the same flags would fail forever:
    // stop, set the partial dir aside, and decide again (the cluster may now be answering).
    if (Bootstrapping() && runner_->wanted() && runner_->restarts() > 0 &&
        DataState() == DataDirState::kPartial) {
      std::lock_guard<std::mutex> lock(order_mu_);
      spdlog::warn("etcd refused the initial bootstrap (see {}); deciding again",
                   config_.EtcdLogPath());
      if (runner_->Stop().ok() && SetPartialDataAside()) {
        std::error_code ec;
        fs::remove(config_.node.data_dir + "/initial-bootstrap", ec);
      }
    }
    if (!FencedRestoreId().empty()) MaybeUnfenceSelf();
    // Restores (after total loss, or on command) are coordinated without etcd.
    if (restorer_ && std::chrono::steady_clock::now() >= next_restore_pass) {
      restorer_->Pass();
      // Agents restarted after a total loss come up within moments of each other: ask again
      // soon while this node is fresh and holds nothing, so the restore starts as soon as a
      // majority answers, without polling the store this often for good.
      const bool fresh = std::chrono::steady_clock::now() - started < std::chrono::seconds(30);
      next_restore_pass = std::chrono::steady_clock::now() +
                          milliseconds(fresh && !HasMemberData() ? 250 : 1000);
    }
  } while (SleepFor(milliseconds(250)));
}

void Agent::LeadershipLoop() {
  const auto period = std::max(milliseconds(300), std::chrono::duration_cast<milliseconds>(
                                                      config_.cluster.leader_lease_ttl / 4));
  do {
    leadership_->Tick();
  } while (SleepFor(period));
}

void Agent::ReconcileLoop() {
  while (SleepFor(milliseconds(0))) {
    bool progress = false;
    if (leadership_->leading()) progress = reconciler_->Pass(leadership_->term());
    auto pause = config_.cluster.reconcile_interval;
    if (reconciler_->in_progress()) pause = std::min(pause, milliseconds(100));
    if (!progress && !SleepFor(pause)) break;
  }
}

void Agent::MaybeStartEtcd() {
  StartDecision d = DecideStart(ObserveStart());
  switch (d.action) {
    case StartAction::kWait:
      Note(d.reason);
      return;
    case StartAction::kSetPartialAside:
      SetPartialDataAside();  // logs; the next pass decides on the empty dir
      return;
    case StartAction::kStartOnData:
      spdlog::info("data dir {} holds a member; starting etcd{}", config_.EtcdDataDir(),
                   FencedRestoreId().empty() ? "" : " (fenced: a restore is not settled yet)");
      RunEtcd(LaunchForData(), /*on_data=*/true);
      return;
    case StartAction::kBootstrap:
      break;
  }
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/initial-bootstrap", "1\n");
      !s.ok()) {
    Note(absl::StrCat("not bootstrapping: recording it failed: ", s.message()));
    return;
  }
  spdlog::info("{}: starting etcd as a member of the initial cluster ({} members)", d.reason,
               config_.cluster.size);
  RunEtcd(BootstrapLaunch(config_), /*on_data=*/false);
}

StartView Agent::ObserveStart() {
  std::map<std::string, PeerApi*> initial;
  for (auto& [name, client] : initial_agents_) initial[name] = client.get();
  return GatherStartView(config_, StartFacts{DataState(), EverJoined()}, *peers_client_, initial,
                         store_.get(), /*parallel=*/true);
}

peer::NodeState Agent::State() {
  peer::NodeState s;
  s.set_node_name(config_.node.name);
  s.set_agent_version(STEWARD_VERSION);
  auto pid = runner_->pid();
  s.set_etcd_running(runner_->wanted() || pid.has_value());
  s.set_etcd_pid(pid.value_or(0));
  s.set_etcd_restarts(runner_->restarts());
  s.set_has_data(HasMemberData());
  s.set_fenced(!FencedRestoreId().empty());
  s.set_can_bump_revision(!config_.etcd.etcdutl.empty());
  s.set_ever_joined(EverJoined());
  s.set_bootstrapping(Bootstrapping());
  s.set_restore_id(AppliedRestoreId());
  {
    std::unique_lock<std::mutex> lock(order_mu_, std::try_to_lock);
    if (lock.owns_lock()) s.set_restore_error(restore_error_);
  }
  if (s.has_data()) {
    if (auto id = ReadWalIdentity(config_.EtcdDataDir()); id.ok()) {
      s.set_member_id(id->member_id);
      s.set_cluster_id(id->cluster_id);
    }
  }
  if (pid) {
    const std::string url =
        s.fenced() ? config_.FenceUrl(config_.self()) : config_.ClientUrl(config_.self());
    if (auto st = local_client_->Status(url, milliseconds(300));
        st.ok()) {
      s.set_raft_index(st->raft_index);
      s.set_raft_term(st->raft_term);
      // The leader asks every pass: mark "joined" as soon as a leader is seen, not only on
      // the control loop's next round.
      if (st->leader != 0 && s.has_data() && !s.ever_joined() && !s.fenced()) {
        MarkJoined();
        s.set_ever_joined(true);
        s.set_bootstrapping(false);
      }
      s.set_etcd_version(st->version);
    }
  }
  return s;
}

absl::Status Agent::Join(const peer::StartRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  if (!runner_->wanted() && !SetPartialDataAside()) {
    return absl::InternalError("a partial data dir could not be set aside");
  }
  if (HasMemberData()) {
    return absl::AlreadyExistsError("the data dir already holds a member; wipe it first");
  }
  if (runner_->wanted()) return absl::OkStatus();  // already starting from an earlier order
  EtcdLaunch l = BootstrapLaunch(config_);
  l.initial_cluster.clear();
  for (const auto& m : req.initial_cluster()) l.initial_cluster.emplace_back(m.name(), m.peer_url());
  l.token = req.token();
  l.new_cluster = false;
  held_ = false;
  spdlog::info("joining the cluster as an existing member");
  RunEtcd(l, /*on_data=*/false);
  return absl::OkStatus();
}

absl::Status Agent::StopEtcd() {
  std::lock_guard<std::mutex> lock(order_mu_);
  held_ = true;
  return runner_->Stop();
}

absl::Status Agent::Wipe(const peer::OrderHeader& header) {
  std::lock_guard<std::mutex> lock(order_mu_);
  WipeView v;
  v.has_member_data = HasMemberData();
  auto id = v.has_member_data ? ReadWalIdentity(config_.EtcdDataDir())
                              : absl::StatusOr<WalIdentity>(absl::NotFoundError("no data"));
  if (id.ok()) {
    v.member_id = id->member_id;
  } else {
    v.identity_error = std::string(id.status().message());
  }
  if (v.has_member_data && id.ok()) {
    // Ask the other members, not our own etcd: an expelled member may still list itself.
    auto members = peers_client_->LinearizableMemberList(&v.list_cluster_id);
    v.list_ok = members.ok();
    if (members.ok()) {
      for (const auto& m : *members) v.member_ids.push_back(m.id);
    } else {
      v.list_error = std::string(members.status().message());
    }
  }
  v.leader_cluster_id = header.cluster_id();
  WipeDecision d = DecideWipe(v);
  if (d.action != WipeAction::kSetAside) return d.status;
  held_ = true;
  if (absl::Status s = runner_->Stop(); !s.ok()) {
    held_ = false;
    return s;
  }
  std::string dest;
  if (absl::Status s = SetDataAside(absl::StrCat("etcd-member-", HexId(id->member_id)), &dest);
      !s.ok()) {
    held_ = false;
    return s;
  }
  spdlog::warn("data of removed member {} moved to {}", HexId(id->member_id), dest);
  held_ = false;
  return absl::OkStatus();
}

absl::Status Agent::SetDataAside(const std::string& label, std::string* moved_to) {
  // Set the data aside rather than delete it; keep only the newest such copy.
  const fs::path removed = fs::path(config_.node.data_dir) / "removed";
  std::error_code ec;
  if (!fs::exists(config_.EtcdDataDir(), ec)) return absl::OkStatus();  // nothing to move
  const fs::path dest = removed / label;
  if (fs::exists(dest, ec)) {
    // A retried order: the first attempt already set the data aside here; keep that copy.
    fs::remove_all(config_.EtcdDataDir(), ec);
    *moved_to = dest.string();
    return absl::OkStatus();
  }
  fs::remove_all(removed, ec);
  fs::create_directories(removed, ec);
  fs::rename(config_.EtcdDataDir(), dest, ec);
  if (ec) return absl::InternalError(absl::StrCat("moving the data dir aside: ", ec.message()));
  *moved_to = dest.string();
  return absl::OkStatus();
}

std::string Agent::FencedRestoreId() const {
  auto text = ReadFile(config_.node.data_dir + "/fenced");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

EtcdLaunch Agent::LaunchForData() const {
  EtcdLaunch l = BootstrapLaunch(config_);
  if (!FencedRestoreId().empty()) l.client_url = config_.FenceUrl(config_.self());
  return l;
}

absl::Status Agent::UnfenceLocked(const std::string& restore_id) {
  const std::string fenced = FencedRestoreId();
  if (fenced.empty()) return absl::OkStatus();
  if (fenced != restore_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("fenced by restore ", fenced, ", not ", restore_id));
  }
  // etcd re-reads its flags only when it starts: restart it on the client URL. The marker goes
  // only once etcd is stopped, so a failed stop leaves the node visibly fenced (and retried).
  // A short grace: every member stops at once, and a graceful etcd leader would first try to
  // hand its leadership to peers that are stopping too (seconds); everything the fenced
  // cluster acknowledged (the lease revocations) is on disk already.
  held_ = true;
  if (absl::Status s = runner_->Stop(milliseconds(200)); !s.ok()) {
    held_ = false;
    return s;
  }
  std::error_code ec;
  fs::remove(config_.node.data_dir + "/fenced", ec);
  held_ = false;
  if (ec) return absl::InternalError(absl::StrCat("removing the fence marker: ", ec.message()));
  spdlog::info("restore {}: settled; etcd now serves clients on {}", restore_id,
               config_.ClientUrl(config_.self()));
  RunEtcd(LaunchForData(), /*on_data=*/true);
  return absl::OkStatus();
}

absl::Status Agent::Unfence(const peer::UnfenceRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  return UnfenceLocked(req.restore_id());
}

void Agent::MaybeUnfenceSelf() {
  if (!store_) return;
  auto intent = ReadRestoreIntent(*store_, config_.cluster.name);
  if (!intent.ok() || !intent->has_value()) return;
  const RestoreIntent& r = **intent;
  if (!r.settled && !r.done) return;
  std::lock_guard<std::mutex> lock(order_mu_);
  if (FencedRestoreId() != r.id) return;
  if (absl::Status s = UnfenceLocked(r.id); !s.ok()) {
    Note(absl::StrCat("cannot drop the fence of restore ", r.id, ": ", s.message()));
  }
}

std::string Agent::AppliedRestoreId() const {
  auto text = ReadFile(config_.node.data_dir + "/restore-id");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

absl::Status Agent::Restore(const peer::RestoreRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  // Applied already — unless this member lost its data since (the marker outlives a wiped data
  // dir): then it restores again, from the same backup, like the others did.
  if (AppliedRestoreId() == req.restore_id() && (!req.member() || HasMemberData())) {
    return absl::OkStatus();
  }
  auto fail = [this](absl::Status s) {
    restore_error_ = Msg(s);
    return s;
  };
  if (!store_) return fail(absl::FailedPreconditionError("no backup store is configured"));
  // Every member of one restored cluster must hold the same revisions: a node that cannot
  // raise them as ordered stays out, untouched (and is healed later by a join, which copies
  // them).
  if (req.member() && req.bump_revision() > 0 && config_.etcd.etcdutl.empty()) {
    return fail(absl::FailedPreconditionError(
        "this restore raises the revision, and etcd.etcdutl is not set on this node"));
  }
  const std::string cluster = config_.cluster.name;
  const fs::path work = fs::path(config_.node.data_dir) / "restore";
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  const std::string snapshot = (work / "snapshot.db").string();
  if (req.member()) {
    // Fetch and verify before anything is stopped: a bad backup leaves the node as it was.
    auto text = store_->Get(MetaKey(cluster, req.backup()));
    if (!text.ok()) return fail(Annotate(text.status(), "reading meta.json of " + req.backup()));
    auto meta = MetaFromJson(*text);
    if (!meta.ok()) return fail(meta.status());
    // Whoever chose this backup (the restore coordinator, or stewardctl restore-backup) has
    // checked its sha256 against meta.json. Here the size and zstd's frame checksum (xxh64 of
    // the content) guard the copy this node fetched; two more sha256 passes per member would
    // only cost time. etcdctl is then told to skip its own (slower) hash check.
    VerifyOptions opts;
    opts.hash_stored = false;
    opts.hash_content = false;
    opts.out_path = snapshot;
    if (absl::Status s = VerifyBackup(*store_, cluster, *meta, opts); !s.ok()) return fail(s);
  }
  held_ = true;
  if (absl::Status s = runner_->Stop(); !s.ok()) {
    held_ = false;
    return fail(s);
  }
  std::string aside;
  if (absl::Status s = SetDataAside("etcd-before-restore-" + req.restore_id(), &aside); !s.ok()) {
    held_ = false;
    return fail(s);
  }
  if (!aside.empty()) spdlog::warn("restore {}: previous data moved to {}", req.restore_id(), aside);
  auto put_back = [&] {
    if (!aside.empty()) fs::rename(aside, config_.EtcdDataDir(), ec);
    held_ = false;
  };
  if (req.member()) {
    std::string initial;
    EtcdLaunch l = BootstrapLaunch(config_);
    l.initial_cluster.clear();
    for (const auto& m : req.initial_cluster()) {
      if (!initial.empty()) initial += ",";
      initial += m.name() + "=" + m.peer_url();
      l.initial_cluster.emplace_back(m.name(), m.peer_url());
    }
    const std::string target = (work / "etcd").string();
    // etcdutl (etcd >= 3.5) can raise the revision past every one the lost cluster served, so
    // revisions are never reused; etcd 3.4's etcdctl cannot.
    const bool bump = req.bump_revision() > 0;
    std::vector<std::string> argv = {bump ? config_.etcd.etcdutl : config_.etcd.etcdctl,
                                     "snapshot", "restore", snapshot, "--skip-hash-check",
                                     "--name", config_.node.name, "--initial-cluster", initial,
                                     "--initial-cluster-token", req.token(),
                                     "--initial-advertise-peer-urls",
                                     config_.PeerUrl(config_.self()), "--data-dir", target};
    if (bump) {
      argv.push_back(absl::StrCat("--bump-revision=", req.bump_revision()));
      argv.push_back("--mark-compacted");
    }
    auto r = RunProcess(argv, {"ETCDCTL_API=3"}, std::chrono::minutes(30));
    if (!r.ok() || r->exit_code != 0) {
      put_back();
      return fail(absl::InternalError(absl::StrCat(
          argv[0], " snapshot restore failed: ", r.ok() ? r->output : Msg(r.status()))));
    }
    // The fence goes down before the restored data goes in: an agent that dies in between must
    // not start that data on the client port before its leases are revoked.
    const std::string fence_marker = config_.node.data_dir + "/fenced";
    if (req.fenced()) {
      if (absl::Status s = WriteFileAtomic(fence_marker, req.restore_id() + "\n"); !s.ok()) {
        put_back();
        return fail(s);
      }
    } else {
      std::error_code gone;
      fs::remove(fence_marker, gone);  // a fence of an earlier restore
    }
    fs::rename(target, config_.EtcdDataDir(), ec);
    if (ec) {
      std::error_code ignored;
      if (req.fenced()) fs::remove(fence_marker, ignored);
      put_back();
      return fail(absl::InternalError("installing the restored data dir: " + ec.message()));
    }
    fs::remove(snapshot, ec);
    l.token = req.token();
    l.new_cluster = true;
    if (req.fenced()) {
      // Only the agents may reach the restored cluster until its leases are revoked.
      l.client_url = config_.FenceUrl(config_.self());
    }
    if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/restore-id",
                                         req.restore_id() + "\n");
        !s.ok()) {
      held_ = false;  // the restored data is in place; run it, and let the order be retried
      RunEtcd(l, /*on_data=*/true);
      return fail(s);
    }
    MarkJoined();
    restore_error_.clear();
    held_ = false;
    spdlog::info("restore {}: backup {} restored; starting etcd{}", req.restore_id(), req.backup(),
                 req.fenced() ? " fenced (clients wait until its leases are revoked)" : "");
    RunEtcd(l, /*on_data=*/true);
    return absl::OkStatus();
  }
  // Not a member of the restored cluster: its old data is set aside; it waits as a spare.
  fs::remove(config_.node.data_dir + "/fenced", ec);
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/restore-id", req.restore_id() + "\n");
      !s.ok()) {
    return fail(s);
  }
  restore_error_.clear();
  held_ = false;
  return absl::OkStatus();
}

int AgentMain(int argc, char** argv) {
  CLI::App app{"steward: runs and supervises this node's etcd"};
  std::string config_path;
  bool version = false;
  app.add_option("--config", config_path, "the node's YAML config file");
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (version) {
    std::cout << "steward " << STEWARD_VERSION << "\n";
    return 0;
  }
  if (config_path.empty()) {
    std::cerr << "steward: --config FILE is required\n";
    return 2;
  }
  auto config = LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "steward: config error: " << config.status().message() << "\n";
    return 2;
  }
  auto logger = spdlog::stderr_color_mt("steward");
  logger->set_pattern(absl::StrCat("%Y-%m-%dT%H:%M:%S.%e [%^%l%$] [", config->node.name, "] %v"));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->node.log_level));

  // Signals are taken synchronously by this thread; every thread started after this inherits
  // the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Agent agent(std::move(*config));
  if (absl::Status s = agent.Start(); !s.ok()) {
    std::cerr << "steward: " << s.message() << "\n";
    return 2;
  }
  int sig = 0;
  sigwait(&set, &sig);
  if (sig == SIGHUP) {
    // Reload: restart the agent in place; etcd keeps serving and the new agent adopts it.
    spdlog::info("SIGHUP: restarting the agent (etcd keeps running)");
    agent.Shutdown(false);
    spdlog::default_logger()->flush();
    ::execv("/proc/self/exe", argv);
    std::cerr << "steward: re-exec failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  spdlog::info("signal {} received; stopping", sig);
  agent.Shutdown(true);
  return 0;
}

}  // namespace steward
