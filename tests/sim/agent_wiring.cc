// An agent's life: Boot wires a node's agent over the simulated seams: the etcd clients, the
// initial agents, the node's disk and runner, TermGuard, and then the control objects
// (LocalNode, Leadership, the RestoreCoordinator and the Reconciler) through the agent's own
// WireControl (src/agent/control_wiring.h), with sequential fan-out and the world's random
// stream for nonces. Kill destroys those objects as a dead process's memory (a crash point
// unwinds the agent's code first). The disk, etcd (unless killed too) and the store stay as
// they were.
//
// Left out, as the simulation does not model them: the history, the backup scheduler, the
// delta writer, SpaceKeeper, AuthKeeper, the peer and admin servers, SelfPeer for the agent's
// own node, the etcd log readers and the join watch. Its local client also asks the fence URL,
// and the cluster client uses AllClientUrls (the agent: ClusterClientUrls, with adopt.endpoints).
#include <chrono>

#include "agent/control_wiring.h"
#include "etcd/keys.h"
#include "etcd/version.h"
#include "sim/clock_model.h"
#include "sim/etcd_api.h"
#include "sim/network.h"
#include "sim/runner_model.h"
#include "sim/world.h"

namespace steward::sim {

using std::chrono::milliseconds;

void World::Boot(int i) {
  Node& n = *nodes_[i];
  n.reconciler.reset();
  n.restorer.reset();
  n.leadership.reset();
  n.local.reset();
  n.agent_up = true;
  n.restart_at = -1;
  n.runner_wanted = false;
  n.restarts = 0;
  std::vector<std::string> others;
  for (const auto& m : nodes_) {
    if (m->index != i) others.push_back(m->config.ClientUrl(m->spec));
  }
  n.peers_client = std::make_unique<SimEtcd>(this, i, others);
  n.cluster_client = std::make_unique<SimEtcd>(this, i, n.config.AllClientUrls());
  n.local_client = std::make_unique<SimEtcd>(
      this, i, std::vector<std::string>{n.config.ClientUrl(n.spec), n.config.FenceUrl(n.spec)});
  n.initial_agents.clear();
  for (int k = 0; k < n.config.cluster.size; ++k) {
    if (k != i) n.initial_agents[nodes_[k]->spec.name] = std::make_unique<SimPeer>(this, i, k);
  }
  // The node side, as the agent wires it (Agent::Wire), over the simulated seams.
  if (!n.disk_seam) n.disk_seam = std::make_unique<SimDisk>(this, i);
  n.runner = std::make_unique<SimRunner>(this, i);
  // As Agent's constructor: the version the marker names, else etcd.binary.
  auto chosen = n.config.etcd.versions.find(n.disk.etcd_version);
  n.binary = chosen != n.config.etcd.versions.end() ? chosen->second : n.config.etcd.binary;
  SimDisk* disk = n.disk_seam.get();
  n.terms = std::make_unique<TermGuard>(
      [disk] { return disk->Read(Marker::kLeaderTerm); },
      [disk](const std::string& text) { return disk->Write(Marker::kLeaderTerm, text); });
  LocalNodeEnv le;
  le.disk = disk;
  le.runner = n.runner.get();
  le.peers = n.peers_client.get();
  le.local = n.local_client.get();
  for (auto& [name, p] : n.initial_agents) le.initial_agents[name] = p.get();
  le.store = &store_;
  le.clock = n.clock.get();
  le.parallel = false;
  le.before_restart = [this, i] { CheckRestartSafe(i); };
  if (o_.upgraded) {  // what the agent's probe finds (Agent::Start)
    std::vector<EtcdBinary> binaries = {
        {"", n.config.etcd.binary, VersionOfBinary(n.config.etcd.binary), ""}};
    for (const auto& [version, path] : n.config.etcd.versions) {
      binaries.push_back({version, path, VersionOfBinary(path), ""});
    }
    le.binaries = [binaries] { return binaries; };
  }
  ControlEnv env;
  env.clock = n.clock.get();
  env.parallel = false;
  env.dial_agent = [this, i](const NodeSpec& target) -> std::unique_ptr<PeerApi> {
    for (const auto& m : nodes_) {
      if (m->spec.name == target.name) return std::make_unique<SimPeer>(this, i, m->index);
    }
    return nullptr;
  };
  env.dial_etcd = [this, i](const std::vector<std::string>& urls,
                            milliseconds) -> std::unique_ptr<EtcdApi> {
    return std::make_unique<SimEtcd>(this, i, urls);
  };
  env.nonce = [this] { return static_cast<uint32_t>(rng_() & 0xffff); };
  // The agent's own wiring of the control objects (src/agent/control_wiring.h).
  ControlSeams seams;
  seams.config = &n.config;
  seams.cluster = n.cluster_client.get();
  seams.store = &store_;
  seams.node = std::move(le);
  seams.restore_env = env;
  seams.reconcile_env = env;
  ControlParts parts = WireControl(std::move(seams));
  n.local = std::move(parts.node);
  n.leadership = std::move(parts.leadership);
  n.restorer = std::move(parts.restorer);
  n.reconciler = std::move(parts.reconciler);
  // A restarted agent adopts an etcd that still runs; otherwise it decides afresh.
  if (n.runner->Adopt()) n.local->AdoptRunning();
  n.next_restore_pass = now_;
  dirty_ = true;
}

void World::Kill(int i, bool etcd_too) {
  Node& n = *nodes_[i];
  n.agent_up = false;
  n.reconciler.reset();
  n.restorer.reset();
  n.leadership.reset();
  n.local.reset();
  n.terms.reset();
  n.runner.reset();
  n.runner_wanted = false;  // nobody restarts etcd while the agent is down
  if (etcd_too) n.etcd_up = false;
  n.restart_at = now_ + 1000 + static_cast<Ms>(rng_() % 20000);
  dirty_ = true;
}

}  // namespace steward::sim
