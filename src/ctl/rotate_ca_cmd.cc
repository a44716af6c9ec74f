#include "ctl/rotate_ca_cmd.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backup/open.h"
#include "common/files.h"
#include "ctl/status.h"
#include "peer/client.h"
#include "pki/ca_rotation.h"
#include "pki/pki.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct RotateArgs {
  std::string new_dir;  // holds ca.crt and ca.key (stewardctl pki init --dir makes them)
  std::string old_dir;  // the old CA's directory, for the client certificates issued from it
  int through_phase = 3;
  int wait_seconds = 120;
  bool dry_run = false, yes = false, force = false;
};

const char* PhaseName(int phase) {
  switch (phase) {
    case 1:
      return "trust the old and the new CA (etcd restarts)";
    case 2:
      return "issue every certificate from the new CA";
    case 3:
      return "trust only the new CA (etcd restarts)";
  }
  return "?";
}

// The phase node `st` reports for rotation `id` (0: none).
int PhaseOf(const peer::NodeState& st, const std::string& id) {
  const std::string prefix = id + " phase ";
  if (st.ca_rotation().rfind(prefix, 0) != 0) return 0;
  return std::atoi(st.ca_rotation().c_str() + prefix.size());
}

// The order within a phase: nodes without a member first, then the members, the etcd leader
// last (each restart of a leader costs an election).
std::vector<std::string> Order(const Config& config, const ClusterView& v) {
  std::vector<std::string> members, leader, others;
  for (const NodeSpec& n : config.cluster.nodes) {
    const MemberRow* row = nullptr;
    for (const auto& r : v.members) {
      for (const auto& u : r.member.peer_urls) {
        if (u == config.PeerUrl(n)) row = &r;
      }
    }
    if (row == nullptr) {
      others.push_back(n.name);
    } else if (row->member.id == v.leader_id) {
      leader.push_back(n.name);
    } else {
      members.push_back(n.name);
    }
  }
  others.insert(others.end(), members.begin(), members.end());
  others.insert(others.end(), leader.begin(), leader.end());
  return others;
}

// Why the rotation may not go on now ("" if it may): every agent answers, every member is
// healthy, all run one etcd version, and no restore is under way.
std::string Refusal(const Config& config, const std::map<std::string, peer::NodeState>& states,
                    const ClusterView& v) {
  std::vector<std::string> silent;
  for (const NodeSpec& n : config.cluster.nodes) {
    if (!states.count(n.name)) silent.push_back(n.name);
  }
  if (!silent.empty()) {
    return absl::StrCat("the agent of ", absl::StrJoin(silent, ", "),
                        " does not answer: every node must take each phase");
  }
  if (!v.healthy) {
    std::vector<std::string> bad;
    for (const auto& r : v.members) {
      if (!r.healthy) bad.push_back(r.member.name.empty() ? "(unnamed)" : r.member.name);
    }
    return absl::StrCat("the cluster is not healthy",
                        bad.empty() ? "" : absl::StrCat(" (", absl::StrJoin(bad, ", "), ")"),
                        ": a phase restarts members one at a time, which a degraded cluster "
                        "may not survive");
  }
  std::string version;
  for (const auto& r : v.members) {
    if (!r.status) continue;
    if (!version.empty() && r.status->version != version) {
      return "the members run different etcd versions: an upgrade is under way";
    }
    version = r.status->version;
  }
  if (auto store = OpenStore(config.backup); store.ok() && *store != nullptr) {
    if (RestoreMayBeUnderWay(**store, config.cluster.name)) return "a restore is under way";
  }
  return "";
}

// The client certificates in `old_dir` (pki issue's) without a counterpart from the new CA in
// `new_dir`: applications that lose access once phase 3 drops the old CA.
std::vector<std::string> OldClients(const std::string& old_dir, const std::string& new_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  const auto now = std::chrono::system_clock::now();
  for (const auto& e : fs::directory_iterator(old_dir, ec)) {
    if (e.path().extension() != ".crt" || e.path().stem() == "ca") continue;
    if (!ChainsTo(e.path().string(), old_dir + "/ca.crt", now).ok()) continue;
    const std::string renewed = new_dir + "/" + e.path().filename().string();
    if (ChainsTo(renewed, new_dir + "/ca.crt", now).ok()) continue;
    out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int RunRotateCa(const Common& c, const RotateArgs& a) {
  int rc = 0;
  auto config = ConfigFor(c, "pki rotate-ca", &rc);
  if (!config) return rc;
  if (config->tls.mode != "issued") {
    std::cerr << "stewardctl pki rotate-ca: tls.mode is " << config->tls.mode
              << ": only the agents' own CA (tls.mode: issued) is rotated by them; for files "
                 "mode see docs/operations.md, \"Rotate the CA\"\n";
    return 2;
  }
  if (a.through_phase < 1 || a.through_phase > 3) {
    std::cerr << "stewardctl pki rotate-ca: --through-phase must be 1, 2 or 3\n";
    return 2;
  }
  auto cert = ReadFile(a.new_dir + "/ca.crt");
  auto key = ReadFile(a.new_dir + "/ca.key");
  if (!cert.ok() || !key.ok()) {
    std::cerr << "stewardctl pki rotate-ca: --new-ca-dir " << a.new_dir << ": "
              << (!cert.ok() ? cert.status().message() : key.status().message())
              << " (stewardctl pki init --dir DIR makes ca.crt and ca.key)\n";
    return 2;
  }
  if (absl::Status s = CheckCaPair(*cert, *key); !s.ok()) {
    std::cerr << "stewardctl pki rotate-ca: --new-ca-dir " << a.new_dir << ": " << s.message()
              << "\n";
    return 2;
  }
  // The same new CA gives the same id: running the command again continues the rotation.
  const std::string id = CertFingerprint(*cert).substr(0, 16);
  const std::string old_dir =
      a.old_dir.empty() ? fs::path(config->tls.ca_cert).parent_path().string() : a.old_dir;
  const EtcdClient::Options o = ClientOptions(c);
  auto observe = [&](std::map<std::string, peer::NodeState>* states, ClusterView* v) {
    *states = AgentStates(*config, ClientOptions(c).credentials, std::chrono::seconds(3));
    EtcdClient client(config->ClusterClientUrls(), ClientOptions(c));
    *v = CollectStatus(client, o.timeout);
  };
  std::map<std::string, peer::NodeState> states;
  ClusterView view;
  observe(&states, &view);
  if (std::string why = Refusal(*config, states, view); !why.empty()) {
    std::cerr << "stewardctl pki rotate-ca: not now: " << why << "\n";
    return 1;
  }
  std::cout << "CA rotation " << id << " of cluster " << config->cluster.name << " to the CA in "
            << a.new_dir << ", node by node (" << absl::StrJoin(Order(*config, view), ", ")
            << "; the etcd leader last):\n";
  for (int phase = 1; phase <= a.through_phase; ++phase) {
    std::vector<std::string> done;
    for (const auto& [name, st] : states) {
      if (PhaseOf(st, id) >= phase) done.push_back(name);
    }
    std::cout << "  phase " << phase << ": " << PhaseName(phase)
              << (done.empty() ? "" : absl::StrCat(" (done on ", absl::StrJoin(done, ", "), ")"))
              << "\n";
  }
  if (a.dry_run) return 0;
  if (!a.yes) {
    std::cout << "Continue? [y/N] " << std::flush;
    if (!Confirmed()) {
      std::cerr << "not rotated\n";
      return 1;
    }
  }
  for (int phase = 1; phase <= a.through_phase; ++phase) {
    if (phase == 3) {
      const std::vector<std::string> old = OldClients(old_dir, a.new_dir);
      if (!old.empty()) {
        std::cerr << "client certificates issued by the old CA (in " << old_dir
                  << ") lose access once it is dropped: " << absl::StrJoin(old, ", ")
                  << "; reissue each with `stewardctl pki issue --dir " << a.new_dir
                  << " --client NAME`\n";
        if (!a.force) {
          std::cerr << "stewardctl pki rotate-ca: phase 3 waits for them (--force drops the old "
                       "CA anyway); phases 1 and 2 are done, run the command again to go on\n";
          return 1;
        }
      }
    }
    observe(&states, &view);
    for (const std::string& name : Order(*config, view)) {
      if (auto it = states.find(name); it != states.end() && PhaseOf(it->second, id) >= phase) {
        continue;  // a re-run: this node is there already
      }
      if (std::string why = Refusal(*config, states, view); !why.empty()) {
        std::cerr << "stewardctl pki rotate-ca: stopped before phase " << phase << " on node "
                  << name << ": " << why << "; run the command again once it is fixed\n";
        return 1;
      }
      const NodeSpec* node = nullptr;
      for (const auto& n : config->cluster.nodes) {
        if (n.name == name) node = &n;
      }
      peer::SetTrustRequest req;
      req.set_rotation_id(id);
      req.set_phase(phase);
      req.set_ca_cert_pem(*cert);
      req.set_ca_key_pem(*key);
      req.set_by(WhoAmI());
      const auto started = std::chrono::steady_clock::now();
      absl::Status s = PeerClient(config->AgentAddress(*node), ClientOptions(c).credentials)
                           .SetTrust(req, std::chrono::seconds(60));
      if (!s.ok()) {
        std::cerr << "stewardctl pki rotate-ca: phase " << phase << " on node " << name << ": "
                  << s.message() << "; run the command again to go on\n";
        return 1;
      }
      // The agent restarts itself in place a moment after the step: wait (bounded) until that
      // is over, it answers in this phase, every other agent answers and every member is
      // healthy again, so the next node's step is not refused for a restart in passing.
      bool back = false;
      const auto deadline = started + std::chrono::seconds(a.wait_seconds);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      while (std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        observe(&states, &view);
        auto it = states.find(name);
        if (it != states.end() && PhaseOf(it->second, id) >= phase && view.healthy &&
            states.size() == config->cluster.nodes.size()) {
          back = true;
          break;
        }
      }
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (!back) {
        std::cerr << "stewardctl pki rotate-ca: node " << name << " is not back in phase " << phase
                  << " with every member healthy within " << a.wait_seconds
                  << "s; see its agent's log, then run the command again\n";
        return 1;
      }
      std::cout << "phase " << phase << " on " << name << ": done in "
                << absl::StrCat(static_cast<int>(secs * 10) / 10.0)
                << " s; the cluster is healthy\n";
    }
  }
  if (a.through_phase < 3) {
    std::cout << "CA rotation " << id << ": phases 1-" << a.through_phase
              << " done; run the command again (without --through-phase) to finish\n";
    return 0;
  }
  std::cout << "CA rotation " << id << " done: every node trusts only the new CA and uses "
            << "certificates issued from it. On every node, put " << a.new_dir
            << "/ca.crt and ca.key where tls.ca_cert and tls.ca_key point (or point them "
               "there); until then the agents keep the new CA under <data_dir>/tls.\n";
  return 0;
}

}  // namespace

void AddRotateCaCommand(CLI::App* pki, Common* common, Commands* commands) {
  auto args = std::make_shared<RotateArgs>();
  CLI::App* rotate = pki->add_subcommand(
      "rotate-ca",
      "replace the cluster's CA (tls.mode issued) node by node without downtime: trust the old "
      "and the new CA, issue from the new, trust only the new");
  AddCommonFlags(rotate, common, false);
  rotate
      ->add_option("--new-ca-dir", args->new_dir,
                   "the new CA's directory, with ca.crt and ca.key (stewardctl pki init "
                   "--dir DIR makes them)")
      ->required();
  rotate->add_option("--old-ca-dir", args->old_dir,
                     "the old CA's directory, whose client certificates (pki issue's) must be "
                     "reissued from the new CA before phase 3; default: tls.ca_cert's");
  rotate->add_option("--through-phase", args->through_phase,
                     "stop after this phase (1-3; default 3): switch applications between "
                     "phases 2 and 3");
  rotate->add_option("--wait", args->wait_seconds,
                     "seconds each node may take to come back healthy (default 120)");
  rotate->add_flag("--dry-run", args->dry_run, "print the plan and change nothing");
  rotate->add_flag("--yes", args->yes, "do not ask for confirmation");
  rotate->add_flag("--force", args->force,
                   "drop the old CA although client certificates issued from it remain");
  commands->push_back({rotate, [common, args] { return RunRotateCa(*common, *args); }});
}

}  // namespace steward
