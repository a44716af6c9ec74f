#include "ctl/recover_cmd.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backup/pipeline.h"
#include "ctl/snapshot_cmd.h"
#include "peer/client.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct RecoverArgs {
  std::string from;
  bool yes = false;
  bool force = false;
  int wait_seconds = 300;
};

struct Survivor {
  std::string node;
  std::string endpoint;
  MemberStatus status;
};

// Streams `endpoint`'s snapshot into `path` (etcd serves it from the member's own backend,
// without a quorum).
absl::Status SaveSnapshot(EtcdClient& client, const std::string& endpoint,
                          const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("creating ", path, ": ", std::strerror(errno)));
  auto received = client.Snapshot(
      endpoint,
      [&](std::string_view chunk) -> absl::Status {
        for (size_t at = 0; at < chunk.size();) {
          ssize_t n = ::write(fd, chunk.data() + at, chunk.size() - at);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            return absl::InternalError(absl::StrCat("writing ", path, ": ", std::strerror(errno)));
          }
          at += static_cast<size_t>(n);
        }
        return absl::OkStatus();
      },
      std::chrono::minutes(30));
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!received.ok()) return received.status();
  if (!synced) return absl::InternalError(absl::StrCat("fsync of ", path, " failed"));
  return absl::OkStatus();
}

// What recover-quorum saw, and whether it may act on it. Taken twice: before the question and
// again right before the snapshot, so nothing rests on what was true minutes ago.
struct Observation {
  std::string refusal;  // non-empty: do nothing, and say this
  std::vector<Survivor> survivors;  // best first
  const Survivor* chosen = nullptr;
  size_t voters = 0;
  std::vector<std::string> gone;  // nodes treated as gone: neither etcd nor agent answered
  std::string newer_backup;       // a stored backup past the chosen survivor (a refusal unless --force)
};

Observation Observe(const Config& config, EtcdClient& client,
                    const std::shared_ptr<grpc::ChannelCredentials>& creds, BackupStore& store,
                    const RecoverArgs& a) {
  Observation ob;
  // 1. A quorum that answers needs no recovery: the leader heals what is lost. Only an
  // unavailable or timed-out cluster goes on: a refused certificate or a permission error
  // says nothing about the quorum.
  if (auto lin = client.LinearizableMemberList(); lin.ok()) {
    ob.refusal = absl::StrCat("a quorum of cluster ", config.cluster.name,
                              " answers (a linearizable member list succeeded). The steward "
                              "leader replaces lost members by itself; see stewardctl status.");
    return ob;
  } else if (lin.status().code() != absl::StatusCode::kUnavailable &&
             lin.status().code() != absl::StatusCode::kDeadlineExceeded) {
    ob.refusal = absl::StrCat("cannot tell whether a quorum answers: ", lin.status().message());
    return ob;
  }
  // 2. Every member that answers, of any cluster and role. One that sees a leader is part of
  // a working quorum (a slow path from here is not a lost majority); two cluster IDs mean a
  // leftover member of another cluster answers, and nothing here can say which is real.
  std::map<std::string, MemberStatus> answered;
  for (const auto& n : config.cluster.nodes) {
    auto st = client.Status(config.ClientUrl(n), std::chrono::milliseconds(2000));
    if (!st.ok()) continue;
    if (st->leader != 0) {
      ob.refusal = absl::StrCat("member ", n.name, " sees leader ", HexId(st->leader),
                                ", so a quorum exists");
      return ob;
    }
    if (!answered.empty() && answered.begin()->second.cluster_id != st->cluster_id) {
      ob.refusal = absl::StrCat("the members that answer belong to different clusters (",
                                answered.begin()->first, ": ",
                                HexId(answered.begin()->second.cluster_id), ", ", n.name, ": ",
                                HexId(st->cluster_id), "); set the stale one aside first");
      return ob;
    }
    answered[n.name] = *st;
  }
  if (answered.empty()) {
    ob.refusal = "no member answers, so none can be recovered from. Restore a backup instead: "
                 "stewardctl list-backups, then stewardctl restore-backup NAME";
    return ob;
  }
  // 3. The voting members, from the survivors' own member lists (served without a quorum).
  uint64_t cluster_id = 0;
  auto members = client.MemberList(&cluster_id);
  if (!members.ok()) {
    ob.refusal = absl::StrCat("no member answers a member list: ", members.status().message());
    return ob;
  }
  std::map<uint64_t, bool> voter_ids;
  for (const auto& m : *members) {
    if (!m.is_learner) voter_ids[m.id] = true;
  }
  ob.voters = voter_ids.size();
  for (const auto& n : config.cluster.nodes) {
    auto it = answered.find(n.name);
    if (it == answered.end()) continue;
    const MemberStatus& st = it->second;
    if (!st.is_learner && voter_ids.count(st.member_id)) {
      ob.survivors.push_back({n.name, config.ClientUrl(n), st});
    }
  }
  if (ob.survivors.empty()) {
    ob.refusal = "no voting member answers, so none can be recovered from. Restore a backup "
                 "instead: stewardctl list-backups, then stewardctl restore-backup NAME";
    return ob;
  }
  if (ob.survivors.size() >= ob.voters / 2 + 1) {
    ob.refusal = absl::StrCat(ob.survivors.size(), " of ", ob.voters,
                              " voting members answer, a majority: they elect a leader by "
                              "themselves");
    return ob;
  }
  // 4. The nodes whose etcd is silent: gone only if their agent is silent too, or says it has
  // no data. An agent that holds member data (running or not) is a member that may be ahead.
  for (const auto& n : config.cluster.nodes) {
    if (answered.count(n.name)) continue;
    PeerClient agent(config.AgentAddress(n), creds);
    auto state = agent.GetState(std::chrono::milliseconds(2000));
    if (state.ok() && state->has_data()) {
      ob.refusal = absl::StrCat(
          "node ", n.name, "'s agent answers and holds member data (its etcd ",
          state->etcd_running() ? "runs" : "does not run",
          "): that member is not gone, it may only be cut off from this host or from the "
          "others. Bring it back; if its disk is really lost, stop its agent and move the data "
          "dir away first");
      return ob;
    }
    ob.gone.push_back(state.ok() ? n.name + " (its agent answers, with no data)"
                                 : n.name + " (neither its etcd nor its agent answers)");
  }
  std::sort(ob.survivors.begin(), ob.survivors.end(), [](const Survivor& x, const Survivor& y) {
    if (x.status.raft_index != y.status.raft_index) {
      return x.status.raft_index > y.status.raft_index;
    }
    return x.node < y.node;
  });
  ob.chosen = &ob.survivors.front();
  if (!a.from.empty()) {
    ob.chosen = nullptr;
    for (const auto& s : ob.survivors) {
      if (s.node == a.from) ob.chosen = &s;
    }
    if (ob.chosen == nullptr) {
      ob.refusal = absl::StrCat("--from ", a.from,
                                ": that node's etcd does not answer as a voting member");
      return ob;
    }
  }
  // 5. The store: a backup of this cluster past the chosen survivor means members that do not
  // answer got further (or still run, out of sight): recovering from the survivor would lose
  // what that backup holds.
  if (auto listed = ListBackups(store, config.cluster.name); listed.ok()) {
    for (const auto& b : *listed) {
      if (!b.meta || !b.meta->imported_from.empty() || b.meta->cluster_id != cluster_id) continue;
      if (b.meta->revision > ob.chosen->status.revision) {
        ob.newer_backup = absl::StrCat(b.name, " (revision ", b.meta->revision, ")");
      }
      break;  // newest first
    }
  } else {
    ob.refusal = absl::StrCat("cannot list the backups: ", listed.status().message());
    return ob;
  }
  if (!ob.newer_backup.empty() && !a.force) {
    ob.refusal = absl::StrCat(
        "the store holds backup ", ob.newer_backup, " of this cluster, newer than ",
        ob.chosen->node, "'s revision ", ob.chosen->status.revision,
        ": members that do not answer got further, or still run out of sight. Restore that "
        "backup instead (stewardctl restore-backup NAME), or pass --force if you know they "
        "are gone and the survivor is what you want");
    return ob;
  }
  return ob;
}

int RunRecoverQuorum(const Common& c, const RecoverArgs& a) {
  WithStore w = OpenFromConfig(c, "recover-quorum");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.AllClientUrls(), o);
  Observation ob = Observe(config, client, o.credentials, *w.store, a);
  if (!ob.refusal.empty()) {
    std::cerr << "stewardctl: refusing: " << ob.refusal << ". Nothing was changed.\n";
    return 1;
  }
  const Survivor& chosen = *ob.chosen;
  const uint64_t best = ob.survivors.front().status.raft_index;
  std::cout << "Cluster " << config.cluster.name << " has no quorum. Voting members that answer ("
            << ob.survivors.size() << " of " << ob.voters << "):\n";
  for (const auto& s : ob.survivors) {
    std::cout << "  " << s.node << "  member " << HexId(s.status.member_id) << "  raft index "
              << s.status.raft_index << "  revision " << s.status.revision
              << (&s == ob.chosen ? "  <- recover from this one" : "") << "\n";
  }
  std::cout << "Treated as gone for good:";
  for (const auto& g : ob.gone) std::cout << "\n  " << g;
  std::cout << "\nMake sure they are: if one is only cut off from this host and still runs, "
               "this replaces its newer data.\n"
            << "Plan: save a snapshot of " << chosen.node << " (" << chosen.endpoint
            << "), import it into the backup store, and restore every node of the cluster from "
               "it (every etcd is stopped, the restored cluster gets a new cluster ID).\n"
            << "Lost: whatever only the members that are gone held, past raft index "
            << chosen.status.raft_index << ".";
  if (chosen.status.raft_index < best) {
    std::cout << " ALSO LOST: entries " << chosen.status.raft_index + 1 << ".." << best
              << " that " << ob.survivors.front().node << " holds (you chose " << chosen.node
              << ").";
  }
  if (!ob.newer_backup.empty()) {
    std::cout << " ALSO LOST (--force): what backup " << ob.newer_backup << " holds past revision "
              << chosen.status.revision << ".";
  }
  std::cout << "\n";
  if (!a.yes && !Confirmed()) {
    std::cout << "not recovering; nothing was changed\n";
    return 1;
  }
  // Looked at again right before acting: the question may have waited minutes.
  const std::string chosen_node = chosen.node;
  const uint64_t chosen_index = chosen.status.raft_index;
  Observation again = Observe(config, client, o.credentials, *w.store, a);
  if (!again.refusal.empty() || again.chosen->node != chosen_node ||
      again.chosen->status.raft_index < chosen_index) {
    std::cerr << "stewardctl: refusing: the cluster changed since the plan was printed ("
              << (again.refusal.empty() ? "another survivor is now the best" : again.refusal)
              << "). Nothing was changed; run recover-quorum again.\n";
    return 1;
  }
  // The survivor's data, verified, restored through the store.
  std::string dir = (fs::temp_directory_path() / "stewardctl-recover-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::cerr << "stewardctl: mkdtemp: " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string file = dir + "/" + chosen_node + ".db";
  std::cerr << "saving a snapshot of " << chosen_node << "...\n";
  if (absl::Status s = SaveSnapshot(client, again.chosen->endpoint, file); !s.ok()) {
    std::cerr << "stewardctl: the snapshot of " << chosen_node << " failed: " << s.message()
              << ". Nothing was changed.\n";
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 1;
  }
  // Checked, imported and restored as restore-backup --from-file does. No safety backup of
  // "the current cluster" is possible without a quorum: this snapshot is that backup.
  const int restored = RunRestoreFromFile(c, file, /*skip_hash_check=*/false, /*yes=*/true,
                                          /*force=*/true, a.wait_seconds);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (restored == 0) {
    std::cout << "recovered cluster " << config.cluster.name << " from " << chosen_node
              << " (raft index " << chosen_index << ")\n";
  } else {
    std::cerr << "stewardctl: the restore did not finish in time or failed; the snapshot of "
              << chosen_node << " is in the backup store (stewardctl list-backups: imported), "
                 "and the agents carry a started restore on by themselves\n";
  }
  return restored;
}

}  // namespace

void AddRecoverCommands(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<RecoverArgs>();
  CLI::App* recover = app.add_subcommand(
      "recover-quorum",
      "after a majority of members is gone for good: rebuild the cluster from the surviving "
      "member with the most data (refused while a quorum answers)");
  AddCommonFlags(recover, common, false);
  recover->add_option("--from", args->from, "recover from this node's member, not the best one");
  recover->add_flag("--yes", args->yes, "do not ask for confirmation");
  recover->add_flag("--force", args->force,
                    "go on although the store holds a backup newer than the survivor");
  recover->add_option("--wait", args->wait_seconds,
                      "seconds to wait for the cluster to be back");
  commands->push_back({recover, [common, args] { return RunRecoverQuorum(*common, *args); }});
}

}  // namespace steward
