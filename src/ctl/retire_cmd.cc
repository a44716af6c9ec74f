#include "ctl/retire_cmd.h"

#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/scheduler.h"
#include "ctl/retire.h"
#include "ctl/status.h"
#include "etcd/client.h"
#include "etcd/keys.h"

namespace steward {
namespace {

// The members no agent manages, as the operator must shut them down.
std::string DescribeMember(const MemberInfo& m) {
  std::string out = absl::StrFormat("  %s (%x): peer %s", m.name.empty() ? "(unnamed)" : m.name,
                                    m.id, m.peer_urls.empty() ? "?" : m.peer_urls.front());
  if (!m.client_urls.empty()) out += ", client " + m.client_urls.front();
  return out + "\n";
}

}  // namespace

int RunRetireUnmanaged(const Common& c, bool yes, bool force) {
  WithStore w = OpenFromConfig(c, "retire-unmanaged");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  if (!config.cluster.adopt.enabled()) {
    // Without it, a member on no configured node is one the leader handles itself.
    std::cerr << "stewardctl: retire-unmanaged is for a cluster being adopted: cluster.adopt "
                 "is not set in "
              << c.config_path << "\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config.ClusterClientUrls(), o);
  std::map<std::string, std::string> managed;  // peer URL -> node name
  for (const auto& n : config.cluster.nodes) managed[config.PeerUrl(n)] = n.name;
  const int size = StoredDesiredSize(ReadStewardState(client, config), config.cluster.size);
  // Decisions rest on a linearizable member list: a removed or cut-off old member still
  // answers a plain one from its own state.
  ClusterView view = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
  RetireStep first = NextRetirement(view, managed, size);
  if (first.kind == RetireStep::kDone) {
    std::cout << "nothing to retire: every member is on a configured node\n";
    return 0;
  }
  if (first.kind == RetireStep::kRefuse) {
    std::cerr << "stewardctl: not retiring anything: " << first.reason << "\n";
    return 1;
  }
  std::vector<MemberInfo> unmanaged;
  for (const auto& r : view.members) {
    bool mine = false;
    for (const auto& u : r.member.peer_urls) {
      auto it = managed.find(u);
      mine =
          mine || (it != managed.end() && (r.member.name.empty() || r.member.name == it->second));
    }
    if (!mine) unmanaged.push_back(r.member);
  }
  std::cout << "These members are on no configured node; they are removed from the cluster one "
               "at a time, each removal checked against quorum (a backup is taken first):\n";
  for (const auto& m : unmanaged) std::cout << DescribeMember(m);
  if (!yes) {
    std::cout << "Their etcd processes are not stopped by us. ";
    if (!Confirmed()) {
      std::cout << "not retiring\n";
      return 1;
    }
  }
  if (auto meta = BackupAndPrune(config, *w.store, client, "stewardctl"); meta.ok()) {
    std::cerr << "took a backup first: " << meta->name << "\n";
  } else if (!force) {
    std::cerr << "stewardctl: not retiring anything: the backup failed (" << meta.status().message()
              << "); pass --force to go on without one\n";
    return 1;
  } else {
    std::cerr << "warning: --force: no backup before retiring (" << meta.status().message()
              << ")\n";
  }
  std::vector<MemberInfo> retired;
  bool done = false;
  for (size_t round = 0; round <= unmanaged.size() && !done; ++round) {
    // Every step is decided again on a fresh view: the quorum check is never older than it.
    ClusterView now = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
    RetireStep step = NextRetirement(now, managed, size);
    if (step.kind == RetireStep::kDone) {
      done = true;
      break;
    }
    if (step.kind == RetireStep::kRefuse) {
      std::cerr << "stewardctl: stopped after " << retired.size() << " removal(s): " << step.reason
                << "\n";
      return 1;
    }
    // Only what the operator confirmed: a member that appeared since is not removed.
    bool confirmed = false;
    for (const auto& m : unmanaged) confirmed = confirmed || m.id == step.member_id;
    if (!confirmed) {
      std::cerr << "stewardctl: stopped after " << retired.size() << " removal(s): member "
                << step.name << " joined after the list above was confirmed; run the command "
                << "again\n";
      return 1;
    }
    std::cerr << "removing " << step.name << ": " << step.reason << "\n";
    if (absl::Status s = client.MemberRemove(step.member_id); !s.ok()) {
      // A timed-out removal may still have been applied: the next view shows which.
      std::cerr << "warning: removing " << step.name << ": " << s.message() << "\n";
    }
    // Bounded: the member list no longer has it and a quorum serves a linearizable read.
    bool settled = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!settled && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto members = client.LinearizableMemberList();
      if (!members.ok()) continue;
      bool gone = true;
      for (const auto& m : *members) gone = gone && m.id != step.member_id;
      settled = gone && client.Get(SpecKey(config)).ok();
    }
    if (!settled) {
      std::cerr << "stewardctl: after removing " << step.name << " the cluster has not served a "
                << "linearizable read within 30s; stopping (see stewardctl status)\n";
      return 1;
    }
    ClusterView after = CollectStatus(client, o.timeout);
    std::cout << "removed " << step.name << "; quorum kept: " << after.healthy_voters << " of "
              << after.voters << " voting members healthy\n";
    for (const auto& m : unmanaged) {
      if (m.id == step.member_id) retired.push_back(m);
    }
  }
  if (!done) {
    std::cerr << "stewardctl: unmanaged members remain after " << retired.size()
              << " removal(s); see stewardctl status\n";
    return 1;
  }
  std::cout << "retired " << retired.size() << " unmanaged member(s). Shut their etcd "
            << "processes down yourself (etcd-steward never stops them), then remove "
               "cluster.adopt from every node's config:\n";
  for (const auto& m : retired) std::cout << DescribeMember(m);
  return 0;
}

}  // namespace steward
