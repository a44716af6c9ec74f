#include "common/metrics.h"

#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace steward {

namespace {

struct Descriptor {
  const char* name;
  const char* type;  // counter, gauge
  const char* help;
};

// Every metric the agent exports (docs/monitoring.md lists them with their meaning).
constexpr Descriptor kDescriptors[] = {
    {"steward_build_info", "gauge", "Always 1; the version label says which steward runs."},
    {"steward_is_leader", "gauge", "1 while this agent is the steward leader."},
    {"steward_etcd_running", "gauge", "1 while this node's etcd runs."},
    {"steward_etcd_restarts_total", "counter",
     "Times the agent restarted this node's etcd after it exited."},
    {"steward_etcd_hung", "gauge",
     "1 while this node's etcd runs but has not answered a linearizable read while the other "
     "members serve (node/hang_decision.h), labelled with the rule (H5 waiting out the bound, "
     "H6 stuck in I/O, H7 given up, H8 restarting)."},
    {"steward_etcd_hang_restarts_total", "counter",
     "Times the watchdog restarted this node's hung etcd in place (data kept)."},
    {"steward_etcd_disk_p99_seconds", "gauge",
     "This node's etcd's WAL fsync (op=wal_fsync) and backend commit (op=backend_commit) p99 "
     "over the last ~16 s, from etcd's own histograms (etcd/disk_latency.h)."},
    {"steward_etcd_disk_slow", "gauge",
     "1 while either p99 is past etcd's guidance (WAL fsync 10 ms, backend commit 25 ms)."},
    {"steward_hash_checks_total", "counter",
     "The steward leader's checks that every member holds the same data (etcd HashKV at one "
     "revision), by result: agree, differs, split, incomplete (etcd/agreement.h)."},
    {"steward_member_data_differs", "gauge",
     "Steward leader only, per member compared by the last hash check: 1 when its data differs "
     "from a majority's that agrees, 0 when it agrees."},
    {"steward_leader_moves_total", "counter",
     "Times the steward leader moved etcd leadership off a slow disk (reconcile/leader_move.h) "
     "or before the etcd leader's defragmentation, by result."},
    {"steward_member_db_free_percent", "gauge",
     "The free part of each member's backend file (dbSize - dbSizeInUse over dbSize), in %; "
     "defragmentation by rule starts at cluster.defrag_above_percent."},
    {"steward_etcd_advisory", "gauge",
     "Steward leader only: 1 per member and known problem of the etcd version it runs "
     "(docs/etcd-versions.md), labelled with the advisory and its effect (end_of_life, "
     "refuse_roll, warning)."},
    {"steward_etcd_membership_mismatch", "gauge",
     "1 while this member's DB members bucket disagrees with the live member list (etcd #19557; "
     "etcd 3.6 refuses such data), seen twice in a row 10 minutes apart; 0 when they agree."},
    {"steward_etcd_pending_restart", "gauge",
     "Steward leader only, per node whose etcd runs: 1 while the config gives etcd flags its "
     "running etcd was not started with (stewardctl status names them; stewardctl restart "
     "--pending rolls them out), else 0."},
    {"steward_node_data_free_bytes", "gauge",
     "Free bytes of the file system under each node's data dir, as its agent reports it."},
    {"steward_defrag_shortfall_bytes", "gauge",
     "Bytes missing under the data dir of the member whose defragmentation by rule is due "
     "(a defrag writes a copy of the data in use), while that holds it back."},
    {"steward_defrags_total", "counter",
     "Defragmentations by rule the steward leader ran (reconcile/defrag_rule.h), by result."},
    {"steward_defrag_last_seconds", "gauge",
     "How long each member's last defragmentation by rule took."},
    {"steward_member_raft_index", "gauge", "Raft index of this node's member."},
    {"steward_member_db_size_bytes", "gauge", "Backend size of this node's member."},
    {"steward_member_is_learner", "gauge", "1 while this node's member is a learner."},
    {"steward_member_has_leader", "gauge", "1 while this node's member knows an etcd leader."},
    {"steward_alarms_active", "gauge", "Alarms (NOSPACE, CORRUPT) this node's member reports."},
    {"steward_members_desired", "gauge", "Desired voting members (steward leader only)."},
    {"steward_members_voting", "gauge", "Voting members in the member list (steward leader only)."},
    {"steward_members_learner", "gauge", "Learners in the member list (steward leader only)."},
    {"steward_members_healthy", "gauge", "Healthy voting members (steward leader only)."},
    {"steward_reconcile_steps_total", "counter",
     "Reconciler steps taken by this agent as leader, by kind and result."},
    {"steward_backup_last_success_timestamp_seconds", "gauge",
     "Unix time of the last backup this agent took as leader."},
    {"steward_backup_duration_seconds", "gauge", "How long the last successful backup took."},
    {"steward_backup_size_bytes", "gauge", "Compressed size of the last successful backup."},
    {"steward_backup_failures_total", "counter", "Backups this agent tried and failed."},
    {"steward_delta_backup_revision", "gauge",
     "The revision up to which this agent, as leader, has stored delta backups."},
    {"steward_delta_backup_last_success_timestamp_seconds", "gauge",
     "Unix time of the last delta backup this agent stored as leader."},
    {"steward_delta_backup_failures_total", "counter",
     "Times this agent's delta backups stopped on an error and started again from the store."},
    {"steward_delta_backup_behind_revisions", "gauge",
     "Revisions etcd had past the last one this agent's delta backups read, as leader."},
    {"steward_restores_total", "counter",
     "Restores this agent finished as their coordinator, by kind (automatic, operator) and "
     "result (done, done-partly, cancelled, closed)."},
    {"steward_certificate_expiry_timestamp_seconds", "gauge",
     "Unix time when each of this node's TLS certificates expires."},
};

const Descriptor* Find(const std::string& name) {
  for (const auto& d : kDescriptors) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.17g", v);
}

}  // namespace

Metrics& Metrics::Global() {
  static Metrics* m = new Metrics();
  return *m;
}

void Metrics::Set(const std::string& name, double value, const MetricLabels& labels) {
  assert(Find(name) != nullptr && "undeclared metric");
  if (Find(name) == nullptr) return;
  MutexLock lock(&mu_);
  series_[name][labels] = value;
}

void Metrics::Add(const std::string& name, double delta, const MetricLabels& labels) {
  assert(Find(name) != nullptr && "undeclared metric");
  if (Find(name) == nullptr) return;
  MutexLock lock(&mu_);
  series_[name][labels] += delta;
}

void Metrics::Clear(const std::string& name) {
  MutexLock lock(&mu_);
  series_.erase(name);
}

double Metrics::Value(const std::string& name, const MetricLabels& labels, double missing) const {
  MutexLock lock(&mu_);
  auto it = series_.find(name);
  if (it == series_.end()) return missing;
  auto s = it->second.find(labels);
  return s == it->second.end() ? missing : s->second;
}

std::string Metrics::Render() const {
  MutexLock lock(&mu_);
  std::string out;
  for (const auto& d : kDescriptors) {
    auto it = series_.find(d.name);
    if (it == series_.end() || it->second.empty()) continue;
    absl::StrAppend(&out, "# HELP ", d.name, " ", d.help, "\n# TYPE ", d.name, " ", d.type, "\n");
    for (const auto& [labels, value] : it->second) {
      out += d.name;
      if (!labels.empty()) {
        out += "{";
        for (size_t i = 0; i < labels.size(); ++i) {
          absl::StrAppend(&out, i ? "," : "", labels[i].first, "=\"", Escape(labels[i].second),
                          "\"");
        }
        out += "}";
      }
      absl::StrAppend(&out, " ", Number(value), "\n");
    }
  }
  return out;
}

}  // namespace steward
