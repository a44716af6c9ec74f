#include "ctl/status.h"

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "etcd/keys.h"
#include "reconcile/maintenance.h"

namespace steward {

std::string HumanBytes(int64_t n) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrCat(n, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

ClusterView CollectStatus(EtcdClient& client, std::chrono::milliseconds timeout,
                          const std::vector<NodeRow>& nodes, bool linearizable) {
  ClusterView view;
  uint64_t list_cluster = 0;
  auto members = linearizable ? client.LinearizableMemberList(&list_cluster)
                              : client.MemberList(&list_cluster);
  if (!members.ok()) {
    view.error = std::string(members.status().message());
    return view;
  }
  view.reachable = true;
  view.list_cluster_id = list_cluster;
  std::vector<std::future<MemberRow>> futures;
  for (const auto& m : *members) {
    futures.push_back(std::async(std::launch::async, [&client, m, timeout] {
      MemberRow row;
      row.member = m;
      if (m.client_urls.empty()) {
        row.role = "not started";
        row.error = "member has not started yet";
        return row;
      }
      std::string errors;
      for (const auto& url : m.client_urls) {
        auto st = client.Status(url, timeout);
        if (st.ok()) {
          row.status = *st;
          break;
        }
        errors = std::string(st.status().message());
      }
      if (!row.status) {
        row.role = "unreachable";
        row.error = errors;
        return row;
      }
      const MemberStatus& s = *row.status;
      if (s.is_learner || m.is_learner) {
        row.role = "learner";
      } else if (s.leader != 0 && s.leader == s.member_id) {
        row.role = "leader";
      } else {
        row.role = "follower";
      }
      // An alarm (NOSPACE, CORRUPT) is reported by every member; it is not a dead member.
      const std::vector<std::string> failures = FailureErrors(s);
      row.alarms = AlarmErrors(s);
      row.healthy = failures.empty() && s.leader != 0;
      if (!failures.empty()) row.error = absl::StrJoin(failures, "; ");
      if (s.leader == 0) row.error = "no leader";
      return row;
    }));
  }
  for (auto& f : futures) view.members.push_back(f.get());
  std::sort(view.members.begin(), view.members.end(), [](const MemberRow& a, const MemberRow& b) {
    return a.member.name < b.member.name;
  });
  bool all_healthy = !view.members.empty();
  for (const auto& r : view.members) {
    if (r.status) {
      view.cluster_id = r.status->cluster_id;
      if (r.status->leader != 0) view.leader_id = r.status->leader;
    }
    if (!r.healthy) all_healthy = false;
    for (const auto& a : r.alarms) {
      view.alarms.push_back(absl::StrCat(a, " on ", r.member.name.empty() ? HexId(r.member.id)
                                                                         : r.member.name));
    }
    if (!r.member.is_learner) {
      ++view.voters;
      if (r.healthy) ++view.healthy_voters;
    }
  }
  view.quorum = view.voters > 0 && view.healthy_voters >= view.voters / 2 + 1;
  view.healthy = all_healthy && view.leader_id != 0 && view.alarms.empty();
  for (const auto& n : nodes) {
    bool found = false;
    for (const auto& r : view.members) {
      if (std::find(r.member.peer_urls.begin(), r.member.peer_urls.end(), n.peer_url) !=
          r.member.peer_urls.end()) {
        found = true;
      }
    }
    if (!found) view.non_members.push_back(n);
  }
  return view;
}

std::string RenderStatusTable(const ClusterView& v) {
  if (!v.reachable) return absl::StrCat("cluster unreachable: ", v.error, "\n");
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAME", "ID", "PEER URL", "CLIENT URL", "ROLE", "HEALTHY", "RAFT INDEX",
                  "DB SIZE", "VERSION"});
  for (const auto& r : v.members) {
    std::vector<std::string> row = {
        r.member.name.empty() ? "(unstarted)" : r.member.name,
        HexId(r.member.id),
        absl::StrJoin(r.member.peer_urls, ","),
        r.member.client_urls.empty() ? "-" : absl::StrJoin(r.member.client_urls, ","),
        r.role,
        r.healthy ? "true" : "false",
        r.status ? absl::StrCat(r.status->raft_index) : "-",
        r.status ? HumanBytes(r.status->db_size) : "-",
        r.status ? r.status->version : "-"};
    rows.push_back(row);
  }
  for (const auto& n : v.non_members) {
    rows.push_back({n.name, "-", n.peer_url, "-", "not a member", "-", "-", "-", "-"});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  out += absl::StrCat("\ncluster ", v.cluster_id ? HexId(v.cluster_id) : "?", ": ",
                      v.healthy ? "healthy" : "NOT healthy", ", ", v.members.size(),
                      " member(s), leader ", v.leader_id ? HexId(v.leader_id) : "none", "\n");
  for (const auto& r : v.members) {
    if (!r.member.client_urls.empty() && r.member.client_urls.front().rfind("http://", 0) == 0) {
      out += "TLS IS OFF: etcd serves plain http; anyone who can reach it can read and write\n";
      break;
    }
  }
  for (const auto& a : v.alarms) {
    out += absl::StrCat("ALARM ", a,
                        a.rfind("NOSPACE", 0) == 0
                            ? ": writes are refused until the space is freed (compact, "
                              "defragment) and the alarm is disarmed\n"
                            : "\n");
  }
  if (!v.quorum) {
    out += absl::StrCat("QUORUM LOST: ", v.healthy_voters, " of ", v.voters,
                        " voting members healthy. Agents keep restarting members that have "
                        "data; nothing is wiped.\n");
  }
  for (const auto& r : v.members) {
    if (!r.error.empty()) {
      out += absl::StrCat("  ", r.member.name.empty() ? HexId(r.member.id) : r.member.name, ": ",
                          r.error, "\n");
    }
  }
  return out;
}

nlohmann::json ReadStewardState(EtcdClient& client, const Config& config) {
  // Each read waits out the client's deadline when etcd does not answer: side by side, the
  // whole takes one deadline, not four (the status page asks every few seconds).
  auto read = [&client](std::string key) {
    return std::async(std::launch::async, [&client, key] { return client.Get(key); });
  };
  auto leader = read(LeaderKey(config));
  auto reconciler = read(StatusKey(config));
  auto backups = read(BackupStatusKey(config));
  auto spec = read(SpecKey(config));
  auto maintenance = read(MaintenanceKey(config.cluster.name));
  nlohmann::json j = nlohmann::json::object();
  if (auto got = leader.get(); got.ok() && got->has_value()) j["leader"] = **got;
  const std::pair<const char*, std::future<absl::StatusOr<std::optional<std::string>>>*> parsed[] =
      {{"reconciler", &reconciler}, {"backups", &backups}, {"spec", &spec}};
  for (const auto& [name, future] : parsed) {
    auto got = future->get();
    if (!got.ok() || !got->has_value()) continue;
    auto value = nlohmann::json::parse(**got, nullptr, false);
    if (!value.is_discarded()) j[name] = value;
  }
  // Pauses (with whether each is in force now) and removed nodes.
  if (auto got = maintenance.get(); got.ok() && got->has_value()) {
    if (auto m = MaintenanceFromJson(**got); m.ok()) {
      nlohmann::json doc = MaintenanceToJson(*m);
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      for (auto& p : doc["pauses"]) p["active"] = now < p.value("until", int64_t{0});
      j["maintenance"] = doc;
    } else {
      j["maintenance"] = {{"error", std::string(m.status().message())}};
    }
  }
  return j;
}

namespace {

// "paused:" and "removed:" lines for `status` and `get`.
std::string DescribeMaintenance(const nlohmann::json& m, int64_t now) {
  std::string out;
  if (m.contains("error")) {
    return "\nmaintenance:    unreadable: " + m.value("error", std::string());
  }
  for (const auto& p : m.value("pauses", nlohmann::json::array())) {
    const std::string node = p.value("node", std::string());
    const int64_t until = p.value("until", int64_t{0});
    out += absl::StrCat("\npaused:         ", node.empty() ? "the whole cluster" : node,
                        " until ", UtcSeconds(until),
                        now < until ? absl::StrCat(" (", (until - now + 59) / 60, "m left)")
                                    : std::string(" (ended; ignored)"),
                        " by ", p.value("by", std::string("?")), ": ",
                        p.value("reason", std::string()));
  }
  for (const auto& r : m.value("removed", nlohmann::json::array())) {
    out += absl::StrCat("\nremoved:        ", r.value("node", std::string("?")), " since ",
                        UtcSeconds(r.value("since", int64_t{0})), " by ",
                        r.value("by", std::string("?")), ": ", r.value("reason", std::string()),
                        r.value("member_id", std::string("0")) == "0"
                            ? std::string()
                            : " (member " + r.value("member_id", std::string()) + ")",
                        "; stewardctl readd-node adds it back");
  }
  return out;
}

}  // namespace

std::string DescribeStewardState(const nlohmann::json& j, int64_t now) {
  std::string out;
  out += "steward leader: " + (j.contains("leader") ? j["leader"].get<std::string>()
                                                     : "none (no agent holds the leader lease)");
  if (j.contains("reconciler")) {
    const auto& r = j["reconciler"];
    const long age = static_cast<long>(now) - r.value("at", 0L);
    // The leader rewrites an unchanged report every `refresh` seconds (reports written before
    // that existed have none): several missed rewrites mean a stuck or dead leader.
    const long refresh = r.value("refresh", 0L);
    out += "\nreconciler:     " + r.value("detail", std::string("?")) + " (" +
           r.value("step", std::string("?")) + ", reported by " +
           r.value("leader", std::string("?")) + " " + std::to_string(age) + "s ago)";
    if (refresh > 0 && age > 3 * refresh) {
      out += "\n                SILENT: no report for " + std::to_string(age) +
             "s; the leader rewrites it every " + std::to_string(refresh) +
             "s (stuck, or gone: see the agents' logs)";
    }
    if (r.contains("nodes") && r["nodes"].is_array()) {
      for (const auto& note : r["nodes"]) {
        if (note.is_string()) out += "\nnode:           " + note.get<std::string>();
      }
    }
  }
  if (j.contains("maintenance")) out += DescribeMaintenance(j["maintenance"], now);
  if (j.contains("backups")) {
    const auto& b = j["backups"];
    out += "\nbackups:        " + b.value("store", std::string("?")) + ", last " +
           (b.value("last_success", std::string()).empty()
                ? std::string("none")
                : b.value("last_success", std::string()) + " (" +
                      std::to_string(now - b.value("last_success_at", now)) + "s ago)");
    if (b.contains("encryption_key_id") && b.value("encryption_key_id", std::string()).empty()) {
      out += "\n                NOT ENCRYPTED: backups hold every secret the cluster holds, in "
             "clear (backup.encryption.key_file)";
    }
    if (b.contains("last_error")) {
      out += "\n                last error " +
             std::to_string(now - b.value("last_error_at", now)) +
             "s ago: " + b.value("last_error", std::string());
    }
  }
  return out + "\n";
}

nlohmann::json StatusToJson(const ClusterView& v) {
  nlohmann::json j;
  j["reachable"] = v.reachable;
  j["healthy"] = v.healthy;
  j["quorum"] = v.quorum;
  j["voters"] = v.voters;
  j["healthy_voters"] = v.healthy_voters;
  j["alarms"] = v.alarms;
  if (!v.error.empty()) j["error"] = v.error;
  // IDs are hex strings: uint64 values do not survive JSON tools that use doubles.
  j["cluster_id"] = v.cluster_id ? HexId(v.cluster_id) : "";
  j["leader_id"] = v.leader_id ? HexId(v.leader_id) : "";
  j["members"] = nlohmann::json::array();
  for (const auto& r : v.members) {
    nlohmann::json m;
    m["name"] = r.member.name;
    m["id"] = HexId(r.member.id);
    m["peer_urls"] = r.member.peer_urls;
    m["client_urls"] = r.member.client_urls;
    m["role"] = r.role;
    m["healthy"] = r.healthy;
    m["is_learner"] = r.member.is_learner;
    if (r.status) {
      m["raft_index"] = r.status->raft_index;
      m["raft_term"] = r.status->raft_term;
      m["db_size"] = r.status->db_size;
      m["version"] = r.status->version;
    }
    if (!r.error.empty()) m["error"] = r.error;
    m["alarms"] = r.alarms;
    j["members"].push_back(m);
  }
  j["non_members"] = nlohmann::json::array();
  for (const auto& n : v.non_members) {
    j["non_members"].push_back({{"name", n.name}, {"peer_url", n.peer_url}});
  }
  return j;
}

}  // namespace steward
