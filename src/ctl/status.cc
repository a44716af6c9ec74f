#include "ctl/status.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "etcd/advisories.h"
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
  // Known problems of the versions the members run (etcd/advisories.h), one line each.
  std::vector<std::pair<std::string, std::vector<std::string>>> versions;
  for (const auto& r : v.members) {
    if (!r.status) continue;
    auto it = std::find_if(versions.begin(), versions.end(),
                           [&](const auto& p) { return p.first == r.status->version; });
    if (it == versions.end()) it = versions.insert(versions.end(), {r.status->version, {}});
    it->second.push_back(r.member.name.empty() ? HexId(r.member.id) : r.member.name);
  }
  for (const auto& [version, names] : versions) {
    for (const EtcdAdvisory* a : AdvisoriesFor(version)) {
      out += absl::StrCat("ADVISORY etcd ", version, " (", absl::StrJoin(names, ", "), "): ", a->id,
                          ", ", EffectName(a->effect), " (", a->issue, "): ", a->breaks, " ",
                          a->action, "\n");
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
    out += absl::StrCat("\npaused:         ", node.empty() ? "the whole cluster" : node, " until ",
                        UtcSeconds(until),
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
  // Read without a quorum (ReadStewardState's `local`): nobody leads, and every line below is
  // what one member last held.
  const bool local = j.value("local", false);
  if (local) {
    out += "steward leader: none (the quorum is lost: no agent can keep the leader lease";
    if (j.contains("last_leader")) out += "; the last was " + j["last_leader"].get<std::string>();
    out += ")\n                the lines below are from before the quorum was lost";
  } else {
    out += "steward leader: " + (j.contains("leader") ? j["leader"].get<std::string>()
                                                      : "none (no agent holds the leader lease)");
  }
  if (j.contains("reconciler")) {
    const auto& r = j["reconciler"];
    const long age = static_cast<long>(now) - r.value("at", 0L);
    // The leader rewrites an unchanged report every `refresh` seconds (reports written before
    // that existed have none): several missed rewrites mean a stuck or dead leader.
    const long refresh = r.value("refresh", 0L);
    out += std::string(local ? "\nlast report:    " : "\nreconciler:     ") +
           r.value("detail", std::string("?")) + " (" + r.value("step", std::string("?")) +
           ", reported by " + r.value("leader", std::string("?")) + " " + std::to_string(age) +
           "s ago)";
    if (!local && refresh > 0 && age > 3 * refresh) {
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
      out +=
          "\n                NOT ENCRYPTED: backups hold every secret the cluster holds, in "
          "clear (backup.encryption.key_file)";
    }
    if (b.contains("last_drill")) {
      out += "\n                restore drill " +
             std::to_string(now - b.value("last_drill_at", now)) +
             "s ago: " + b.value("last_drill", std::string());
    }
    if (b.contains("last_error")) {
      out += "\n                last error " + std::to_string(now - b.value("last_error_at", now)) +
             "s ago: " + b.value("last_error", std::string());
    }
  }
  return out + "\n";
}

}  // namespace steward
