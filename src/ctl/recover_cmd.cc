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
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "restore/recover_decision.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct RecoverArgs {
  std::string from;
  bool yes = false;
  bool force = false;
  int wait_seconds = 300;
};

// Streams `endpoint`'s snapshot into `path` (etcd serves it from the member's own backend,
// without a quorum).
absl::Status SaveSnapshot(EtcdClient& client, const std::string& endpoint,
                          const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("creating ", path, ": ", std::strerror(errno)));
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

// What recover-quorum saw (RecoverView), and whether it may act on it (DecideRecover). Taken
// twice: before the question and again right before the snapshot, so nothing rests on what was
// true minutes ago. Everything the rules may ask is gathered, every call bounded.
struct Observation {
  RecoverView view;
  RecoverDecision d;
  const RecoverView::Node& chosen() const { return view.nodes[*d.chosen]; }
};

Observation Observe(const Config& config, EtcdClient& client,
                    const std::shared_ptr<grpc::ChannelCredentials>& creds, BackupStore& store,
                    const RecoverArgs& a) {
  Observation ob;
  RecoverView& v = ob.view;
  v.cluster = config.cluster.name;
  v.from = a.from;
  v.force = a.force;
  if (auto lin = client.LinearizableMemberList(); lin.ok()) {
    v.linearizable_ok = true;
  } else {
    v.linearizable_unavailable = lin.status().code() == absl::StatusCode::kUnavailable ||
                                 lin.status().code() == absl::StatusCode::kDeadlineExceeded;
    v.linearizable_error = std::string(lin.status().message());
  }
  if (!v.linearizable_ok && v.linearizable_unavailable) {
    // Each member's own status (served locally, without a quorum), and for a silent member,
    // its agent's word about its data.
    for (const auto& n : config.cluster.nodes) {
      RecoverView::Node node;
      node.name = n.name;
      node.endpoint = config.ClientUrl(n);
      if (auto st = client.Status(node.endpoint, std::chrono::milliseconds(2000)); st.ok()) {
        node.etcd_answered = true;
        node.member_id = st->member_id;
        node.cluster_id = st->cluster_id;
        node.leader = st->leader;
        node.raft_index = st->raft_index;
        node.revision = st->revision;
        node.is_learner = st->is_learner;
      } else {
        PeerClient agent(config.AgentAddress(n), creds);
        if (auto state = agent.GetState(std::chrono::milliseconds(2000)); state.ok()) {
          node.agent_answered = true;
          node.agent_has_data = state->has_data();
          node.agent_etcd_running = state->etcd_running();
        }
      }
      v.nodes.push_back(node);
    }
    auto members = client.MemberList(&v.list_cluster_id);
    v.list_ok = members.ok();
    if (members.ok()) {
      for (const auto& m : *members) {
        if (!m.is_learner) v.voter_ids.push_back(m.id);
      }
    } else {
      v.list_error = std::string(members.status().message());
    }
    if (auto listed = ListBackups(store, config.cluster.name); listed.ok()) {
      for (const auto& b : *listed) {
        if (!b.meta || !b.meta->imported_from.empty() || b.meta->cluster_id != v.list_cluster_id) {
          continue;
        }
        v.newest_backup = b.name;  // newest first
        v.newest_backup_revision = b.meta->revision;
        break;
      }
    } else {
      v.backups_ok = false;
      v.backups_error = std::string(listed.status().message());
    }
  }
  ob.d = DecideRecover(v);
  return ob;
}

int RunRecoverQuorum(const Common& c, const RecoverArgs& a) {
  WithStore w = OpenFromConfig(c, "recover-quorum");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  // A destroyed cluster is stopped on purpose: undestroy, not a recovery, brings it back.
  if (DestroyedRefuses(*w.store, config.cluster.name)) return 1;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.AllClientUrls(), o);
  Observation ob = Observe(config, client, o.credentials, *w.store, a);
  if (!ob.d.refusal.empty()) {
    std::cerr << "stewardctl: refusing (" << ob.d.rule << "): " << ob.d.refusal
              << ". Nothing was changed.\n";
    return 1;
  }
  const RecoverView::Node& chosen = ob.chosen();
  const RecoverView::Node& best_node = ob.view.nodes[ob.d.survivors.front()];
  const uint64_t best = best_node.raft_index;
  std::cout << "Cluster " << config.cluster.name << " has no quorum. Voting members that answer ("
            << ob.d.survivors.size() << " of " << ob.d.voters << "):\n";
  for (size_t i : ob.d.survivors) {
    const RecoverView::Node& s = ob.view.nodes[i];
    std::cout << "  " << s.name << "  member " << HexId(s.member_id) << "  raft index "
              << s.raft_index << "  revision " << s.revision
              << (i == *ob.d.chosen ? "  <- recover from this one" : "") << "\n";
  }
  std::cout << "Treated as gone for good:";
  for (const auto& g : ob.d.gone) std::cout << "\n  " << g;
  std::cout << "\nMake sure they are: if one is only cut off from this host and still runs, "
               "this replaces its newer data.\n"
            << "Plan: save a snapshot of " << chosen.name << " (" << chosen.endpoint
            << "), import it into the backup store, and restore every node of the cluster from "
               "it (every etcd is stopped, the restored cluster gets a new cluster ID).\n"
            << "Lost: whatever only the members that are gone held, past raft index "
            << chosen.raft_index << ".";
  if (chosen.raft_index < best) {
    std::cout << " ALSO LOST: entries " << chosen.raft_index + 1 << ".." << best << " that "
              << best_node.name << " holds (you chose " << chosen.name << ").";
  }
  if (!ob.d.newer_backup.empty()) {
    std::cout << " ALSO LOST (--force): what backup " << ob.d.newer_backup
              << " holds past revision " << chosen.revision << ".";
  }
  std::cout << "\n";
  if (!a.yes && !Confirmed()) {
    std::cout << "not recovering; nothing was changed\n";
    return 1;
  }
  // Looked at again right before acting: the question may have waited minutes.
  const std::string chosen_node = chosen.name;
  const uint64_t chosen_index = chosen.raft_index;
  Observation again = Observe(config, client, o.credentials, *w.store, a);
  if (!again.d.refusal.empty() || again.chosen().name != chosen_node ||
      again.chosen().raft_index < chosen_index) {
    std::cerr << "stewardctl: refusing: the cluster changed since the plan was printed ("
              << (again.d.refusal.empty() ? "another survivor is now the best" : again.d.refusal)
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
  if (absl::Status s = SaveSnapshot(client, again.chosen().endpoint, file); !s.ok()) {
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
              << chosen_node
              << " is in the backup store (stewardctl list-backups: imported), "
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
  AddCommonFlags(recover, common, true);
  recover->add_option("--from", args->from, "recover from this node's member, not the best one");
  recover->add_flag("--yes", args->yes, "do not ask for confirmation");
  recover->add_flag("--force", args->force,
                    "go on although the store holds a backup newer than the survivor");
  recover->add_option("--wait", args->wait_seconds, "seconds to wait for the cluster to be back");
  commands->push_back({recover, [common, args] {
                         return WithJsonResult(*common, "recover-quorum",
                                               [&] { return RunRecoverQuorum(*common, *args); });
                       }});
}

}  // namespace steward
