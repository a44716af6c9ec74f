#include "ctl/maintenance_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/scheduler.h"
#include "etcd/keys.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "reconcile/maintenance.h"
#include "reconcile/plan.h"

namespace steward {

namespace {

using std::chrono::milliseconds;

const NodeSpec* FindNode(const Config& config, const std::string& name) {
  for (const auto& n : config.cluster.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::string NodeNames(const Config& config) {
  std::string out;
  for (const auto& n : config.cluster.nodes) absl::StrAppend(&out, out.empty() ? "" : ", ", n.name);
  return out;
}

// The member on `peer_url` (a node's), or null.
const MemberRow* MemberOn(const ClusterView& view, const std::string& peer_url) {
  for (const auto& r : view.members) {
    for (const auto& u : r.member.peer_urls) {
      if (u == peer_url) return &r;
    }
  }
  return nullptr;
}

const MemberRow* MemberById(const ClusterView& view, uint64_t id) {
  for (const auto& r : view.members) {
    if (r.member.id == id) return &r;
  }
  return nullptr;
}

std::string Label(const MemberRow& r) {
  return absl::StrFormat("%s (%x)", r.member.name.empty() ? "(unnamed)" : r.member.name,
                         r.member.id);
}

// The maintenance document and the revision it was read at (0: the key does not exist).
struct Doc {
  Maintenance m;
  int64_t mod_revision = 0;
};

absl::StatusOr<Doc> ReadDoc(EtcdClient& client, const std::string& key) {
  etcdserverpb::TxnRequest txn;
  txn.add_success()->mutable_request_range()->set_key(key);
  auto resp = client.Txn(txn);
  if (!resp.ok()) return resp.status();
  Doc d;
  if (resp->responses_size() == 1 && resp->responses(0).response_range().kvs_size() == 1) {
    const auto& kv = resp->responses(0).response_range().kvs(0);
    auto parsed = MaintenanceFromJson(kv.value());
    if (!parsed.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(key, " holds a document stewardctl cannot read (", parsed.status().message(),
                       "); delete it with etcdctl del ", key, " and set the pauses again"));
    }
    d.m = *std::move(parsed);
    d.mod_revision = kv.mod_revision();
  }
  return d;
}

// Read, change, write back if nobody wrote in between; a few rounds against a concurrent
// stewardctl. `change` returns false to write nothing (it printed why).
absl::StatusOr<bool> UpdateDoc(EtcdClient& client, const std::string& key,
                               const std::function<bool(Maintenance&)>& change) {
  for (int round = 0; round < 5; ++round) {
    auto doc = ReadDoc(client, key);
    if (!doc.ok()) return doc.status();
    doc->m.DropExpired(UnixNow());
    if (!change(doc->m)) return false;
    etcdserverpb::TxnRequest txn;
    auto* cmp = txn.add_compare();
    cmp->set_key(key);
    cmp->set_target(etcdserverpb::Compare::MOD);
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    cmp->set_mod_revision(doc->mod_revision);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(MaintenanceToJson(doc->m).dump());
    auto resp = client.Txn(txn);
    if (!resp.ok()) return resp.status();
    if (resp->succeeded()) return true;
  }
  return absl::AbortedError(absl::StrCat(key, " kept changing under us; try again"));
}

// The steward leader passes again at once rather than at its next idle pass (best effort).
void NudgeLeader(EtcdClient& client, const Config& config, const EtcdClient::Options& o) {
  auto leader = client.Get(LeaderKey(config));
  if (!leader.ok() || !leader->has_value()) return;
  const NodeSpec* n = FindNode(config, **leader);
  if (n == nullptr) return;
  PeerClient agent(config.AgentAddress(*n), o.credentials);
  if (absl::Status s = agent.Nudge("stewardctl", milliseconds(2000)); !s.ok()) {
    std::cerr << "note: the steward leader " << n->name << " did not answer (" << s.message()
              << "); it sees the change on its next pass\n";
  }
}

struct PauseArgs {
  std::string node;
  std::string duration;
  std::string reason;
};

// Stores the pause. Returns the exit status.
int StorePause(const Config& config, EtcdClient& client, const PauseArgs& a, const char* what,
               std::string* description) {
  std::chrono::seconds length = kDefaultPause;
  if (!a.duration.empty()) {
    auto d = ParsePauseDuration(a.duration);
    if (!d.ok()) {
      std::cerr << "stewardctl: " << what << " --for: " << d.status().message() << "\n";
      return 2;
    }
    length = *d;
  }
  Pause p;
  p.node = a.node;
  p.by = WhoAmI();
  p.reason = a.reason;
  p.since = UnixNow();
  p.until = p.since + length.count();
  bool removed = false;
  auto done = UpdateDoc(client, MaintenanceKey(config.cluster.name), [&](Maintenance& m) {
    if (!p.node.empty() && m.Removed(p.node) != nullptr) {
      removed = true;
      return false;
    }
    m.DropPause(p.node);
    m.pauses.push_back(p);
    return true;
  });
  if (!done.ok()) {
    std::cerr << "stewardctl: " << what << ": storing the pause: " << done.status().message()
              << "\n";
    return 1;
  }
  if (removed) {
    std::cerr << "stewardctl: " << what << ": node " << p.node << " was removed (remove-node); "
              << "there is nothing to pause (readd-node brings it back)\n";
    return 1;
  }
  *description = DescribePause(p);
  return 0;
}

int RunPause(const Common& c, const PauseArgs& a) {
  int rc = 0;
  auto config = ConfigFor(c, "pause", &rc);
  if (!config) return rc;
  if (!a.node.empty() && FindNode(*config, a.node) == nullptr) {
    std::cerr << "stewardctl: pause: no node " << a.node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  if (a.reason.empty()) {
    std::cerr << "stewardctl: pause needs --reason TEXT (it is shown to everyone who looks)\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  std::string described;
  if (int r = StorePause(*config, client, a, "pause", &described); r != 0) return r;
  NudgeLeader(client, *config, o);
  if (a.node.empty()) {
    std::cout << "paused the cluster " << described << "\n"
              << "the steward leader replaces, adds and removes no member until then (it still "
                 "promotes a caught-up learner and takes backups); end it with stewardctl "
                 "resume\n";
  } else {
    std::cout << "paused node " << a.node << " " << described << "\n"
              << "the steward leader does not replace " << a.node << "'s member or wipe its "
              << "data until then; end it with stewardctl resume --node " << a.node << "\n";
  }
  return 0;
}

int RunResume(const Common& c, const std::string& node) {
  int rc = 0;
  auto config = ConfigFor(c, "resume", &rc);
  if (!config) return rc;
  if (!node.empty() && FindNode(*config, node) == nullptr) {
    std::cerr << "stewardctl: resume: no node " << node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  std::optional<Pause> ended;
  auto done = UpdateDoc(client, MaintenanceKey(config->cluster.name), [&](Maintenance& m) {
    const Pause* p = m.PauseFor(node);
    if (p == nullptr) return false;
    ended = *p;
    m.DropPause(node);
    return true;
  });
  if (!done.ok()) {
    std::cerr << "stewardctl: resume: " << done.status().message() << "\n";
    return 1;
  }
  const std::string what = node.empty() ? "the cluster" : absl::StrCat("node ", node);
  if (!ended) {
    std::cout << what << " is not paused; nothing to do\n";
    return 0;
  }
  NudgeLeader(client, *config, o);
  std::cout << "resumed " << what << " (paused since " << UtcSeconds(ended->since) << " by "
            << ended->by << ": " << ended->reason << ")\n"
            << "the steward leader heals " << (node.empty() ? "the cluster" : node)
            << " as usual from its next pass (a member down longer than cluster.replace_after "
               "is replaced once a spare is ready)\n";
  return 0;
}

// Moves etcd's leadership to `target` (a healthy voter) and waits until a member reports it.
// `view` is fresh. Returns "" or why not.
std::string MoveLeadership(EtcdClient& client, const ClusterView& view, const MemberRow& target,
                           milliseconds timeout) {
  const MemberRow* leader = MemberById(view, view.leader_id);
  if (leader == nullptr || leader->member.client_urls.empty()) {
    return "the cluster has no leader that can be reached";
  }
  if (target.member.is_learner) return absl::StrCat(Label(target), " is a learner");
  if (!target.healthy) return absl::StrCat(Label(target), " is not healthy");
  // MoveLeader must reach the leader itself; etcd waits for the transfer (up to its election
  // timeout), so allow more than one call's deadline.
  const milliseconds deadline = std::max(timeout, milliseconds(10000));
  if (absl::Status s =
          client.MoveLeader(leader->member.client_urls.front(), target.member.id, deadline);
      !s.ok()) {
    return std::string(s.message());
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    for (const auto& url : target.member.client_urls) {
      auto st = client.Status(url, timeout);
      if (st.ok() && st->leader == target.member.id) return "";
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return "etcd accepted the transfer, but the target does not report itself leader yet";
}

int RunMoveLeader(const Common& c, const std::string& node) {
  int rc = 0;
  auto config = ConfigFor(c, "move-leader", &rc);
  if (!config) return rc;
  const NodeSpec* spec = FindNode(*config, node);
  if (spec == nullptr) {
    std::cerr << "stewardctl: move-leader: no node " << node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  ClusterView view = CollectStatus(client, o.timeout);
  if (!view.reachable) {
    std::cerr << "stewardctl: move-leader: the cluster does not answer: " << view.error << "\n";
    return 1;
  }
  const MemberRow* target = MemberOn(view, config->PeerUrl(*spec));
  if (target == nullptr) {
    std::cerr << "stewardctl: move-leader: node " << node << " has no etcd member\n";
    return 1;
  }
  const MemberRow* old = MemberById(view, view.leader_id);
  const std::string old_label = old ? Label(*old) : "none";
  nlohmann::json j = {{"old_leader", old_label}, {"target", Label(*target)}};
  if (view.leader_id == target->member.id) {
    j["moved"] = false;
    j["new_leader"] = old_label;
    if (c.output == "json") {
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "node " << node << " (" << Label(*target) << ") already leads etcd; nothing "
                << "moved\n";
    }
    return 0;
  }
  if (std::string why = MoveLeadership(client, view, *target, o.timeout); !why.empty()) {
    std::cerr << "stewardctl: move-leader: moving etcd leadership from " << old_label << " to "
              << Label(*target) << ": " << why << "\n";
    return 1;
  }
  j["moved"] = true;
  j["new_leader"] = Label(*target);
  if (c.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "etcd leadership moved: " << old_label << " -> " << Label(*target) << "\n";
  }
  return 0;
}

int RunDrain(const Common& c, PauseArgs a) {
  int rc = 0;
  auto config = ConfigFor(c, "drain", &rc);
  if (!config) return rc;
  const NodeSpec* spec = FindNode(*config, a.node);
  if (spec == nullptr) {
    std::cerr << "stewardctl: drain: no node " << a.node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  if (a.reason.empty()) a.reason = "drained for maintenance";
  if (!a.duration.empty()) {  // checked before anything moves
    if (auto d = ParsePauseDuration(a.duration); !d.ok()) {
      std::cerr << "stewardctl: drain --for: " << d.status().message() << "\n";
      return 2;
    }
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  ClusterView view = CollectStatus(client, o.timeout);
  if (!view.reachable) {
    std::cerr << "stewardctl: drain: the cluster does not answer: " << view.error << "\n";
    return 1;
  }
  const MemberRow* mine = MemberOn(view, config->PeerUrl(*spec));
  if (mine != nullptr && view.leader_id == mine->member.id) {
    // The healthy voter furthest along takes over.
    const MemberRow* to = nullptr;
    for (const auto& r : view.members) {
      if (&r == mine || r.member.is_learner || !r.healthy || !r.status) continue;
      if (to == nullptr || r.status->raft_index > to->status->raft_index) to = &r;
    }
    if (to == nullptr) {
      std::cerr << "stewardctl: drain: " << a.node << " leads etcd and no other healthy voting "
                << "member can take over; nothing was changed\n";
      return 1;
    }
    if (std::string why = MoveLeadership(client, view, *to, o.timeout); !why.empty()) {
      std::cerr << "stewardctl: drain: moving etcd leadership from " << Label(*mine) << " to "
                << Label(*to) << ": " << why << "; nothing was paused\n";
      return 1;
    }
    std::cout << "etcd leadership moved: " << Label(*mine) << " -> " << Label(*to) << "\n";
  } else if (mine == nullptr) {
    std::cout << "node " << a.node << " has no etcd member; no leadership to move\n";
  } else {
    const MemberRow* leader = MemberById(view, view.leader_id);
    std::cout << "node " << a.node << " does not lead etcd ("
              << (leader ? Label(*leader) : std::string("no leader")) << " does); leadership "
              << "not moved\n";
  }
  std::string described;
  if (int r = StorePause(*config, client, a, "drain", &described); r != 0) return r;
  NudgeLeader(client, *config, o);
  std::cout << "paused node " << a.node << " " << described << "\n";
  if (auto leader = client.Get(LeaderKey(*config));
      leader.ok() && leader->has_value() && **leader == a.node) {
    std::cout << "note: " << a.node << " holds the steward leadership; another agent takes it "
              << "over when " << a.node << "'s agent stops\n";
  }
  std::cout << "node " << a.node << " may now be stopped; when it is back: stewardctl resume "
            << "--node " << a.node << "\n";
  return 0;
}

// Waits until a linearizable member list no longer has `id` (bounded).
bool WaitGone(EtcdClient& client, uint64_t id, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto members = client.LinearizableMemberList();
    if (members.ok()) {
      bool gone = true;
      for (const auto& m : *members) gone = gone && m.id != id;
      if (gone) return true;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  return false;
}

// The desired size as the leader sees it (the stored spec, else cluster.size).
int DesiredSize(EtcdClient& client, const Config& config) {
  auto spec = client.Get(SpecKey(config));
  if (spec.ok() && spec->has_value()) {
    auto j = nlohmann::json::parse(**spec, nullptr, false);
    if (!j.is_discarded() && j.contains("size") && j["size"].is_number_integer()) {
      return j["size"].get<int>();
    }
  }
  return config.cluster.size;
}

namespace {

// remove-node's yes (unless --yes) and its backup first (unless --force goes on without one).
// False (printed) when the removal stops here.
bool ConfirmAndBackUp(const Common& c, const Config& config, EtcdClient& client,
                      const std::string& node, const std::string& label, bool yes, bool force) {
  std::cout << "This removes member " << label << " of node " << node << " from the cluster "
            << "for good: the steward leader does not add the node back until stewardctl "
            << "readd-node " << node << "."
            << (config.backup.store.empty() ? " There is no backup store (backup.store)."
                                            : " A backup is taken first.")
            << "\n";
  if (!yes && !Confirmed()) {
    std::cout << "not removing\n";
    return false;
  }
  // A backup first, from the store in the config.
  WithStore w;
  if (!config.backup.store.empty()) w = OpenFromConfig(c, "remove-node");
  if (config.backup.store.empty() || w.rc != 0) {
    if (!force) {
      std::cerr << "stewardctl: remove-node: refusing: no backup store to take a backup in "
                << (config.backup.store.empty() ? "(backup.store is not set)" : "")
                << "; pass --force to go on without one\n";
      return false;
    }
    std::cerr << "warning: --force: no backup before the removal\n";
  } else if (auto meta = BackupAndPrune(config, *w.store, client, "stewardctl"); meta.ok()) {
    std::cerr << "took a backup first: " << meta->name << "\n";
  } else if (!force) {
    std::cerr << "stewardctl: remove-node: refusing: the backup failed (" << meta.status().message()
              << "); pass --force to go on without one; nothing "
              << "was changed\n";
    return false;
  } else {
    std::cerr << "warning: --force: no backup before the removal (" << meta.status().message()
              << ")\n";
  }
  return true;
}

// The member of `node` removed, checked again right before (the first check may be minutes
// old: the backup); the mark undone when that check refuses. False (printed) when it did not
// end with the member gone.
bool RemoveAtLastCheck(EtcdClient& client, const Config& config, const EtcdClient::Options& o,
                       const std::string& node, const std::string& peer_url, uint64_t member_id,
                       const std::string& label) {
  // Checked again right before the removal: the view above may be minutes old (the backup).
  ClusterView now = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
  std::string why = now.reachable ? RemovalRefusal(now, node, peer_url)
                                  : absl::StrCat("the cluster does not answer: ", now.error);
  const MemberRow* again = now.reachable ? MemberOn(now, peer_url) : nullptr;
  if (why.empty() && again != nullptr && again->member.id != member_id) {
    why = absl::StrCat("node ", node, "'s member changed to ", Label(*again), " since the check");
  }
  if (!why.empty()) {
    // Undo the mark: the node stays as it was.
    auto undone = UpdateDoc(client, MaintenanceKey(config.cluster.name), [&](Maintenance& m) {
      m.DropRemoved(node);
      return true;
    });
    std::cerr << "stewardctl: remove-node: refusing at the last check: " << why << "; "
              << (undone.ok() ? "the node is not marked as removed"
                              : "the node is still marked as removed (readd-node undoes it)")
              << "\n";
    return false;
  }
  if (again != nullptr) {
    std::cerr << "removing member " << label << "\n";
    if (absl::Status s = client.MemberRemove(member_id); !s.ok()) {
      // A timed-out removal may still have been applied: the member list tells.
      std::cerr << "warning: removing " << label << ": " << s.message() << "\n";
    }
    if (!WaitGone(client, member_id, std::chrono::seconds(30))) {
      std::cerr << "stewardctl: remove-node: member " << label << " is still in the member "
                << "list after 30s; node " << node << " is marked as removed, so the leader "
                << "removes it (see stewardctl status)\n";
      NudgeLeader(client, config, o);
      return false;
    }
  }
  return true;
}

// What remove-node did, and what the cluster's size is now.
void ReportRemoved(EtcdClient& client, const Config& config, const std::string& node,
                   bool had_member, const std::string& label, std::chrono::milliseconds timeout) {
  ClusterView after = CollectStatus(client, timeout);
  int remaining = 0;
  auto doc = ReadDoc(client, MaintenanceKey(config.cluster.name));
  for (const auto& n : config.cluster.nodes) {
    if (!doc.ok() || doc->m.Removed(n.name) == nullptr) ++remaining;
  }
  const int desired = DesiredSize(client, config);
  if (had_member) {
    std::cout << "removed member " << label << " of node " << node << "; " << after.healthy_voters
              << " of " << after.voters << " voting members healthy\n";
  }
  std::cout << "node " << node << " is marked as removed: the steward leader does not add it "
            << "back (stewardctl readd-node " << node << " undoes this)\n";
  if (remaining < desired) {
    std::cout << "desired size " << desired << " is clamped to the " << remaining
              << " node(s) not removed: the cluster stays at " << remaining << " voting members\n";
  } else {
    std::cout << "desired size stays " << desired << ": the leader adds a spare node if the "
              << "cluster has fewer voting members\n";
  }
  std::cout << "the agent and etcd on " << node << " are not stopped by this; stop them there "
            << "(the agent starts nothing while the node is marked)\n";
}

}  // namespace

int RunRemoveNode(const Common& c, const std::string& node, const std::string& reason_in, bool yes,
                  bool force) {
  int rc = 0;
  auto config = ConfigFor(c, "remove-node", &rc);
  if (!config) return rc;
  const NodeSpec* spec = FindNode(*config, node);
  if (spec == nullptr) {
    std::cerr << "stewardctl: remove-node: no node " << node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  const std::string reason = reason_in.empty() ? "removed with stewardctl remove-node" : reason_in;
  const std::string peer_url = config->PeerUrl(*spec);
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  // Decisions rest on a linearizable member list (a cut-off member answers a stale one).
  ClusterView view = CollectStatus(client, o.timeout, {}, /*linearizable=*/true);
  if (!view.reachable) {
    std::cerr << "stewardctl: remove-node: refusing: a quorum of the cluster does not answer ("
              << view.error << "); nothing was changed\n";
    return 1;
  }
  if (std::string why = RemovalRefusal(view, node, peer_url); !why.empty()) {
    std::cerr << "stewardctl: remove-node: refusing: " << why << "; nothing was changed\n";
    return 1;
  }
  const MemberRow* row = MemberOn(view, peer_url);
  const uint64_t member_id = row ? row->member.id : 0;
  const std::string label = row ? Label(*row) : std::string();
  if (row == nullptr) {
    std::cout << "node " << node << " has no etcd member; it is only marked as removed, so the "
              << "steward leader does not add it back\n";
  } else if (!ConfirmAndBackUp(c, *config, client, node, label, yes, force)) {
    return 1;
  }
  // The mark first: from now on the leader neither re-adds the node nor replaces onto it.
  RemovedNode mark{node, WhoAmI(), reason, UnixNow(), member_id};
  auto marked = UpdateDoc(client, MaintenanceKey(config->cluster.name), [&](Maintenance& m) {
    m.DropRemoved(node);
    m.DropPause(node);
    m.removed.push_back(mark);
    return true;
  });
  if (!marked.ok()) {
    std::cerr << "stewardctl: remove-node: marking " << node
              << " as removed: " << marked.status().message() << "; nothing was changed\n";
    return 1;
  }
  if (row != nullptr && !RemoveAtLastCheck(client, *config, o, node, peer_url, member_id, label)) {
    return 1;
  }
  NudgeLeader(client, *config, o);
  ReportRemoved(client, *config, node, row != nullptr, label, o.timeout);
  return 0;
}

int RunReaddNode(const Common& c, const std::string& node) {
  int rc = 0;
  auto config = ConfigFor(c, "readd-node", &rc);
  if (!config) return rc;
  if (FindNode(*config, node) == nullptr) {
    std::cerr << "stewardctl: readd-node: no node " << node
              << " in the config (nodes: " << NodeNames(*config) << ")\n";
    return 2;
  }
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(config->ClusterClientUrls(), o);
  std::optional<RemovedNode> was;
  auto done = UpdateDoc(client, MaintenanceKey(config->cluster.name), [&](Maintenance& m) {
    const RemovedNode* r = m.Removed(node);
    if (r == nullptr) return false;
    was = *r;
    m.DropRemoved(node);
    return true;
  });
  if (!done.ok()) {
    std::cerr << "stewardctl: readd-node: " << done.status().message() << "\n";
    return 1;
  }
  if (!was) {
    std::cout << "node " << node << " is not marked as removed; nothing to do\n";
    return 0;
  }
  NudgeLeader(client, *config, o);
  std::cout << "node " << node << " is no longer marked as removed (removed since "
            << UtcSeconds(was->since) << " by " << was->by << ": " << was->reason << ")\n"
            << "the steward leader sets its old data aside, adds it as a learner and promotes "
               "it once caught up, if the cluster wants another voting member (desired size "
            << DesiredSize(client, *config) << "; stewardctl status shows progress)\n";
  return 0;
}

}  // namespace

std::string RemovalRefusal(const ClusterView& view, const std::string& node,
                           const std::string& peer_url) {
  const MemberRow* row = MemberOn(view, peer_url);
  if (row == nullptr) return "";
  if (view.leader_id == 0) return "the cluster has no leader";
  if (row->member.is_learner) return "";  // a learner does not count for quorum
  const int after = view.voters - 1;
  if (after < 1) return absl::StrCat("node ", node, "'s member is the last voting member");
  const int healthy_after = view.healthy_voters - (row->healthy ? 1 : 0);
  if (healthy_after < Quorum(after)) {
    return absl::StrCat("removing ", Label(*row), " would leave ", healthy_after, " healthy of ",
                        after, " voting members, below their quorum of ", Quorum(after));
  }
  return "";
}

// For -o json: the maintenance state as it stands after the command (status's
// steward.maintenance), when the cluster answers.
std::function<void(nlohmann::json*)> MaintenanceAfter(const Common& c) {
  return [&c](nlohmann::json* j) {
    int rc = 0;
    auto config = ConfigFor(c, "maintenance", &rc);
    if (!config) return;
    EtcdClient client(config->ClusterClientUrls(), ClientOptions(c));
    nlohmann::json state = ReadStewardState(client, *config);
    if (state.contains("maintenance")) (*j)["maintenance"] = state["maintenance"];
  };
}

void AddMaintenanceCommands(CLI::App& app, Common* common, Commands* commands) {
  // CLI11 binds to these; the commands' closures keep them alive.
  auto pause_args = std::make_shared<PauseArgs>();
  CLI::App* pause = app.add_subcommand(
      "pause", "stop the steward leader from replacing a node (or anything) for a while");
  AddCommonFlags(pause, common, true);
  pause->add_option("--node", pause_args->node, "the node to pause (default: the whole cluster)");
  pause->add_option("--for", pause_args->duration,
                    "how long (default 1h, at most 7d; e.g. 30m, 2d)");
  pause->add_option("--reason", pause_args->reason, "why (shown in status)")->required();
  commands->push_back({pause, [common, pause_args] {
                         return WithJsonResult(
                             *common, "pause", [&] { return RunPause(*common, *pause_args); },
                             MaintenanceAfter(*common));
                       }});

  auto resume_node = std::make_shared<std::string>();
  CLI::App* resume = app.add_subcommand("resume", "end a pause (or a drain)");
  AddCommonFlags(resume, common, true);
  resume->add_option("--node", *resume_node, "the node (default: the cluster-wide pause)");
  commands->push_back({resume, [common, resume_node] {
                         return WithJsonResult(
                             *common, "resume", [&] { return RunResume(*common, *resume_node); },
                             MaintenanceAfter(*common));
                       }});

  auto move_node = std::make_shared<std::string>();
  CLI::App* move = app.add_subcommand("move-leader", "move etcd's leadership to NODE's member");
  AddCommonFlags(move, common, true);
  move->add_option("node", *move_node, "the node whose member should lead")->required();
  commands->push_back({move, [common, move_node] { return RunMoveLeader(*common, *move_node); }});

  auto drain_args = std::make_shared<PauseArgs>();
  CLI::App* drain = app.add_subcommand(
      "drain", "move etcd leadership away from NODE, then pause it (resume --node ends it)");
  AddCommonFlags(drain, common, true);
  drain->add_option("node", drain_args->node, "the node")->required();
  drain->add_option("--for", drain_args->duration, "how long (default 1h, at most 7d)");
  drain->add_option("--reason", drain_args->reason, "why (shown in status)");
  commands->push_back({drain, [common, drain_args] {
                         return WithJsonResult(
                             *common, "drain", [&] { return RunDrain(*common, *drain_args); },
                             MaintenanceAfter(*common));
                       }});

  struct RemoveArgs {
    std::string node, reason;
    bool yes = false, force = false;
  };
  auto remove_args = std::make_shared<RemoveArgs>();
  CLI::App* remove =
      app.add_subcommand("remove-node",
                         "remove NODE's member for good (quorum-checked, a backup first); the "
                         "leader does not add it back until readd-node");
  AddCommonFlags(remove, common, true);
  remove->add_option("node", remove_args->node, "the node")->required();
  remove->add_option("--reason", remove_args->reason, "why (shown in status)");
  remove->add_flag("--yes", remove_args->yes, "do not ask for confirmation");
  remove->add_flag("--force", remove_args->force, "go on when the backup fails");
  commands->push_back({remove, [common, remove_args] {
                         return WithJsonResult(
                             *common, "remove-node",
                             [&] {
                               return RunRemoveNode(*common, remove_args->node, remove_args->reason,
                                                    remove_args->yes, remove_args->force);
                             },
                             MaintenanceAfter(*common));
                       }});

  auto readd_node = std::make_shared<std::string>();
  CLI::App* readd = app.add_subcommand(
      "readd-node", "undo remove-node: the leader adds NODE back (a learner, then a voter)");
  AddCommonFlags(readd, common, true);
  readd->add_option("node", *readd_node, "the node")->required();
  commands->push_back({readd, [common, readd_node] {
                         return WithJsonResult(
                             *common, "readd-node",
                             [&] { return RunReaddNode(*common, *readd_node); },
                             MaintenanceAfter(*common));
                       }});
}

}  // namespace steward
