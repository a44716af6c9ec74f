// Test harness: N real steward agents (each running a real etcd) on 127.0.X.11, .12, ...
// with data in a private temp dir. Every wait is bounded; everything started is stopped by PID
// in the destructor.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "ctl/status.h"
#include "etcd/client.h"

namespace steward::testing {

struct Proc {
  pid_t pid = 0;
  std::string log;
};

// Runs `argv` to completion (bounded by `timeout`), capturing stdout and stderr together.
struct RunResult {
  int exit_code = -1;
  std::string output;
};
RunResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout);

// "3.5.16" from `binary --version`; "" if it does not run or is not etcd.
std::string EtcdVersionOf(const std::string& binary);

// Starts `argv` with stdout and stderr appended to `out_path`; its PID, or -1.
pid_t SpawnTo(const std::vector<std::string>& argv, const std::string& out_path);

// Polls `cond` every 200ms until it is true or `timeout` passes. Returns its last value.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

// The etcd a test cluster runs by default (etcd.binary): Debian's newest 3.5 (sid's, fetched by
// scripts/install-deps.sh), and Debian 12's own 3.4 for the tests about upgrading or adopting it.
inline constexpr char kMainEtcd[] = ETCD_MAIN_BIN;
inline constexpr char kDebianEtcd[] = "/usr/bin/etcd";

class TestCluster {
 public:
  // `subnet` is the third octet: nodes get 127.0.<subnet>.11 and up. Use one subnet per test.
  // `cluster_extra` is appended to the cluster section of every config (indented YAML lines).
  // `top_extra` is appended at the top level (e.g. a backup: section); "ROOT" in it is replaced
  // by the test's temp dir.
  // `netns` (root only; the fault suite's partitions): each node runs in a network namespace
  // of its own (st<subnet>n<i>), joined by veth pairs to a bridge (st<subnet>br, 10.211.<subnet>
  // .254/24) in this one, and nodes get 10.211.<subnet>.11 and up. Falls back to loopback when
  // the namespaces cannot be made (netns() says which).
  TestCluster(int subnet, int nodes, int size, const std::string& cluster_extra = "",
              const std::string& top_extra = "", bool netns = false);
  std::string Root() const { return root_; }
  int Nodes() const { return nodes_; }
  ~TestCluster();

  std::string ConfigPath(int i) const;  // i is 0-based
  bool netns() const { return netns_; }
  // With netns: cuts node i off from every other node and from this process (its link down),
  // and heals it. (This kernel has no tc classifiers: link state and routes are the tools.)
  bool Partition(int i);
  bool Heal(int i);
  // With netns: cuts only the link between nodes i and j (blackhole routes in both
  // namespaces); both still reach every other node. `cut` false heals it.
  bool CutLink(int i, int j, bool cut);
  // With netns: drops only what node `from` sends to node `to` (a blackhole route in `from`'s
  // namespace); `to`'s packets still reach `from`. `cut` false heals it.
  bool CutOneWay(int from, int to, bool cut);
  // Replaces `from` with `to` in every node's config (a value known only after the cluster's
  // network exists, such as the address of a store in the test's namespace).
  void ReplaceInConfigs(const std::string& from, const std::string& to);
  // Every node's etcd.binary becomes `binary` (before the agents start).
  void UseEtcd(const std::string& binary) {
    ReplaceInConfigs(std::string("  binary: ") + kMainEtcd + "\n", "  binary: " + binary + "\n");
  }
  std::string DataDir(int i) const;
  std::string Host(int i) const;
  std::string ClientUrl(int i) const;
  std::vector<std::string> ClientUrls() const;

  void StartAgent(int i);
  // The same from another copy of the binary (an upgrade test).
  void StartAgentFrom(int i, const std::string& binary);
  pid_t AgentPid(int i) const { return agents_[static_cast<size_t>(i)].pid; }
  // The agent with `args` instead of --config, and `env` ("K=V") added to its environment
  // (the drop-in tests).
  void StartAgentWith(int i, const std::vector<std::string>& args,
                      const std::vector<std::string>& env);
  // Sends `sig` to the agent; for SIGTERM/SIGINT waits (bounded) for it to exit.
  void SignalAgent(int i, int sig);
  bool AgentRunning(int i);
  // kill -9 of node i's etcd (by the PID in its pid file, verified as ours).
  void KillEtcd(int i);
  // The etcd pid from the node's pid file, if that process is our etcd and alive.
  std::optional<pid_t> EtcdPid(int i) const;
  // How many live etcd processes serve node i's data dir (must never exceed 1).
  int EtcdProcessCount(int i) const;

  // A client of the test's etcd with the test's admin certificate (TLS is on in every test).
  EtcdClient Client(std::vector<std::string> urls) const;
  EtcdClient Client(const std::string& url) const { return Client(std::vector<std::string>{url}); }
  std::string CaCert() const { return root_ + "/pki/ca.crt"; }
  std::string AdminCert() const { return root_ + "/pki/admin.crt"; }
  std::string AdminKey() const { return root_ + "/pki/admin.key"; }

  ClusterView Status() const;
  // Voting members that are healthy, by name (sorted).
  std::vector<std::string> HealthyVoters() const;
  // Until exactly `names` are the healthy voting members, no learner and nothing else listed.
  bool WaitVoters(const std::vector<std::string>& names, std::chrono::seconds timeout) const;
  // Runs stewardctl with `args` (config of node 0 appended when with_config).
  RunResult Ctl(std::vector<std::string> args, bool with_config = true,
                std::chrono::seconds timeout = std::chrono::seconds(30)) const;
  // Until every one of `members` members is healthy (or the timeout).
  bool WaitHealthy(size_t members, std::chrono::seconds timeout) const;

  // GET `path` from node i's admin port (cluster.ports.admin, 2391) over TLS, with the test's
  // admin client certificate or without any. Status 0: no HTTP answer.
  RunResult AdminGet(int i, const std::string& path, bool with_cert = true) const;

  // On failure, the tail of every agent's and etcd's log, for the test output.
  std::string Logs() const;

 private:
  bool SetUpNetns();
  void TearDownNetns();
  std::string Namespace(int i) const;
  std::string Link(int i) const;                   // node i's veth end in this namespace
  std::vector<std::string> Launcher(int i) const;  // what runs an agent in node i's namespace

  std::string root_;
  std::string tls_yaml_;
  int subnet_;
  int nodes_;
  bool netns_ = false;
  std::vector<Proc> agents_;
};

// A writer of sequential keys (/roll/<k>) through every endpoint, each one acknowledged or not,
// every 20 ms until Stop(); then Missing() counts the acknowledged keys that are not there.
class SequentialWriter {
 public:
  explicit SequentialWriter(const TestCluster& c);
  ~SequentialWriter() { Stop(); }
  void Stop();
  int Missing(const TestCluster& c);
  std::atomic<int> acked{0}, failed{0};

 private:
  EtcdClient client_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<int> ledger_;
  std::thread thread_;
};

// Config snippets shared by the backup and safety tests: a leader that takes over fast, and a
// file store under the test's temp dir (ROOT is replaced by it).
inline constexpr char kFastLeader[] = "  leader_lease_ttl: 2s\n  reconcile_interval: 300ms\n";
inline constexpr char kFileBackup[] = "backup:\n  store: file://ROOT/backups\n  interval: 1h\n";
// The same without delta backups: a restore after total loss is the full backup alone.
inline constexpr char kFileBackupNoDeltas[] =
    "backup:\n  store: file://ROOT/backups\n  interval: 1h\n  delta_interval: 0s\n";

// Who leads, and what the leader recorded (tests of the leader's rules).
// The node index (0-based) of etcd's leader, or -1.
int EtcdLeader(const TestCluster& c);
// The node index whose agent is the steward leader (its admin port's /leader), or -1.
int StewardLeader(const TestCluster& c);
// A member's ID by name, 0 if not listed.
uint64_t MemberIdOf(const TestCluster& c, const std::string& name);
// `stewardctl history -o json`: each record's action, oldest first (empty if unreadable).
std::vector<std::string> HistoryActions(const TestCluster& c);
bool Has(const std::vector<std::string>& v, const std::string& s);

// Helpers shared by the backup and safety tests.
// Puts k=v through any node, retried (bounded: 15 s); a failure is a test failure.
void Put(const TestCluster& c, const std::string& k, const std::string& v);
// Reads k through `node` ("<absent>" if missing); retried (bounded) because a freshly restored
// cluster may still be settling its leadership. nullopt if it never answered.
std::optional<std::string> Get(const TestCluster& c, int node, const std::string& k);
// `stewardctl backup`; returns the backup's name ("" and a test failure if it failed).
std::string TakeBackup(const TestCluster& c);
// Every machine dies at once with its disk: agents and etcds are killed (no clean handover, so
// no new leader takes one last backup), then every data dir is wiped.
void LoseEverything(TestCluster& c, int nodes);

}  // namespace steward::testing
