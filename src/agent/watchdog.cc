// The watchdog thread: HangWatch (node/hang_watch.h) over this agent's handles. Its probes
// are the agent's own clients with the watchdog's deadline, etcd's /metrics, and /proc.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "common/metrics.h"
#include "etcd/disk_latency.h"
#include "etcd/keys.h"
#include "httplib.h"
#include "spdlog/spdlog.h"

namespace steward {

using std::chrono::milliseconds;

namespace {

// The state letter of one /proc/.../stat file: after the command's closing parenthesis (the
// command itself may hold spaces and parentheses); '?' if unreadable.
char StatState(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return '?';
  return s[close + 2];
}

// The process's state for DecideHang: 'D' when any of its threads waits in uninterruptible I/O
// (etcd's main thread sleeps on a futex while the thread that fsyncs its WAL is stuck), else
// the main thread's.
char ProcessState(pid_t pid) {
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    if (StatState(task.path().string() + "/stat") == 'D') return 'D';
  }
  return StatState(absl::StrCat("/proc/", pid, "/stat"));
}

// etcd_disk_defrag_inflight's value in a /metrics text; nullopt without the metric.
std::optional<bool> DefragInflight(const std::string& metrics) {
  const std::string name = "\netcd_disk_defrag_inflight ";
  const size_t at = metrics.find(name);
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + name.size();
  const std::string value = metrics.substr(from, metrics.find('\n', from) - from);
  double v = 0;
  if (!absl::SimpleAtod(value, &v)) return std::nullopt;
  return v > 0;
}

}  // namespace

std::optional<std::string> Agent::EtcdMetricsText() {
  const NodeSpec& self = config_.self();
  const int port = config_.cluster.ports.metrics != 0 ? config_.cluster.ports.metrics
                                                      : config_.cluster.ports.client;
  auto get = [](auto& client) -> std::optional<std::string> {
    client.set_connection_timeout(2);
    client.set_read_timeout(2);
    auto r = client.Get("/metrics");
    if (!r || r->status != 200) return std::nullopt;
    return r->body;
  };
  if (config_.tls.enabled() && config_.cluster.ports.metrics == 0) {
    const TlsPaths tls = config_.Tls();
    httplib::SSLClient c(self.host, port, tls.client_cert, tls.client_key);
    c.set_ca_cert_path(tls.ca.c_str());
    return get(c);
  }
  httplib::Client c(self.host, port);
  return get(c);
}

void Agent::SampleDisk() {
  Metrics& m = Metrics::Global();
  std::optional<std::string> text = runner_->wanted() ? EtcdMetricsText() : std::nullopt;
  if (!text) {
    wal_fsync_before_.clear();
    backend_commit_before_.clear();
    disk_latency_ = DiskLatency{};
  } else {
    // Each figure is of the observations since the last one: a window with too few (an idle
    // member, or one so slow that it fsyncs rarely) grows until it has enough, and the last
    // figure stands meanwhile, so that a slow disk is not called fast for want of writes.
    auto update = [](Buckets now, Buckets& before, std::optional<double>& out) {
      if (before.empty()) {
        before = std::move(now);
        return;
      }
      if (auto q = QuantileBetween(before, now, 0.99, 5)) {
        out = q;
        before = std::move(now);
      }
    };
    update(ParseHistogram(*text, "etcd_disk_wal_fsync_duration_seconds"), wal_fsync_before_,
           disk_latency_.wal_fsync_p99_ms);
    update(ParseHistogram(*text, "etcd_disk_backend_commit_duration_seconds"),
           backend_commit_before_, disk_latency_.backend_commit_p99_ms);
  }
  const DiskLatency d = disk_latency_;
  node_->SetDiskLatency(d);
  m.Clear("steward_etcd_disk_p99_seconds");
  if (d.wal_fsync_p99_ms) {
    m.Set("steward_etcd_disk_p99_seconds", *d.wal_fsync_p99_ms / 1000, {{"op", "wal_fsync"}});
  }
  if (d.backend_commit_p99_ms) {
    m.Set("steward_etcd_disk_p99_seconds", *d.backend_commit_p99_ms / 1000,
          {{"op", "backend_commit"}});
  }
  const std::string slow = SlowDiskNote(d);
  m.Set("steward_etcd_disk_slow", slow.empty() ? 0 : 1);
  if (slow != disk_slow_said_ && (d.wal_fsync_p99_ms || d.backend_commit_p99_ms || slow.empty())) {
    if (!slow.empty()) {
      spdlog::warn("the disk under etcd on {} is slow: {}", config_.node.name, slow);
    } else if (!disk_slow_said_.empty()) {
      spdlog::info("the disk under etcd on {} is within etcd's guidance again", config_.node.name);
    }
    disk_slow_said_ = slow;
  }
}

HangProbes Agent::WatchProbes() {
  HangProbes p;
  const std::string read_key = StatusKey(config_.cluster.name);
  p.own_read = [this, read_key] { return watch_local_->Get(read_key).status(); };
  p.others_read = [this](bool* self_learner) -> absl::Status {
    if (watch_peers_->endpoints().empty()) {
      return absl::UnavailableError("no other member");
    }
    auto members = watch_peers_->LinearizableMemberList();
    if (!members.ok()) return members.status();
    const std::string peer_url = config_.PeerUrl(config_.self());
    for (const MemberInfo& m : *members) {
      for (const std::string& u : m.peer_urls) {
        if (u == peer_url) *self_learner = m.is_learner;
      }
    }
    return absl::OkStatus();
  };
  p.defragmenting = [this]() -> std::optional<bool> {
    std::optional<std::string> body = EtcdMetricsText();
    if (!body) return std::nullopt;
    return DefragInflight(*body);
  };
  p.process_state = [](pid_t pid) { return ProcessState(pid); };
  p.pid = [this] { return runner_->pid(); };
  p.wanted = [this] { return runner_->wanted(); };
  p.busy = [this] { return node_->HangBusy(); };
  p.restart = [this](pid_t pid, milliseconds grace) -> absl::Status {
    // SIGTERM first: etcd syncs and closes its files. A stopped process acts on it only once
    // continued. The runner (its supervisor) sees the exit and starts etcd again.
    ::kill(pid, SIGTERM);
    ::kill(pid, SIGCONT);
    auto gone = [&](milliseconds limit) {
      const auto deadline = std::chrono::steady_clock::now() + limit;
      while (std::chrono::steady_clock::now() < deadline) {
        if (runner_->pid() != pid) return true;
        if (!SleepFor(milliseconds(100))) return true;  // the agent stops
      }
      return false;
    };
    if (gone(grace)) return absl::OkStatus();
    spdlog::warn("etcd pid {} did not stop within {}ms; sending SIGKILL", pid, grace.count());
    ::kill(pid, SIGKILL);
    if (gone(milliseconds(5000))) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat("etcd pid ", pid, " survived SIGKILL (state ",
                                                    std::string(1, ProcessState(pid)), ")"));
  };
  p.record = [this](const std::string& action, const std::string& reason,
                    const std::string& result) {
    if (history_) history_->Append(0, action, reason, result);
  };
  return p;
}

void Agent::WatchdogLoop() {
  Metrics& m = Metrics::Global();
  int counted = 0;
  int round = 0;
  do {
    // The disk every ~16 s: enough fsyncs in between for a percentile, soon enough to name a
    // disk that became slow within the leader's one-minute hysteresis (reconcile/leader_move.h).
    if (round++ % 8 == 0) SampleDisk();
    if (!hang_watch_) continue;
    const HangDecision d = hang_watch_->Round();
    node_->SetHang(hang_watch_->verdict(), hang_watch_->restarts());
    m.Clear("steward_etcd_hung");
    if (d.action != HangAction::kHealthy && !hang_watch_->verdict().empty() && d.rule != "H2" &&
        d.rule != "H3" && d.rule != "H4") {
      m.Set("steward_etcd_hung", 1, {{"rule", d.rule}});
    } else {
      m.Set("steward_etcd_hung", 0);
    }
    if (const int n = hang_watch_->restarts(); n > counted) {
      m.Add("steward_etcd_hang_restarts_total", n - counted);
      counted = n;
    }
  } while (SleepFor(milliseconds(2000)));
}

}  // namespace steward
