#include "reconcile/cluster_status.h"

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "etcd/advisories.h"
#include "etcd/keys.h"
#include "reconcile/maintenance.h"

namespace steward {

namespace {

// One member's row: its status from the first client URL that answers, and its role.
MemberRow ProbeMember(EtcdClient& client, const MemberInfo& m, std::chrono::milliseconds timeout) {
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
}

// The view's totals from its member rows, and the configured nodes that are not members.
void Summarize(ClusterView& view, const std::vector<NodeRow>& nodes) {
  bool all_healthy = !view.members.empty();
  for (const auto& r : view.members) {
    if (r.status) {
      view.cluster_id = r.status->cluster_id;
      if (r.status->leader != 0) view.leader_id = r.status->leader;
    }
    if (!r.healthy) all_healthy = false;
    for (const auto& a : r.alarms) {
      view.alarms.push_back(
          absl::StrCat(a, " on ", r.member.name.empty() ? HexId(r.member.id) : r.member.name));
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
}

}  // namespace

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
    futures.push_back(std::async(
        std::launch::async, [&client, m, timeout] { return ProbeMember(client, m, timeout); }));
  }
  for (auto& f : futures) view.members.push_back(f.get());
  std::sort(view.members.begin(), view.members.end(),
            [](const MemberRow& a, const MemberRow& b) { return a.member.name < b.member.name; });
  Summarize(view, nodes);
  return view;
}

nlohmann::json ReadStewardState(EtcdClient& client, const Config& config, bool local) {
  // Each read waits out the client's deadline when etcd does not answer: side by side, the
  // whole takes one deadline, not four (the status page asks every few seconds).
  auto read = [&client, local](std::string key) {
    return std::async(std::launch::async, [&client, key, local] {
      return local ? client.GetLocal(key) : client.Get(key);
    });
  };
  auto leader = read(LeaderKey(config));
  auto reconciler = read(StatusKey(config));
  auto backups = read(BackupStatusKey(config));
  auto spec = read(SpecKey(config));
  auto maintenance = read(MaintenanceKey(config.cluster.name));
  nlohmann::json j = nlohmann::json::object();
  if (local) j["local"] = true;
  if (auto got = leader.get(); got.ok() && got->has_value()) {
    j[local ? "last_leader" : "leader"] = **got;
  }
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
      nlohmann::json advisories = nlohmann::json::array();
      for (const EtcdAdvisory* a : AdvisoriesFor(r.status->version)) {
        advisories.push_back({{"id", a->id},
                              {"range", absl::StrCat(a->first, "-", a->last)},
                              {"issue", a->issue},
                              {"effect", EffectName(a->effect)},
                              {"breaks", a->breaks},
                              {"action", a->action}});
      }
      m["advisories"] = advisories;
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
