#include "ctl/destroy_cmd.h"

#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/pipeline.h"
#include "common/fan_out.h"
#include "control/destroy.h"
#include "control/env.h"
#include "control/records.h"
#include "ctl/progress.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"

namespace steward {
namespace {

using std::chrono::milliseconds;

struct DestroyArgs {
  bool yes = false;
  bool force = false;
  std::string reason;
  int wait_seconds = 0;
};

// The newest backup the agents themselves would restore (not an imported file), checked
// against its meta.json; nullopt if none. A backup the store failed to return is not skipped
// for an older one (the restore coordinator waits in that case too): nullopt.
std::optional<BackupMeta> NewestValidBackup(BackupStore& store, const std::string& cluster) {
  auto listed = ListBackups(store, cluster);
  if (!listed.ok()) return std::nullopt;
  for (const auto& b : *listed) {
    if (!b.meta || !b.meta->imported_from.empty()) continue;
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(store, cluster, *b.meta, opts);
    if (s.ok()) return b.meta;
    if (!absl::IsDataLoss(s)) return std::nullopt;
  }
  return std::nullopt;
}

struct Observed {
  DestroyView view;
  std::map<std::string, peer::NodeState> states;
  std::optional<BackupMeta> newest;
};

Observed Observe(const Config& config, EtcdClient& client, BackupStore* store,
                 const std::shared_ptr<grpc::ChannelCredentials>& creds, bool force) {
  Observed o;
  DestroyView& v = o.view;
  v.force = force;
  v.adopting = config.cluster.adopt.enabled();
  v.has_store = store != nullptr;
  if (store != nullptr) {
    if (auto mark = ReadDestroyMark(*store, config.cluster.name); !mark.ok()) {
      v.store_ok = false;
      v.store_error = std::string(mark.status().message());
    } else {
      v.mark = *mark;
    }
    if (auto intent = ReadRestoreIntent(*store, config.cluster.name); !intent.ok()) {
      v.restore_may_be_under_way = true;
    } else {
      v.restore_may_be_under_way = intent->has_value() && !(*intent)->done && !(*intent)->cancelled;
    }
    o.newest = NewestValidBackup(*store, config.cluster.name);
    if (o.newest) v.newest_backup = o.newest->name;
  }
  o.states = AgentStates(config, creds, milliseconds(2000));
  for (const auto& n : config.cluster.nodes) {
    if (!o.states.count(n.name)) v.silent_agents.push_back(n.name);
  }
  v.quorum = client.LinearizableMemberList().ok();
  return o;
}

// Asks every agent that answered to carry the destroy (or its undoing) out, at once. Returns
// the number that failed; prints one line per node.
int TellAgents(const Config& config, const std::shared_ptr<grpc::ChannelCredentials>& creds,
               const std::string& id, bool undo, nlohmann::json* out) {
  std::vector<std::string> names;
  std::vector<std::function<absl::Status()>> calls;
  for (const auto& n : config.cluster.nodes) {
    names.push_back(n.name);
    const std::string address = config.AgentAddress(n);
    calls.push_back([address, creds, id, undo] {
      PeerClient agent(address, creds);
      peer::DestroyRequest req;
      req.set_destroy_id(id);
      req.set_undo(undo);
      return agent.Destroy(req, milliseconds(60000));  // etcd's graceful stop, the move aside
    });
  }
  auto results = FanOut(true, calls);
  int failed = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const absl::Status& s = results[i];
    if (!s.ok()) ++failed;
    std::cerr << "  " << names[i] << ": "
              << (s.ok() ? (undo ? "marker dropped" : "etcd stopped (its data stays in place)")
                         : std::string(s.message()))
              << "\n";
    (*out)["nodes"].push_back(
        {{"node", names[i]}, {"ok", s.ok()}, {"error", s.ok() ? "" : std::string(s.message())}});
  }
  return failed;
}

int RunDestroy(const Common& c, const DestroyArgs& a) {
  WithStore w = OpenFromConfig(c, "destroy");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.ClusterClientUrls(), o);
  Observed ob = Observe(config, client, w.store.get(), o.credentials, a.force);
  DestroyPlan plan = PlanDestroy(ob.view);
  nlohmann::json out = {{"cluster", config.cluster.name}, {"nodes", nlohmann::json::array()}};
  if (plan.step == DestroyStep::kRefuse) {
    std::cerr << "stewardctl: refusing to destroy (" << plan.rule << "): " << plan.reason
              << ". Nothing was changed.\n";
    return 1;
  }
  if (plan.step == DestroyStep::kAlready) {
    // Run again: retry the agents that have not carried it out.
    const DestroyMark& mark = *ob.view.mark;
    std::cerr << DescribeDestroyMark(config.cluster.name, mark) << "\n";
    std::cerr << "asking every agent to carry destroy " << mark.id << " out:\n";
    out["destroy_id"] = mark.id;
    out["final_backup"] = mark.final_backup;
    const int failed = TellAgents(config, o.credentials, mark.id, false, &out);
    if (c.output == "json") std::cout << out.dump(2) << "\n";
    return failed == 0 ? 0 : 1;
  }
  const size_t nodes = config.cluster.nodes.size();
  std::cout << "This destroys cluster " << config.cluster.name << ":\n"
            << (plan.step == DestroyStep::kFinalBackupFirst
                    ? "  1. a final backup is taken (it is the cluster's last state);\n"
                    : absl::StrCat("  1. NO final backup (no quorum answers): the last state "
                                   "kept is backup ",
                                   ob.newest->name, " of ", UtcTime(ob.newest->unix_time),
                                   " (revision ", ob.newest->revision,
                                   "); anything written since is lost;\n"))
            << "  2. the store is marked: no agent bootstraps, restores or starts this cluster "
               "until `stewardctl undestroy`;\n"
            << "  3. etcd stops on every node (" << nodes
            << "); each data dir stays in place, "
               "so undestroy resumes the cluster from it (or, on a node emptied since, from the "
               "final backup). Clients lose the cluster.\n";
  for (const auto& s : ob.view.silent_agents) {
    std::cout << "  (--force) the agent of " << s
              << " does not answer: its etcd, if it runs, "
                 "keeps running until its agent restarts\n";
  }
  if (!a.yes && !Confirmed()) {
    std::cout << "not destroying; nothing was changed\n";
    return 1;
  }
  std::optional<BackupMeta> last = ob.newest;
  if (plan.step == DestroyStep::kFinalBackupFirst) {
    // No retention: it must not prune the backup that is the cluster's last state. From a
    // member that has caught up with the leader: the last state is everything acknowledged.
    auto source = PickUpToDateSource(client, std::chrono::seconds(10));
    absl::StatusOr<BackupMeta> final_backup = absl::UnavailableError("no member to back up");
    if (!source.ok()) {
      final_backup = source.status();
    } else {
      Progress progress = Progress::ToStderr("final backup of " + source->member, 0);
      final_backup = TakeBackup(client, *source, *w.store, config.cluster.name, "stewardctl",
                                std::chrono::minutes(30), progress.Callback());
      progress.Done(final_backup.ok());
    }
    if (!final_backup.ok()) {
      std::cerr << "stewardctl: refusing to destroy: the final backup failed ("
                << final_backup.status().message() << "). Nothing was changed.\n";
      return 1;
    }
    last = *final_backup;
    std::cerr << "final backup: " << last->name << " (revision " << last->revision << ")\n";
  }
  // Asked again right before acting: the question and the backup may have taken minutes.
  Observed again = Observe(config, client, w.store.get(), o.credentials, a.force);
  DestroyPlan plan2 = PlanDestroy(again.view);
  const bool same_last_state = plan.step == DestroyStep::kFinalBackupFirst ||
                               (again.newest && ob.newest && again.newest->name == ob.newest->name);
  if (plan2.step != plan.step || !same_last_state) {
    std::cerr << "stewardctl: refusing to destroy: the cluster changed since the plan was "
                 "printed ("
              << plan2.rule << ": " << plan2.reason << "). Nothing else was changed"
              << (plan.step == DestroyStep::kFinalBackupFirst ? " (the final backup is stored)"
                                                              : "")
              << ".\n";
    return 1;
  }
  DestroyMark mark;
  mark.unix_time = UnixNow();
  mark.id =
      absl::StrFormat("%d-%04x", mark.unix_time, RealControlEnv(config, nullptr).nonce() & 0xffff);
  mark.by = WhoAmI();
  mark.final_backup = last->name;
  mark.revision = last->revision;
  mark.reason = a.reason;
  if (absl::Status s = WriteDestroyMark(*w.store, config.cluster.name, mark); !s.ok()) {
    std::cerr << "stewardctl: writing the destroy mark: " << s.message()
              << ". The cluster runs on unchanged.\n";
    return 1;
  }
  std::cerr << "store marked: destroy " << mark.id << "; stopping every node:\n";
  out["destroy_id"] = mark.id;
  out["final_backup"] = mark.final_backup;
  const int failed = TellAgents(config, o.credentials, mark.id, false, &out);
  if (c.output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "destroyed cluster " << config.cluster.name << "; its last state is backup "
              << mark.final_backup << "\n";
  }
  if (failed > 0) {
    std::cerr << "stewardctl: " << failed
              << " node(s) did not stop; the mark stands, so they "
                 "stop when their agent next decides to start etcd. Run destroy again to "
                 "retry them.\n";
    return 1;
  }
  return 0;
}

int RunUndestroy(const Common& c, const DestroyArgs& a) {
  WithStore w = OpenFromConfig(c, "undestroy");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  EtcdClient::Options o = ClientOptions(c);
  auto mark = ReadDestroyMark(*w.store, config.cluster.name);
  if (!mark.ok() && absl::IsDataLoss(mark.status()) && a.force) {
    // A mark nobody can read keeps every agent stopped for good: --force removes it.
    std::cerr << "warning: --force: removing a destroy mark that cannot be read ("
              << mark.status().message() << ")\n";
    if (absl::Status s = ClearDestroyMark(*w.store, config.cluster.name); !s.ok()) {
      std::cerr << "stewardctl: removing the destroy mark: " << s.message() << "\n";
      return 1;
    }
    mark = std::optional<DestroyMark>();
  }
  if (!mark.ok()) {
    std::cerr << "stewardctl: reading the destroy mark: " << mark.status().message()
              << (absl::IsDataLoss(mark.status()) ? " (--force removes it)" : "")
              << ". Nothing was changed.\n";
    return 1;
  }
  nlohmann::json out = {{"cluster", config.cluster.name}, {"nodes", nlohmann::json::array()}};
  std::string id;
  if (!mark->has_value()) {
    std::cerr << "the store does not mark cluster " << config.cluster.name
              << " destroyed; asking the agents to drop any marker left over\n";
  } else {
    id = (*mark)->id;
    // What each node will do: start on its data, or (every node empty) restore.
    auto states = AgentStates(config, o.credentials, milliseconds(2000));
    size_t with_data = 0;
    std::cout << DescribeDestroyMark(config.cluster.name, **mark) << ".\n";
    for (const auto& n : config.cluster.nodes) {
      auto it = states.find(n.name);
      if (it != states.end() && it->second.has_data()) ++with_data;
      std::cout << "  " << n.name << ": "
                << (it == states.end()      ? "its agent does not answer"
                    : it->second.has_data() ? "holds its member's data: starts on it"
                                            : "empty")
                << "\n";
    }
    if (with_data == 0) {
      std::cout << (config.backup.auto_restore
                        ? absl::StrCat("Every node is empty: the agents restore the newest "
                                       "backup (",
                                       (*mark)->final_backup, ") by themselves.\n")
                        : "Every node is empty and backup.auto_restore is off: restore with "
                          "`stewardctl restore-backup NAME` afterwards.\n");
    } else if (with_data < static_cast<size_t>(config.cluster.size) / 2 + 1) {
      std::cout << "Only " << with_data << " node(s) hold data, fewer than a quorum: they cannot "
                << "form the cluster alone, and their data rules out an automatic restore. "
                   "After undestroy, `stewardctl recover-quorum` rebuilds it from them.\n";
    }
    if (!a.yes && !Confirmed()) {
      std::cout << "not undestroying; nothing was changed\n";
      return 1;
    }
    if (absl::Status s = ClearDestroyMark(*w.store, config.cluster.name); !s.ok()) {
      std::cerr << "stewardctl: removing the destroy mark: " << s.message()
                << ". Nothing was changed.\n";
      return 1;
    }
  }
  std::cerr << "telling every agent:\n";
  out["destroy_id"] = id;
  const int failed = TellAgents(config, o.credentials, id, true, &out);
  if (failed > 0) {
    std::cerr << "stewardctl: " << failed
              << " agent(s) did not answer; each drops its marker "
                 "by itself once it sees the store without the mark\n";
  }
  int rc = 0;
  if (a.wait_seconds > 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.wait_seconds);
    bool healthy = false;
    while (!healthy && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1000));
      // A new client each round: a channel that failed while every etcd was down backs off
      // its reconnects for longer than the restore takes.
      EtcdClient client(config.ClusterClientUrls(), o);
      healthy = CollectStatus(client, o.timeout).healthy;
    }
    out["healthy"] = healthy;
    if (!healthy) {
      std::cerr << "stewardctl: the cluster is not healthy within " << a.wait_seconds
                << "s; see `stewardctl status` and the agents' logs\n";
      rc = 1;
    }
  }
  if (c.output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "cluster " << config.cluster.name << " is no longer marked destroyed"
              << (a.wait_seconds > 0 && rc == 0 ? "; it is healthy again" : "") << "\n";
  }
  return rc;
}

}  // namespace

void AddDestroyCommands(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<DestroyArgs>();
  CLI::App* destroy = app.add_subcommand(
      "destroy",
      "retire the cluster: final backup, stop every member (its data stays in place), and mark "
      "the store so nothing brings the cluster back until undestroy");
  AddCommonFlags(destroy, common, true);
  destroy->add_flag("--yes", args->yes, "do not ask for confirmation");
  destroy->add_flag("--force", args->force,
                    "go on although an agent does not answer, or (no quorum) with the newest "
                    "backup as the last state");
  destroy->add_option("--reason", args->reason, "recorded with the mark");
  commands->push_back({destroy, [common, args] { return RunDestroy(*common, *args); }});

  CLI::App* undestroy = app.add_subcommand(
      "undestroy",
      "remove the destroy mark: the agents start the members on their data again "
      "(a node emptied since: from the final backup)");
  AddCommonFlags(undestroy, common, true);
  undestroy->add_flag("--yes", args->yes, "do not ask for confirmation");
  undestroy->add_flag("--force", args->force, "remove a destroy mark that cannot be read");
  undestroy->add_option("--wait", args->wait_seconds,
                        "seconds to wait for the cluster to be healthy again (0: do not wait)");
  commands->push_back({undestroy, [common, args] { return RunUndestroy(*common, *args); }});
}

}  // namespace steward
