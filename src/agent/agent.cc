#include "agent/agent.h"

#include <pthread.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin/readiness.h"
#include "admin/status_page.h"
#include "agent/control_wiring.h"
#include "backup/open.h"
#include "common/files.h"
#include "common/memory_trim.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "etcd/flags.h"
#include "etcd/version.h"
#include "pki/ca_rotation.h"
#include "pki/node_certs.h"
#include "pki/pki.h"
#include "runner/process_runner.h"
#include "runner/static_pod_runner.h"
#include "spdlog/spdlog.h"

namespace steward {
using std::chrono::milliseconds;

namespace {

// The static-pod runner's fixed part of the Pod: everything but etcd's flags.
StaticPodRunner::Options StaticPodOptions(const Config& c,
                                          std::function<bool(std::string*)> may_restart) {
  StaticPodRunner::Options o;
  o.manifest_dir = c.runner.manifest_dir;
  o.data_dir = c.EtcdDataDir();
  o.stop_timeout = c.etcd.stop_timeout;
  o.may_restart = std::move(may_restart);
  o.pod.node = c.node.name;
  o.pod.image = c.runner.image;
  o.pod.node_dir = c.node.data_dir;
  o.pod.probe_host = c.self().host;
  o.pod.probe_port = c.cluster.ports.client;
  o.pod.termination_grace_seconds =
      static_cast<int>(
          std::chrono::duration_cast<std::chrono::seconds>(c.etcd.stop_timeout).count()) +
      1;
  o.pod.base_spec = c.runner.pod_spec;
  if (c.tls.enabled()) {
    // TLS files outside the node dir (tls.mode: files) are mounted read-only.
    const TlsPaths t = c.Tls();
    std::set<std::string> dirs;
    for (const std::string& f : {t.ca, t.server_cert, t.server_key, t.peer_cert, t.peer_key}) {
      const std::string dir = std::filesystem::path(f).parent_path().string();
      if (dir.rfind(c.node.data_dir, 0) != 0) dirs.insert(dir);
    }
    o.pod.read_only_dirs.assign(dirs.begin(), dirs.end());
  }
  return o;
}
// EV1's inputs: what each binary this node may run says it is. Static pods run images, whose
// tag must name the version (a kubelet runs them; the agent cannot).
std::vector<EtcdBinary> ProbeEtcdBinaries(const Config& c) {
  std::vector<std::pair<std::string, std::string>> all;
  all.emplace_back("", c.runner.kind == "static-pod" ? c.runner.image : c.etcd.binary);
  for (const auto& [version, path] : c.etcd.versions) all.emplace_back(version, path);
  std::vector<EtcdBinary> out;
  for (const auto& [key, path] : all) {
    EtcdBinary b{key, path, "", ""};
    if (c.runner.kind == "static-pod") {
      b.reported = VersionFromImage(path);
      if (b.reported.empty()) b.error = "the image's tag names no etcd version";
    } else if (::access(path.c_str(), X_OK) != 0) {
      b.error = absl::StrCat("not executable: ", std::strerror(errno));
    } else {
      auto r = RunProcess({path, "--version"}, {}, std::chrono::seconds(10));
      if (!r.ok()) {
        b.error = std::string(r.status().message());
      } else {
        b.reported = VersionFromOutput(r->output);
        if (b.reported.empty()) {
          std::string said = r->output.substr(0, r->output.find('\n')).substr(0, 120);
          b.error = absl::StrCat("`--version` exited with status ", r->exit_code,
                                 said.empty() ? " and said nothing" : absl::StrCat(": ", said),
                                 " (not etcd?)");
        }
      }
    }
    if (b.reported.empty()) {
      spdlog::warn("etcd {}{}: {}", key.empty() ? "binary " : absl::StrCat("version ", key, ": "),
                   path, b.error);
    } else if (!key.empty() && b.reported != key) {
      spdlog::warn("etcd.versions[{}] ({}) is etcd {}: no roll to {} uses it", key, path,
                   b.reported, key);
    }
    out.push_back(std::move(b));
  }
  return out;
}
}  // namespace

Agent::Agent(Config config) : config_(std::move(config)) {
  disk_ = std::make_unique<FsNodeDisk>(config_.node.data_dir, config_.EtcdDataDir(),
                                       [this] { return stopping_flag_.load(); });
  ProcessRunner::Options o;
  o.binary = config_.etcd.binary;
  o.data_dir = config_.EtcdDataDir();
  o.pid_path = config_.EtcdPidPath();
  o.log_path = config_.EtcdLogPath();
  o.log_rotation = {config_.etcd.log_max_size, config_.etcd.log_keep};
  o.stop_timeout = config_.etcd.stop_timeout;
  o.backoff_min = config_.etcd.restart_backoff_min;
  o.backoff_max = config_.etcd.restart_backoff_max;
  // D1 in the runner too: it restarts etcd on its own after an exit, maybe while the control
  // loop is busy (a restore pass), and must never restart it on a data dir that vanished.
  // (node_ exists before the runner is first asked to run etcd.)
  o.may_restart = [this](std::string* why) { return node_ == nullptr || node_->MayRestart(why); };
  // A node that switched versions (a rolling upgrade) runs that version from then on.
  const std::string version = disk_->Read(Marker::kEtcdVersion);
  const auto chosen = config_.etcd.versions.find(version);
  if (config_.runner.kind == "static-pod") {
    StaticPodRunner::Options so = StaticPodOptions(config_, o.may_restart);
    if (chosen != config_.etcd.versions.end()) so.pod.image = chosen->second;
    runner_ = std::make_unique<StaticPodRunner>(so);
  } else {
    if (chosen != config_.etcd.versions.end()) o.binary = chosen->second;
    runner_ = std::make_unique<ProcessRunner>(o);
  }
  NodeDisk* disk = disk_.get();
  terms_ = std::make_unique<TermGuard>(
      [disk] { return disk->Read(Marker::kLeaderTerm); },
      [disk](const std::string& text) { return disk->Write(Marker::kLeaderTerm, text); });
}

// Wire's parts, in the order they run: each one uses what the ones before it built.

// The etcd clients, the other agents' clients and the backup store.
absl::Status Agent::WireClients(const std::shared_ptr<grpc::ChannelCredentials>& client_creds) {
  // The other members: the other nodes' etcd, and while adopting the adopted cluster's.
  std::vector<std::string> others;
  for (const auto& url : config_.ClusterClientUrls()) {
    if (url != config_.ClientUrl(config_.self())) others.push_back(url);
  }
  EtcdClient::Options co;
  co.credentials = client_creds;
  co.timeout = milliseconds(1000);
  co.low_memory_snapshots = config_.backup.low_memory_stream;
  if (config_.cluster.adopt.enabled()) {
    auto per_endpoint = ClusterCredentials(config_, client_creds);
    if (!per_endpoint.ok()) return per_endpoint.status();
    co.credentials_for = *per_endpoint;
  }
  // One connection per member for all three clients: an idle agent's cost is mostly its
  // connections' upkeep (docs/architecture.md, "What an idle agent costs").
  co.channels = EtcdClient::NewChannelPool();
  peers_client_ = std::make_unique<EtcdClient>(others, co);
  local_client_ =
      std::make_unique<EtcdClient>(std::vector<std::string>{config_.ClientUrl(config_.self())}, co);
  co.timeout = milliseconds(2000);
  cluster_client_ = std::make_unique<EtcdClient>(config_.ClusterClientUrls(), co);
  // The watchdog's probes: a healthy member answers a linearizable read in milliseconds, and
  // a slow disk in well under this; only a member that does not answer for the whole
  // etcd.hang_restart_after is restarted.
  co.timeout = milliseconds(3000);
  watch_local_ =
      std::make_unique<EtcdClient>(std::vector<std::string>{config_.ClientUrl(config_.self())}, co);
  watch_peers_ = std::make_unique<EtcdClient>(others, co);
  for (int i = 0; i < config_.cluster.size; ++i) {
    const NodeSpec& n = config_.cluster.nodes[static_cast<size_t>(i)];
    if (n.name == config_.node.name) continue;
    initial_agents_[n.name] = std::make_unique<PeerClient>(config_.AgentAddress(n), client_creds);
  }
  for (const NodeSpec& n : config_.cluster.nodes) {
    if (n.name == config_.node.name) continue;
    agents_[n.name] = std::make_unique<PeerClient>(config_.AgentAddress(n), client_creds);
  }
  if (auto store = OpenStore(config_.backup); store.ok()) {
    store_ = std::move(*store);
  } else {
    return Annotate(store.status(), "backup.store");
  }
  return absl::OkStatus();
}

// This node: its disk, runner and clients, as LocalNode sees them.
LocalNodeEnv Agent::NodeEnv() {
  LocalNodeEnv node_env;
  node_env.disk = disk_.get();
  node_env.runner = runner_.get();
  node_env.peers = peers_client_.get();
  node_env.local = local_client_.get();
  for (auto& [name, client] : initial_agents_) node_env.initial_agents[name] = client.get();
  node_env.store = store_.get();
  node_env.clock = Clock::Real();
  node_env.parallel = true;
  node_env.etcd_version = [this] { return RunningEtcdVersion(); };
  node_env.binaries = [this] { return binaries_; };
  node_env.data_free_bytes = [dir = config_.node.data_dir]() -> int64_t {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) return -1;
    return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  };
  node_env.join_watch = milliseconds(3000);
  const std::string etcd_log = config_.EtcdLogPath();
  node_env.etcd_log_size = [etcd_log]() -> uint64_t {
    std::error_code ec;
    auto size = std::filesystem::file_size(etcd_log, ec);
    return ec ? 0 : size;
  };
  node_env.etcd_log_since = [etcd_log](uint64_t offset) -> std::string {
    // The tail (at most 256 KiB) from `offset` on; all of it when the log was rotated since.
    constexpr uint64_t kMax = 256 << 10;
    std::ifstream in(etcd_log, std::ios::binary);
    if (!in) return "";
    in.seekg(0, std::ios::end);
    const uint64_t size = static_cast<uint64_t>(in.tellg());
    uint64_t from = offset <= size ? offset : 0;
    if (size - from > kMax) from = size - kMax;
    std::string text(size - from, '\0');
    in.seekg(static_cast<std::streamoff>(from));
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    return text;
  };
  node_env.record = [this](const std::string& action, const std::string& reason,
                           const std::string& result) {
    if (history_) history_->Append(0, action, reason, result);
  };
  return node_env;
}

// The node side, the leadership, the restore coordinator and the reconciler, linked as the
// simulation links them (control_wiring.h).
void Agent::WireControlParts(const std::shared_ptr<grpc::ChannelCredentials>& client_creds) {
  if (store_) {
    backups_ = std::make_unique<BackupScheduler>(config_, store_.get(), cluster_client_.get());
  }
  ControlSeams seams;
  seams.config = &config_;
  seams.cluster = cluster_client_.get();
  seams.store = store_.get();
  seams.backups = backups_.get();
  seams.node = NodeEnv();
  seams.restore_env = RealControlEnv(config_, client_creds, canceller_);
  seams.restore_env.stopping = [this] { return Stopping(); };
  seams.reconcile_env = RealControlEnv(config_, client_creds, canceller_);
  // The leader's own node is asked in-process, with its term guard's view.
  seams.reconcile_env.dial_agent =
      [this, dial = seams.reconcile_env.dial_agent](const NodeSpec& n) -> std::unique_ptr<PeerApi> {
    if (n.name != config_.node.name) return dial(n);
    return std::make_unique<SelfPeer>(dial(n), [this] { return StateWithTerms(*node_, *terms_); });
  };
  ControlParts parts = WireControl(std::move(seams));
  node_ = std::move(parts.node);
  leadership_ = std::move(parts.leadership);
  restorer_ = std::move(parts.restorer);
  reconciler_ = std::move(parts.reconciler);
}

// The peer API and the history it records orders in.
void Agent::WireServer(const std::shared_ptr<grpc::ServerCredentials>& server_creds) {
  server_ = std::make_unique<PeerServer>(
      config_.AgentAddress(config_.self()), node_.get(), terms_.get(), server_creds,
      config_.tls.enabled() ? std::optional<std::string>(config_.cluster.name) : std::nullopt);
  server_->OnNudge([this](const std::string&) { WakeReconciler(); });
  server_->OnRenewCertificates([this] { return RequestRenewal(); });
  server_->OnSetTrust([this](const peer::SetTrustRequest& req) { return SetTrust(req); });
  history_ =
      std::make_unique<History>(cluster_client_.get(), EventsPrefix(config_), config_.node.name);
  server_->OnOrder(
      [this](const std::string& what, const peer::OrderHeader& h, const absl::Status& result) {
        if (what == "join") return;  // LocalNode records its joins: started, joined, refused (once)
        Event e;
        e.term = h.term();
        e.action = what;
        e.reason = absl::StrCat("order from ", h.leader());
        e.result = result.ok() ? "ok" : absl::StrCat("failed: ", result.message());
        history_->Append(std::move(e));
      });
}

// Drills and delta backups (with a backup store).
void Agent::WireBackups() {
  if (config_.backup.drill_interval.count() > 0) WireDrills();
  if (config_.backup.delta_interval.count() > 0) {
    deltas_ = std::make_unique<DeltaWriter>(config_, store_.get(), cluster_client_.get(),
                                            [this] { return leading_.load(); });
  }
}

// The admin port: health, readiness, metrics and the status page.
void Agent::WireAdmin() {
  AdminHandlers admin;
  admin.not_alive = [this] { return NotAlive(); };
  admin.not_ready = [this] { return NotReady(); };
  admin.not_leader = [this]() -> std::optional<std::string> {
    // The cached view: Leadership's own accessors wait while a tick talks to etcd.
    if (leading_.load()) return std::nullopt;
    const std::string leader = SeenLeader();
    return absl::StrCat("not the steward leader (the leader is ",
                        leader.empty() ? "unknown" : leader, ")");
  };
  admin.leader_detail = [this]() -> std::string {
    return deltas_ ? absl::StrCat("delta backups: ", deltas_->status(), "\n") : "";
  };
  admin.metrics = [this] { return ScrapeMetrics(); };
  // The status page's document: the cluster's view through this agent's etcd client.
  // The page shows the last 20 events of the history.
  auto recent_events = [this]() -> nlohmann::json {
    nlohmann::json out = nlohmann::json::array();
    auto events = ReadHistory(*cluster_client_, EventsPrefix(config_), 0, 20);
    if (events.ok()) {
      for (const Event& e : *events) out.push_back(EventToJson(e));
    }
    return out;
  };
  auto status_page = std::make_shared<StatusSource>(config_, cluster_client_.get(), store_.get(),
                                                    StatusSource::Options(), recent_events);
  admin.status_json = [status_page] { return status_page->Json(); };
  admin_ = std::make_unique<AdminServer>(
      config_.self().host, config_.cluster.ports.admin, std::move(admin),
      config_.tls.enabled() ? std::optional<TlsPaths>(config_.Tls()) : std::nullopt);
}

// The leader's keepers: space and (auth.mode) auth.
void Agent::WireKeepers() {
  // Re-checked right before it acts: still the leader, or (S6) still no leader and no
  // lower-named agent answering.
  space_ = std::make_unique<SpaceKeeper>(
      cluster_client_.get(), history_.get(),
      [this] {
        return leadership_->leading() ? leadership_->Confirm() : ActsForSpaceWithoutLeader();
      },
      config_.node.name);
  if (config_.auth.managed()) {
    auth_ = std::make_unique<AuthKeeper>(
        cluster_client_.get(), history_.get(), config_.auth.mode, config_.auth.admin_users,
        [this] {
          // Reported names first; with issued certificates a silent agent's name is known
          // anyway (node_certs.cc issues "<node>-client"); with the operator's files it is not.
          std::map<std::string, std::string> users;
          const auto& reported = reconciler_->node_users();
          for (const NodeSpec& n : config_.cluster.nodes) {
            auto it = reported.find(n.name);
            std::string u = it != reported.end() ? it->second : "";
            if (u.empty() && config_.tls.mode == "issued") u = ClientCommonName(n.name);
            users[n.name] = u;
          }
          return users;
        },
        [this] { return leadership_->Confirm(); }, AuthKeeper::Options());
  }
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
  if (absl::Status s = WireClients(client_creds); !s.ok()) return s;
  WireControlParts(client_creds);
  WireServer(server_creds);
  if (restorer_) restorer_->SetHistory(history_.get());
  reconciler_->SetHistory(history_.get());
  if (store_) WireBackups();
  WireAdmin();
  WireKeepers();
  return absl::OkStatus();
}

Agent::~Agent() {
  Shutdown(false);
  // The runner's supervisor thread calls back into this agent (may_restart): join it while the
  // members it reads still exist.
  runner_.reset();
}

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
  // (Configured by etcd's variables, the agent has read them: nothing to say.)
  if (auto dropped = DroppedEtcdVariables(); !dropped.empty() && config_.source != "environment") {
    spdlog::warn(
        "not passed to etcd or etcdctl: {} (etcd is configured by the flags the agent "
        "renders from its config; etcd >= 3.4 exits when a variable and a flag both "
        "set a value)",
        absl::StrJoin(dropped, ", "));
  }
  if (!config_.tls.enabled()) {
    spdlog::warn(
        "TLS is OFF (tls.mode: off): etcd and the agent API accept anyone who can "
        "reach them");
  } else {
    spdlog::info("TLS: mode {}, client and peer certificate authentication on", config_.tls.mode);
  }
  if (const std::string v = disk_->Read(Marker::kEtcdVersion);
      !v.empty() && !config_.etcd.versions.count(v)) {
    // Starting the default binary instead could be a downgrade etcd does not support.
    return absl::FailedPreconditionError(
        absl::StrCat("this node last switched etcd to version ", v, " (", config_.node.data_dir,
                     "/etcd-version), and etcd.versions no longer lists it: add it back"));
  }
  binaries_ = ProbeEtcdBinaries(config_);
  if (absl::Status s = Wire(); !s.ok()) return absl::FailedPreconditionError(Msg(s));
  if (store_) {
    spdlog::info("backups: {} every {}s", store_->Describe(),
                 std::chrono::duration_cast<std::chrono::seconds>(config_.backup.interval).count());
  } else {
    spdlog::warn("no backup.store configured: this cluster is not backed up");
  }
  if (absl::Status s = server_->Start(); !s.ok()) return s;
  if (absl::Status s = admin_->Start(); !s.ok()) return s;
  if (runner_->Adopt()) node_->AdoptRunning();
  // Named, so a stack dump or `top -H` says which loop is which.
  control_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-control");
    ControlLoop();
  });
  leadership_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-leadership");
    LeadershipLoop();
  });
  reconcile_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-reconcile");
    ReconcileLoop();
  });
  if (config_.etcd.hang_restart_after.count() > 0) {
    hang_watch_ = std::make_unique<HangWatch>(config_.node.name, config_.etcd.hang_restart_after,
                                              milliseconds(5000), Clock::Real(), WatchProbes());
  }
  // The hang watch (when on) and the disk's figures.
  watchdog_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-watchdog");
    WatchdogLoop();
  });
  if (deltas_) {
    delta_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "st-deltas");
      deltas_->Run();
    });
  }
  return absl::OkStatus();
}

absl::Status Agent::SetTrust(const peer::SetTrustRequest& req) {
  MutexLock lock(&trust_mu_);  // one step at a time
  const std::string trust_file = config_.Tls().ca;
  const std::string before = ReadFile(trust_file).value_or("");
  if (absl::Status s = StageCaRotation(config_, req.rotation_id(), req.phase(), req.ca_cert_pem(),
                                       req.ca_key_pem());
      !s.ok()) {
    return s;
  }
  auto issued = RenewNodeTls(config_, std::chrono::system_clock::now());
  if (!issued.ok()) return Annotate(issued.status(), "issuing this node's certificates");
  const bool trust_changed = ReadFile(trust_file).value_or("") != before;
  const std::string what = absl::StrCat("phase ", req.phase(), " of CA rotation ",
                                        req.rotation_id(), " (asked by ", req.by(), ")");
  if (trust_changed) {
    // etcd reads its trusted CA only when it starts (docs/tls.md).
    if (absl::Status s = node_->RestartEtcd(absl::StrCat("its trusted CAs changed: ", what));
        !s.ok()) {
      return s;
    }
  }
  if (history_) {
    history_->Append(0, "ca-rotation", what,
                     trust_changed
                         ? (*issued ? "etcd restarted, certificates reissued" : "etcd restarted")
                         : (*issued ? "certificates reissued" : "nothing to change"));
  }
  if (trust_changed || *issued) {
    // The agent's own channels hold what it trusted and presented: it restarts itself in
    // place (etcd keeps running), once the reply is on its way.
    spdlog::info("{}: restarting the agent to load its new trust and certificates", what);
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(::getpid(), SIGHUP);
    }).detach();
  }
  return absl::OkStatus();
}

absl::Status Agent::RequestRenewal() {
  if (config_.tls.mode != "issued") {
    return absl::FailedPreconditionError(absl::StrCat(
        "tls.mode is ", config_.tls.mode, " on node ", config_.node.name,
        ": only issued certificates are renewed by the agent (replace the files, then reload)"));
  }
  renew_requested_ = true;
  control_wake_.Wake();
  return absl::OkStatus();
}

void Agent::WireDrills() {
  drills_ = std::make_unique<DrillScheduler>(config_, store_.get(), cluster_client_.get());
  drills_->SetOnDone([this](const DrillResult& r) {
    Event e;
    e.action = "drill";
    e.reason = r.backup.empty() ? std::string("restore drill")
                                : absl::StrCat("restore drill of backup ", r.backup, " (revision ",
                                               r.revision, ")");
    e.result = r.passed    ? absl::StrCat("ok: ", r.compared)
               : r.skipped ? r.failure
                           : absl::StrCat("failed: ", r.failure);
    history_->Append(std::move(e));
  });
  backups_->SetDrills(drills_.get());
}

bool Agent::Stopping() { return stopping_flag_.load(); }

std::string Agent::RunningEtcdVersion() {
  // The version a rolling upgrade (or a join, EV1) switched this node to; else etcd.binary's.
  if (std::string v = disk_->Read(Marker::kEtcdVersion); !v.empty()) return v;
  for (const auto& b : binaries_) {
    if (b.key.empty() && !b.reported.empty()) return b.reported;
  }
  // A static pod's image whose tag names no version: the etcd.versions entry naming it.
  for (const auto& [version, image] : config_.etcd.versions) {
    if (config_.runner.kind != "process" && image == config_.runner.image) return version;
  }
  return "";
}

void Agent::Shutdown(bool stop_etcd) {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Nothing long is waited out: a restore tool is killed (the disk's `cancelled`), orders in
  // flight to other agents are cancelled, and waits for a restored cluster end (env.stopping).
  // Each leaves its step to be retried by the next pass or agent.
  stopping_flag_ = true;
  canceller_->Cancel();
  if (leadership_) leadership_->Interrupt();
  cv_.NotifyAll();
  control_wake_.Wake();
  if (deltas_) deltas_->Stop();
  if (delta_thread_.joinable()) delta_thread_.join();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  if (reconcile_thread_.joinable()) reconcile_thread_.join();
  if (leadership_thread_.joinable()) leadership_thread_.join();
  if (control_.joinable()) control_.join();
  if (stop_etcd && leadership_) {
    // Hand leadership over at once rather than after the lease TTL.
    leadership_->Resign();
  }
  if (server_) server_->Shutdown();
  if (admin_) admin_->Shutdown();
  if (history_) history_->Stop();
  if (stop_etcd) {
    if (absl::Status s = runner_->Stop(); !s.ok()) spdlog::error("stopping etcd: {}", s.message());
  }
}

}  // namespace steward
