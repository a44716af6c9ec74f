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
#include "ctl/snapshot_cmd.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct RecoverArgs {
  std::string from;
  bool yes = false;
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

int RunRecoverQuorum(const Common& c, const RecoverArgs& a) {
  int rc = 0;
  std::optional<Config> config = ConfigFor(c, "recover-quorum", &rc);
  if (!config) return rc;
  if (config->backup.store.empty()) {
    std::cerr << "stewardctl: recover-quorum restores through the backup store, and backup.store "
                 "is not set in "
              << c.config_path << "\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->AllClientUrls(), o);
  // 1. A quorum that answers needs no recovery: the leader heals what is lost.
  if (auto members = client.LinearizableMemberList(); members.ok()) {
    std::cerr << "stewardctl: refusing: a quorum of cluster " << config->cluster.name
              << " answers (a linearizable member list succeeded). The steward leader replaces "
                 "lost members by itself; see stewardctl status. Nothing was changed.\n";
    return 1;
  }
  // 2. Who survives, and how far each got: voting members of the cluster the survivors' own
  // member lists describe (served locally, without a quorum).
  uint64_t cluster_id = 0;
  auto members = client.MemberList(&cluster_id);
  if (!members.ok()) {
    std::cerr << "stewardctl: no member answers a member list (" << members.status().message()
              << "), so none can be recovered from. Restore a backup instead: stewardctl "
                 "list-backups, then stewardctl restore-backup NAME.\n";
    return 1;
  }
  size_t voters = 0;
  std::map<uint64_t, bool> voter_ids;
  for (const auto& m : *members) {
    if (!m.is_learner) {
      ++voters;
      voter_ids[m.id] = true;
    }
  }
  std::vector<Survivor> survivors;
  for (const auto& n : config->cluster.nodes) {
    const std::string url = config->ClientUrl(n);
    auto st = client.Status(url, std::chrono::milliseconds(2000));
    if (!st.ok() || st->is_learner || st->cluster_id != cluster_id ||
        !voter_ids.count(st->member_id)) {
      continue;
    }
    // A member that sees a leader is part of a working quorum: a slow or unreachable client
    // path is not a lost majority.
    if (st->leader != 0) {
      std::cerr << "stewardctl: refusing: member " << n.name << " sees leader "
                << HexId(st->leader) << ", so a quorum exists. Nothing was changed.\n";
      return 1;
    }
    survivors.push_back({n.name, url, *st});
  }
  if (survivors.size() >= voters / 2 + 1) {
    std::cerr << "stewardctl: refusing: " << survivors.size() << " of " << voters
              << " voting members answer, a majority: they elect a leader by themselves. "
                 "Nothing was changed.\n";
    return 1;
  }
  if (survivors.empty()) {
    std::cerr << "stewardctl: no voting member answers, so none can be recovered from. Restore a "
                 "backup instead: stewardctl list-backups, then stewardctl restore-backup NAME.\n";
    return 1;
  }
  std::sort(survivors.begin(), survivors.end(), [](const Survivor& x, const Survivor& y) {
    if (x.status.raft_index != y.status.raft_index) {
      return x.status.raft_index > y.status.raft_index;
    }
    return x.node < y.node;
  });
  const Survivor* chosen = &survivors.front();
  if (!a.from.empty()) {
    chosen = nullptr;
    for (const auto& s : survivors) {
      if (s.node == a.from) chosen = &s;
    }
    if (chosen == nullptr) {
      std::cerr << "stewardctl: --from " << a.from << ": that node's etcd does not answer (or is "
                   "not a voting member); survivors:";
      for (const auto& s : survivors) std::cerr << " " << s.node;
      std::cerr << "\n";
      return 1;
    }
  }
  // 3. What will happen, and what can be lost.
  const uint64_t best = survivors.front().status.raft_index;
  std::cout << "Cluster " << config->cluster.name << " has no quorum. Members that answer:\n";
  for (const auto& s : survivors) {
    std::cout << "  " << s.node << "  member " << HexId(s.status.member_id) << "  raft index "
              << s.status.raft_index << "  revision " << s.status.revision
              << (&s == chosen ? "  <- recover from this one" : "") << "\n";
  }
  std::cout << "Plan: save a snapshot of " << chosen->node << " (" << chosen->endpoint
            << "), import it into the backup store, and restore every node of the cluster from "
               "it (every etcd is stopped, the restored cluster gets a new cluster ID).\n"
            << "Lost: whatever only the members that are gone held, past raft index "
            << chosen->status.raft_index << ".";
  if (chosen->status.raft_index < best) {
    std::cout << " ALSO LOST: entries " << chosen->status.raft_index + 1 << ".." << best
              << " that " << survivors.front().node << " holds (you chose " << chosen->node
              << ").";
  }
  std::cout << "\n";
  if (!a.yes && !Confirmed()) {
    std::cout << "not recovering; nothing was changed\n";
    return 1;
  }
  // 4. The survivor's data, verified, restored through the store.
  std::string dir = (fs::temp_directory_path() / "stewardctl-recover-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::cerr << "stewardctl: mkdtemp: " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string file = dir + "/" + chosen->node + ".db";
  std::cerr << "saving a snapshot of " << chosen->node << "...\n";
  if (absl::Status s = SaveSnapshot(client, chosen->endpoint, file); !s.ok()) {
    std::cerr << "stewardctl: the snapshot of " << chosen->node << " failed: " << s.message()
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
    std::cout << "recovered cluster " << config->cluster.name << " from " << chosen->node
              << " (raft index " << chosen->status.raft_index << ")\n";
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
  recover->add_option("--wait", args->wait_seconds,
                      "seconds to wait for the cluster to be back");
  commands->push_back({recover, [common, args] { return RunRecoverQuorum(*common, *args); }});
}

}  // namespace steward
