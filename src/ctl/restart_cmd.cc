#include "ctl/restart_cmd.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"
#include "etcd/keys.h"
#include "peer/client.h"
#include "reconcile/restart_roll.h"

namespace steward {

using std::chrono::milliseconds;

std::vector<std::string> RollNodes(const std::vector<std::string>& configured,
                                   const std::map<std::string, peer::NodeState>& states,
                                   const std::vector<std::string>& members, bool pending_only,
                                   std::vector<std::string>* silent) {
  std::vector<std::string> out;
  for (const auto& name : members.empty() ? configured : members) {
    auto it = states.find(name);
    if (it == states.end()) {
      silent->push_back(name);
      if (!members.empty()) out.push_back(name);  // asked by name: the leader waits for it
      continue;
    }
    if (!it->second.has_data()) continue;
    if (pending_only && it->second.pending_restart().empty()) continue;
    out.push_back(name);
  }
  return out;
}

namespace {

struct RestartArgs {
  bool pending = false;
  std::vector<std::string> members;
  std::string reason;
  bool no_wait = false;
  std::string wait_for = "15m";
};

std::string NewRollId() {
  std::random_device rd;
  return absl::StrCat("r-", UnixNow(), "-", absl::Hex(rd() & 0xffffff, absl::kZeroPad6));
}

// "--quota-backend-bytes on n1, n2, n3; --snapshot-count on n2"
std::string PendingSummary(const std::vector<std::string>& nodes,
                           const std::map<std::string, peer::NodeState>& states) {
  std::map<std::string, std::vector<std::string>> by_flag;
  for (const auto& n : nodes) {
    auto it = states.find(n);
    if (it == states.end()) continue;
    for (const auto& f : it->second.pending_restart()) by_flag[f].push_back(n);
  }
  std::vector<std::string> parts;
  for (const auto& [flag, on] : by_flag) {
    parts.push_back(absl::StrCat(flag, " on ", absl::StrJoin(on, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

// The leader's published step ("detail" of StatusKey), "" if none can be read.
std::string LeaderSays(EtcdClient& client, const Config& config) {
  auto v = client.Get(StatusKey(config));
  if (!v.ok() || !v->has_value()) return "";
  auto j = nlohmann::json::parse(**v, nullptr, false);
  if (j.is_discarded() || !j.contains("detail") || !j["detail"].is_string()) return "";
  return j["detail"].get<std::string>();
}

void Nudge(EtcdClient& client, const Config& config, const EtcdClient::Options& o) {
  auto leader = client.Get(LeaderKey(config));
  if (!leader.ok() || !leader->has_value()) return;
  for (const auto& n : config.cluster.nodes) {
    if (n.name != **leader) continue;
    PeerClient agent(config.AgentAddress(n), o.credentials);
    (void)agent.Nudge("stewardctl", milliseconds(2000));
  }
}

// Follows the roll until every node in it says it restarted for it, or `limit` passes.
int Follow(EtcdClient& client, const Config& config, const EtcdClient::Options& o,
           const RestartRoll& roll, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<std::string> done;
  std::string said;
  while (true) {
    const auto states = AgentStates(config, o.credentials, milliseconds(2000));
    for (const auto& n : roll.nodes) {
      auto it = states.find(n);
      if (it == states.end() || it->second.restarted_for() != roll.id) continue;
      if (std::find(done.begin(), done.end(), n) != done.end()) continue;
      done.push_back(n);
      std::cout << "restarted " << n << " (" << done.size() << " of " << roll.nodes.size() << ")\n"
                << std::flush;
    }
    if (done.size() == roll.nodes.size()) {
      std::cout << "restart roll " << roll.id << " done\n";
      return 0;
    }
    if (std::string now = LeaderSays(client, config); !now.empty() && now != said) {
      said = now;
      std::cout << "  steward leader: " << now << "\n" << std::flush;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "stewardctl: restart: roll " << roll.id << " not done after " << limit.count()
                << "s (" << done.size() << " of " << roll.nodes.size()
                << " restarted); the steward leader goes on with it, stewardctl status shows "
                   "where it is\n";
      return 1;
    }
    std::this_thread::sleep_for(milliseconds(1000));
  }
}

int RunRestart(const Common& c, const RestartArgs& a) {
  int rc = 0;
  auto config = ConfigFor(c, "restart", &rc);
  if (!config) return rc;
  std::vector<std::string> configured;
  for (const auto& n : config->cluster.nodes) configured.push_back(n.name);
  for (const auto& m : a.members) {
    if (std::find(configured.begin(), configured.end(), m) == configured.end()) {
      std::cerr << "stewardctl: restart --member: no node " << m
                << " in the config (nodes: " << absl::StrJoin(configured, ", ") << ")\n";
      return 2;
    }
  }
  auto wait_for = ParseDuration(a.wait_for);
  if (!wait_for.ok()) {
    std::cerr << "stewardctl: restart --wait-for: " << wait_for.status().message() << "\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  const auto states = AgentStates(*config, o.credentials, milliseconds(c.timeout_ms));
  std::vector<std::string> silent;
  RestartRoll roll;
  roll.nodes = RollNodes(configured, states, a.members, a.pending, &silent);
  if (!silent.empty()) {
    std::cerr << "note: the agent on " << absl::StrJoin(silent, ", ") << " did not answer"
              << (a.members.empty() ? "; left out of this roll" : "; the roll waits for it")
              << "\n";
  }
  if (roll.nodes.empty()) {
    std::cout << (a.pending ? "nothing is pending: every running etcd has the flags the config "
                              "gives\n"
                            : "no member to restart\n");
    return 0;
  }
  roll.id = NewRollId();
  roll.by = WhoAmI();
  roll.since = UnixNow();
  roll.pending_only = a.pending;
  roll.reason = !a.reason.empty() ? a.reason
                : a.pending       ? absl::StrCat("pending: ", PendingSummary(roll.nodes, states))
                                  : "asked by " + roll.by;
  if (absl::Status s =
          client.Put(RestartKey(config->cluster.name), RestartRollToJson(roll).dump(), 0);
      !s.ok()) {
    std::cerr << "stewardctl: restart: storing the roll: " << s.message()
              << ". Nothing was changed.\n";
    return 1;
  }
  Nudge(client, *config, o);
  std::cout << "restart roll " << roll.id << ": " << absl::StrJoin(roll.nodes, ", ") << " ("
            << roll.reason << ")\n"
            << "the steward leader restarts one member at a time, the etcd leader last, each "
               "healthy again before the next, and never while the cluster is degraded\n"
            << std::flush;
  if (a.no_wait) return 0;
  return Follow(client, *config, o, roll,
                std::chrono::duration_cast<std::chrono::seconds>(*wait_for));
}

}  // namespace

void AddRestartCommand(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<RestartArgs>();
  CLI::App* sub = app.add_subcommand(
      "restart", "restart etcd member by member (the etcd leader last), e.g. for changed flags");
  AddCommonFlags(sub, common, true);
  sub->add_flag("--pending", args->pending,
                "only the members whose etcd runs with flags the config has changed since "
                "(stewardctl status: pending restart)");
  sub->add_option("--member", args->members, "only this node's member (repeatable)");
  sub->add_option("--reason", args->reason, "why (shown in status and the history)");
  sub->add_flag("--no-wait", args->no_wait,
                "store the roll and return; the steward leader carries it out");
  sub->add_option("--wait-for", args->wait_for,
                  "how long to follow the roll before returning (default 15m; it goes on)");
  commands->push_back({sub, [common, args] {
                         return WithJsonResult(*common, "restart",
                                               [&] { return RunRestart(*common, *args); });
                       }});
}

}  // namespace steward
