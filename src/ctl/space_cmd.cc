#include "ctl/space_cmd.h"

#include <chrono>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ctl/status.h"
#include "etcd/client.h"
#include "nlohmann/json.hpp"
#include "reconcile/space.h"

namespace steward {
namespace {

using std::chrono::milliseconds;

struct DefragRow {
  DefragMember member;
  std::string result;  // ok, failed, skipped, not reached
  std::string error;
  int64_t after = -1;  // -1: unknown
  int64_t took_ms = 0;
};

std::string Role(const DefragMember& m) {
  if (m.is_leader) return "leader";
  return m.is_learner ? "learner" : "follower";
}

void PrintDefrag(const std::vector<DefragRow>& rows, const std::string& output) {
  if (output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const DefragRow& r : rows) {
      nlohmann::json o = {
          {"name", r.member.name},  {"id", HexId(r.member.id)}, {"endpoint", r.member.endpoint},
          {"role", Role(r.member)}, {"result", r.result},       {"took_ms", r.took_ms}};
      o["db_size_before"] =
          r.member.reachable ? nlohmann::json(r.member.db_size) : nlohmann::json();
      o["db_size_after"] = r.after >= 0 ? nlohmann::json(r.after) : nlohmann::json();
      if (!r.error.empty()) o["error"] = r.error;
      j.push_back(o);
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << absl::StrFormat("%-8s %-17s %-28s %-9s %-10s %-10s %s\n", "MEMBER", "ID", "ENDPOINT",
                               "ROLE", "BEFORE", "AFTER", "RESULT");
  for (const DefragRow& r : rows) {
    std::string result = r.result;
    if (r.result == "ok") result = absl::StrFormat("ok (%.1fs)", r.took_ms / 1000.0);
    if (!r.error.empty()) result += ": " + r.error;
    std::cout << absl::StrFormat(
        "%-8s %-17s %-28s %-9s %-10s %-10s %s\n", r.member.name.empty() ? "-" : r.member.name,
        HexId(r.member.id), r.member.endpoint.empty() ? "-" : r.member.endpoint, Role(r.member),
        r.member.reachable ? HumanBytes(r.member.db_size) : "-",
        r.after >= 0 ? HumanBytes(r.after) : "-", result);
  }
}

int RunDefrag(const Common& c, int timeout_seconds) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(endpoints, o);
  const milliseconds defrag_timeout(static_cast<int64_t>(timeout_seconds) * 1000);
  auto view = ObserveForDefrag(client, o.timeout);
  if (!view.ok()) {
    std::cerr << "stewardctl: defrag: no member list: " << view.status().message() << "\n";
    return 1;
  }
  std::vector<DefragRow> rows;
  int skipped = 0;
  // Members that do not answer first, so the table says at once what is left out.
  for (const DefragMember& m : *view) {
    if (m.reachable && !m.endpoint.empty()) continue;
    DefragRow r{m, "skipped", m.endpoint.empty() ? "never started" : "does not answer"};
    std::cerr << "skipping " << (m.name.empty() ? HexId(m.id) : m.name) << ": " << r.error << "\n";
    rows.push_back(r);
    ++skipped;
  }
  const std::vector<DefragMember> order = DefragOrder(*view);
  size_t next = 0;
  bool failed = false;
  for (; next < order.size() && !failed; ++next) {
    const DefragMember& planned = order[next];
    DefragRow r{planned, "", ""};
    // Right before its turn: it still answers, and blocking it leaves a quorum answering.
    auto now = ObserveForDefrag(client, o.timeout);
    const DefragMember* m = nullptr;
    if (now.ok()) {
      for (const DefragMember& x : *now) {
        if (x.id == planned.id) m = &x;
      }
    }
    if (!now.ok()) {
      r.result = "failed";
      r.error = absl::StrCat("no member list: ", now.status().message());
      failed = true;
    } else if (m == nullptr || !m->reachable) {
      r.result = "skipped";
      r.error = m == nullptr ? "no longer a member" : "stopped answering";
      std::cerr << "skipping " << planned.name << ": " << r.error << "\n";
      ++skipped;
    } else if (std::string why = DefragQuorumBlocker(*now, m->id); !why.empty()) {
      r.member = *m;
      r.result = "failed";
      r.error = "not started: " + why;
      failed = true;
    } else {
      r.member = *m;
      r.member.is_leader = planned.is_leader || m->is_leader;
      std::cerr << "defragmenting " << m->name << " (" << m->endpoint << ", "
                << HumanBytes(m->db_size) << ")...\n";
      const auto start = std::chrono::steady_clock::now();
      absl::Status s = client.Defragment(m->endpoint, defrag_timeout);
      r.took_ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start)
                      .count();
      if (auto st = client.Status(m->endpoint, o.timeout); st.ok()) r.after = st->db_size;
      if (s.ok()) {
        r.result = "ok";
      } else {
        r.result = "failed";
        r.error = std::string(s.message());
        failed = true;
      }
    }
    rows.push_back(r);
  }
  for (; next < order.size(); ++next) rows.push_back({order[next], "not reached", ""});
  PrintDefrag(rows, c.output);
  if (failed) {
    const DefragRow& f = [&]() -> const DefragRow& {
      for (const DefragRow& r : rows) {
        if (r.result == "failed") return r;
      }
      return rows.back();
    }();
    std::cerr << "stewardctl: defrag stopped at "
              << (f.member.name.empty() ? HexId(f.member.id) : f.member.name) << ": " << f.error
              << "; the members after it were not defragmented\n";
    return 1;
  }
  if (skipped > 0) {
    std::cerr << "stewardctl: " << skipped << " member(s) skipped (not defragmented); run "
              << "defrag again once they answer\n";
    return 1;
  }
  return 0;
}

// Member ID -> name, as far as the member list says.
std::map<uint64_t, std::string> MemberNames(EtcdClient& client) {
  std::map<uint64_t, std::string> out;
  if (auto members = client.MemberList(); members.ok()) {
    for (const MemberInfo& m : *members) out[m.id] = m.name;
  }
  return out;
}

void PrintAlarms(const std::vector<AlarmInfo>& alarms, const std::map<uint64_t, std::string>& names,
                 const std::string& output, const char* empty) {
  if (output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const AlarmInfo& a : alarms) {
      auto it = names.find(a.member_id);
      j.push_back({{"member", it == names.end() ? "" : it->second},
                   {"member_id", HexId(a.member_id)},
                   {"alarm", a.alarm}});
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (alarms.empty()) {
    std::cout << empty << "\n";
    return;
  }
  std::cout << absl::StrFormat("%-8s %-17s %s\n", "MEMBER", "ID", "ALARM");
  for (const AlarmInfo& a : alarms) {
    auto it = names.find(a.member_id);
    std::cout << absl::StrFormat("%-8s %-17s %s\n",
                                 it == names.end() || it->second.empty() ? "-" : it->second,
                                 HexId(a.member_id), a.alarm);
  }
}

int RunAlarmList(const Common& c) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient client(endpoints, ClientOptions(c));
  auto alarms = client.AlarmList();
  if (!alarms.ok()) {
    std::cerr << "stewardctl: alarm list: " << alarms.status().message() << "\n";
    return 1;
  }
  PrintAlarms(*alarms, MemberNames(client), c.output, "no active alarms");
  return 0;
}

int RunAlarmDisarm(const Common& c) {
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient client(endpoints, ClientOptions(c));
  // What is active right now is what gets cleared (etcdctl's disarm does the same).
  auto alarms = client.AlarmList();
  if (!alarms.ok()) {
    std::cerr << "stewardctl: alarm disarm: listing the alarms: " << alarms.status().message()
              << "\n";
    return 1;
  }
  std::vector<AlarmInfo> cleared;
  for (const AlarmInfo& a : *alarms) {
    if (absl::Status s = client.AlarmDisarm(a.member_id, a.alarm); !s.ok()) {
      PrintAlarms(cleared, MemberNames(client), c.output, "nothing cleared");
      std::cerr << "stewardctl: alarm disarm: " << a.alarm << " of " << HexId(a.member_id) << ": "
                << s.message() << "\n";
      return 1;
    }
    cleared.push_back(a);
  }
  const auto names = MemberNames(client);
  if (c.output != "json" && !cleared.empty()) std::cout << "disarmed:\n";
  PrintAlarms(cleared, names, c.output, "no active alarms: nothing to disarm");
  // A member still over its quota raises NOSPACE again on its next write.
  if (auto again = client.AlarmList(); again.ok() && !again->empty()) {
    std::cerr << "warning: " << again->size() << " alarm(s) active again right after disarming "
              << "(a member still over its quota raises NOSPACE on its next write: compact and "
                 "`stewardctl defrag` first)\n";
    return 1;
  }
  return 0;
}

}  // namespace

void AddSpaceCommands(CLI::App& app, Common* common, Commands* commands) {
  auto timeout = std::make_shared<int>(300);
  CLI::App* defrag = app.add_subcommand(
      "defrag", "defragment every member, one at a time, followers first and the etcd leader last");
  AddCommonFlags(defrag, common, true);
  defrag
      ->add_option("--defrag-timeout", *timeout,
                   "seconds each member's defragmentation may take (it blocks the member)")
      ->check(CLI::Range(1, 86400));
  commands->push_back({defrag, [common, timeout] { return RunDefrag(*common, *timeout); }});

  CLI::App* alarm = app.add_subcommand("alarm", "etcd's alarms (NOSPACE, CORRUPT)");
  alarm->require_subcommand(1);
  CLI::App* list = alarm->add_subcommand("list", "list every active alarm");
  AddCommonFlags(list, common, true);
  commands->push_back({list, [common] { return RunAlarmList(*common); }});
  CLI::App* disarm = alarm->add_subcommand("disarm", "clear every active alarm; prints each");
  AddCommonFlags(disarm, common, true);
  commands->push_back({disarm, [common] { return RunAlarmDisarm(*common); }});
}

}  // namespace steward
