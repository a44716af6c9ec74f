#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "etcd/client.h"
#include "etcd/version.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "pki/node_certs.h"
#include "pki/pki.h"
#include "runner/process_runner.h"

extern char** environ;

namespace steward::testing {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (cond()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

pid_t SpawnTo(const std::vector<std::string>& argv, const std::string& out_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

namespace {

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path) {
  return SpawnTo(argv, out_path);
}

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  std::string l;
  while (std::getline(in, l)) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += all[i] + "\n";
  }
  return out;
}

// Waits (bounded) for a child to exit; returns its exit status or -1.
int WaitChild(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -2;
}

}  // namespace

std::string EtcdVersionOf(const std::string& binary) {
  RunResult r = RunCommand({binary, "--version"}, std::chrono::seconds(10));
  return r.exit_code == 0 ? VersionFromOutput(r.output) : "";
}

RunResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  std::string out =
      fs::temp_directory_path() /
      absl::StrCat("steward-run-", getpid(), "-", Clock::now().time_since_epoch().count());
  RunResult r;
  pid_t pid = Spawn(argv, out);
  if (pid <= 0) return r;
  r.exit_code = WaitChild(pid, timeout);
  if (r.exit_code == -2) {
    kill(pid, SIGKILL);
    WaitChild(pid, std::chrono::seconds(5));
  }
  auto text = ReadFile(out);
  if (text.ok()) r.output = *text;
  fs::remove(out);
  return r;
}

TestCluster::TestCluster(int subnet, int nodes, int size, const std::string& cluster_extra,
                         const std::string& top_extra, bool netns)
    : subnet_(subnet), nodes_(nodes), agents_(static_cast<size_t>(nodes)) {
  if (netns) netns_ = SetUpNetns();
  root_ = fs::temp_directory_path() / absl::StrCat("steward-it-", getpid(), "-", subnet);
  fs::remove_all(root_);
  fs::create_directories(root_);
  // The file store's root (ROOT/backups in configs): the operator creates it, agents never do.
  fs::create_directories(root_ + "/backups");
  // Every test runs with TLS on: a CA of its own, agents issue their certificates from it.
  fs::create_directories(root_ + "/pki");
  if (absl::Status s = CreateCa(root_ + "/pki", "test CA"); !s.ok()) {
    ADD_FAILURE() << "creating the test CA: " << s;
  }
  CertRequest admin;
  admin.common_name = "test-admin";
  admin.client_auth = true;
  admin.uris = {kOperatorRoleUri};  // as `stewardctl pki init` issues it
  admin.lifetime = std::chrono::hours(24);
  if (absl::Status s = IssueCert(CaCert(), root_ + "/pki/ca.key", admin, AdminCert(), AdminKey());
      !s.ok()) {
    ADD_FAILURE() << "issuing the test admin certificate: " << s;
  }
  tls_yaml_ = absl::StrCat("tls:\n  mode: issued\n  ca_cert: ", CaCert(), "\n  ca_key: ", root_,
                           "/pki/ca.key\n");
  std::string nodes_yaml;
  for (int i = 0; i < nodes; ++i) {
    nodes_yaml += absl::StrCat("    - {name: n", i + 1, ", host: ", Host(i), "}\n");
  }
  for (int i = 0; i < nodes; ++i) {
    std::string yaml = absl::StrCat(
        "cluster:\n  name: it", subnet, "\n  size: ", size, "\n", cluster_extra, "  nodes:\n",
        nodes_yaml, "node:\n  name: n", i + 1, "\n  data_dir: ", DataDir(i),
        "\n  log_level: debug\n", "etcd:\n  binary: ", kMainEtcd, "\n  etcdutl: ", ETCDUTL_BIN,
        "\n  stop_timeout: 5s\n", "  restart_backoff_min: 200ms\n  restart_backoff_max: 2s\n",
        tls_yaml_, absl::StrReplaceAll(top_extra, {{"ROOT", root_}}));
    std::ofstream(ConfigPath(i)) << yaml;
    // Configs may hold an S3 secret: the agent refuses one that others can read.
    fs::permissions(ConfigPath(i), fs::perms::owner_read | fs::perms::owner_write);
  }
}

TestCluster::~TestCluster() {
  for (int i = 0; i < nodes_; ++i) {
    if (agents_[static_cast<size_t>(i)].pid > 0) SignalAgent(i, SIGTERM);
  }
  // Any etcd an agent left behind (e.g. after kill -9 of the agent): by PID, verified as ours.
  for (int i = 0; i < nodes_; ++i) {
    if (auto pid = EtcdPid(i)) {
      kill(*pid, SIGKILL);
      WaitFor([&] { return !EtcdPid(i).has_value(); }, std::chrono::seconds(5));
    }
  }
  if (netns_) TearDownNetns();
  if (!getenv("STEWARD_KEEP_TEST_DIRS")) fs::remove_all(root_);
}

RunResult TestCluster::AdminGet(int i, const std::string& path, bool with_cert) const {
  std::unique_ptr<httplib::SSLClient> cli =
      with_cert ? std::make_unique<httplib::SSLClient>(Host(i), 2391, AdminCert(), AdminKey())
                : std::make_unique<httplib::SSLClient>(Host(i), 2391);
  cli->set_ca_cert_path(CaCert());
  cli->enable_server_certificate_verification(true);
  cli->set_connection_timeout(3, 0);
  cli->set_read_timeout(5, 0);
  RunResult r;
  r.exit_code = 0;
  if (auto res = cli->Get(path.c_str())) {
    r.exit_code = res->status;
    r.output = res->body;
  }
  return r;
}

std::string TestCluster::Namespace(int i) const { return absl::StrCat("st", subnet_, "n", i); }
std::string TestCluster::Link(int i) const { return absl::StrCat("st", subnet_, "v", i); }

std::vector<std::string> TestCluster::Launcher(int i) const {
  if (!netns_) return {};
  return {"/usr/sbin/ip", "netns", "exec", Namespace(i)};
}

namespace {
bool Ip(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/sbin/ip");
  RunResult r = RunCommand(args, std::chrono::seconds(10));
  if (r.exit_code != 0) std::cerr << absl::StrJoin(args, " ") << ": " << r.output;
  return r.exit_code == 0;
}
}  // namespace

bool TestCluster::SetUpNetns() {
  if (geteuid() != 0 || !fs::exists("/usr/sbin/ip")) return false;
  netns_ = true;  // what TearDownNetns removes; also leftovers of an earlier, killed run
  TearDownNetns();
  const std::string bridge = absl::StrCat("st", subnet_, "br");
  bool ok = Ip({"link", "add", bridge, "type", "bridge"}) &&
            Ip({"addr", "add", absl::StrCat("10.211.", subnet_, ".254/24"), "dev", bridge}) &&
            Ip({"link", "set", bridge, "up"});
  for (int i = 0; ok && i < nodes_; ++i) {
    const std::string ns = Namespace(i), link = Link(i), peer = Link(i) + "p";
    ok = Ip({"netns", "add", ns}) && Ip({"netns", "exec", ns, "ip", "link", "set", "lo", "up"}) &&
         Ip({"link", "add", link, "type", "veth", "peer", "name", peer}) &&
         Ip({"link", "set", peer, "netns", ns}) &&
         Ip({"netns", "exec", ns, "ip", "addr", "add",
             absl::StrCat("10.211.", subnet_, ".", 11 + i, "/24"), "dev", peer}) &&
         Ip({"netns", "exec", ns, "ip", "link", "set", peer, "up"}) &&
         Ip({"link", "set", link, "master", bridge}) && Ip({"link", "set", link, "up"});
  }
  if (!ok) {
    TearDownNetns();
    netns_ = false;
  }
  return ok;
}

void TestCluster::TearDownNetns() {
  // Quietly: most of these do not exist on a clean machine.
  for (int i = 0; i < nodes_; ++i) {
    RunCommand({"/usr/sbin/ip", "link", "del", Link(i)}, std::chrono::seconds(10));
    RunCommand({"/usr/sbin/ip", "netns", "del", Namespace(i)}, std::chrono::seconds(10));
  }
  RunCommand({"/usr/sbin/ip", "link", "del", absl::StrCat("st", subnet_, "br")},
             std::chrono::seconds(10));
}

bool TestCluster::Partition(int i) { return netns_ && Ip({"link", "set", Link(i), "down"}); }

bool TestCluster::Heal(int i) { return netns_ && Ip({"link", "set", Link(i), "up"}); }

bool TestCluster::CutLink(int i, int j, bool cut) {
  const bool a = CutOneWay(i, j, cut);
  return CutOneWay(j, i, cut) && a;
}

bool TestCluster::CutOneWay(int from, int to, bool cut) {
  return netns_ && Ip({"netns", "exec", Namespace(from), "ip", "route", cut ? "add" : "del",
                       "blackhole", absl::StrCat(Host(to), "/32")});
}

void TestCluster::ReplaceInConfigs(const std::string& from, const std::string& to) {
  for (int i = 0; i < nodes_; ++i) {
    std::string yaml;
    {
      std::ifstream in(ConfigPath(i));
      yaml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::ofstream(ConfigPath(i), std::ios::trunc) << absl::StrReplaceAll(yaml, {{from, to}});
  }
}

std::string TestCluster::ConfigPath(int i) const {
  return absl::StrCat(root_, "/n", i + 1, ".yaml");
}
std::string TestCluster::DataDir(int i) const { return absl::StrCat(root_, "/n", i + 1); }
std::string TestCluster::Host(int i) const {
  return absl::StrCat(netns_ ? "10.211." : "127.0.", subnet_, ".", 11 + i);
}
std::string TestCluster::ClientUrl(int i) const {
  return absl::StrCat("https://", Host(i), ":2379");
}

EtcdClient TestCluster::Client(std::vector<std::string> urls) const {
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(3000);
  auto creds = TlsChannelCredentials(CaCert(), AdminCert(), AdminKey());
  if (creds.ok()) o.credentials = *creds;
  return EtcdClient(std::move(urls), o);
}
std::vector<std::string> TestCluster::ClientUrls() const {
  std::vector<std::string> out;
  for (int i = 0; i < nodes_; ++i) out.push_back(ClientUrl(i));
  return out;
}

void TestCluster::StartAgent(int i) { StartAgentFrom(i, STEWARD_BIN); }

void TestCluster::StartAgentFrom(int i, const std::string& binary) {
  Proc& p = agents_[static_cast<size_t>(i)];
  p.log = absl::StrCat(root_, "/agent-n", i + 1, ".log");
  std::vector<std::string> argv = Launcher(i);
  argv.insert(argv.end(), {binary, "--config", ConfigPath(i)});
  p.pid = Spawn(argv, p.log);
}

void TestCluster::StartAgentWith(int i, const std::vector<std::string>& args,
                                 const std::vector<std::string>& env) {
  Proc& p = agents_[static_cast<size_t>(i)];
  p.log = absl::StrCat(root_, "/agent-n", i + 1, ".log");
  std::vector<std::string> argv = Launcher(i);
  argv.push_back(STEWARD_BIN);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> names;
  for (const auto& kv : env) {
    const size_t eq = kv.find('=');
    names.push_back(kv.substr(0, eq));
    setenv(names.back().c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  p.pid = Spawn(argv, p.log);
  for (const auto& n : names) unsetenv(n.c_str());
}

void TestCluster::SignalAgent(int i, int sig) {
  Proc& p = agents_[static_cast<size_t>(i)];
  if (p.pid <= 0) return;
  kill(p.pid, sig);
  if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT) {
    int rc = WaitChild(p.pid, std::chrono::seconds(20));
    if (rc == -2) {
      kill(p.pid, SIGKILL);
      WaitChild(p.pid, std::chrono::seconds(5));
    }
    p.pid = 0;
  }
}

void TestCluster::KillEtcd(int i) {
  if (auto pid = EtcdPid(i)) {
    kill(*pid, SIGKILL);
    WaitFor([&] { return !EtcdPid(i).has_value(); }, std::chrono::seconds(10));
  }
}

bool TestCluster::AgentRunning(int i) {
  Proc& p = agents_[static_cast<size_t>(i)];
  if (p.pid <= 0) return false;
  int status;
  return waitpid(p.pid, &status, WNOHANG) == 0;
}

// Our etcd on `data_dir`, whichever of the tests' etcd versions it runs (after a roll, 3.5).
static bool IsOurEtcd(pid_t pid, const std::string& data_dir) {
  for (const char* binary : {kMainEtcd, kDebianEtcd, ETCD35_BIN, ETCD33_BIN}) {
    if (ProcessRunner::IsEtcdFor(pid, binary, data_dir)) return true;
  }
  return false;
}

std::optional<pid_t> TestCluster::EtcdPid(int i) const {
  auto text = ReadFile(DataDir(i) + "/etcd.pid");
  if (!text.ok()) return std::nullopt;
  pid_t pid = static_cast<pid_t>(std::atoi(text->c_str()));
  if (!IsOurEtcd(pid, DataDir(i) + "/etcd")) return std::nullopt;
  return pid;
}

int TestCluster::EtcdProcessCount(int i) const {
  int count = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (IsOurEtcd(std::atoi(name.c_str()), DataDir(i) + "/etcd")) {
      ++count;
    }
  }
  return count;
}

ClusterView TestCluster::Status() const {
  // A fresh client each time: a channel whose first attempts met a not-yet-serving etcd can stay
  // stuck in its TLS handshake backoff for longer than these tests wait.
  EtcdClient client = Client(ClientUrls());
  return CollectStatus(client, std::chrono::milliseconds(3000));
}

bool TestCluster::WaitHealthy(size_t members, std::chrono::seconds timeout) const {
  return WaitFor(
      [&] {
        ClusterView v = Status();
        return v.healthy && v.members.size() == members;
      },
      timeout);
}

std::vector<std::string> TestCluster::HealthyVoters() const {
  std::vector<std::string> out;
  for (const auto& m : Status().members) {
    if (m.healthy && !m.member.is_learner) out.push_back(m.member.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool TestCluster::WaitVoters(const std::vector<std::string>& names,
                             std::chrono::seconds timeout) const {
  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());
  return WaitFor(
      [&] {
        ClusterView v = Status();
        if (!v.healthy || v.members.size() != want.size()) return false;
        std::vector<std::string> got;
        for (const auto& m : v.members) {
          if (m.member.is_learner) return false;
          got.push_back(m.member.name);
        }
        std::sort(got.begin(), got.end());
        return got == want;
      },
      timeout);
}

RunResult TestCluster::Ctl(std::vector<std::string> args, bool with_config,
                           std::chrono::seconds timeout) const {
  args.insert(args.begin(), STEWARDCTL_BIN);
  if (with_config) {
    args.push_back("--config");
    args.push_back(ConfigPath(0));
  }
  return RunCommand(args, timeout);
}

std::string TestCluster::Logs() const {
  std::string out = "---- status ----\n" + RenderStatusTable(Status());
  for (int i = 0; i < nodes_; ++i) {
    out += absl::StrCat("---- agent n", i + 1, " ----\n",
                        Tail(absl::StrCat(root_, "/agent-n", i + 1, ".log"), 40));
    out += absl::StrCat("---- etcd n", i + 1, " ----\n", Tail(DataDir(i) + "/etcd.log", 15));
  }
  return out;
}

void Put(const TestCluster& c, const std::string& k, const std::string& v) {
  EtcdClient w = c.Client(c.ClientUrls());
  EXPECT_TRUE(WaitFor([&] { return w.Put(k, v).ok(); }, std::chrono::seconds(15))) << k;
}

std::optional<std::string> Get(const TestCluster& c, int node, const std::string& k) {
  EtcdClient r = c.Client({c.ClientUrl(node)});
  std::optional<std::string> out;
  WaitFor(
      [&] {
        auto got = r.Get(k);
        if (got.ok()) out = got->value_or("<absent>");
        return got.ok();
      },
      std::chrono::seconds(15));
  return out;
}

std::string TakeBackup(const TestCluster& c) {
  RunResult r = c.Ctl({"backup"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return "";
  // The name is the last line (stderr and stdout are captured together).
  std::string out(absl::StripTrailingAsciiWhitespace(r.output));
  return out.substr(out.rfind('\n') + 1);
}

void LoseEverything(TestCluster& c, int nodes) {
  for (int i = 0; i < nodes; ++i) c.SignalAgent(i, SIGKILL);
  for (int i = 0; i < nodes; ++i) c.KillEtcd(i);
  for (int i = 0; i < nodes; ++i) {
    EXPECT_FALSE(c.EtcdPid(i).has_value());
    fs::remove_all(c.DataDir(i));
  }
}

int EtcdLeader(const TestCluster& c) {
  const ClusterView v = c.Status();
  for (const MemberRow& m : v.members) {
    if (m.member.id == v.leader_id && !m.member.name.empty()) {
      return std::stoi(m.member.name.substr(1)) - 1;
    }
  }
  return -1;
}

int StewardLeader(const TestCluster& c) {
  for (int i = 0; i < c.Nodes(); ++i) {
    if (c.AdminGet(i, "/leader").exit_code == 200) return i;
  }
  return -1;
}

uint64_t MemberIdOf(const TestCluster& c, const std::string& name) {
  for (const auto& m : c.Status().members) {
    if (m.member.name == name) return m.member.id;
  }
  return 0;
}

std::vector<std::string> HistoryActions(const TestCluster& c) {
  std::vector<std::string> out;
  auto r = c.Ctl({"history", "-o", "json"});
  if (r.exit_code != 0) return out;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j) out.push_back(e.value("action", std::string()));
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

SequentialWriter::SequentialWriter(const TestCluster& c) : client_(c.Client(c.ClientUrls())) {
  thread_ = std::thread([this] {
    for (int k = 1; !stop_ && k < 100000; ++k) {
      if (client_.Put(absl::StrCat("/roll/", k), "v").ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ledger_.insert(k);
        ++acked;
      } else {
        ++failed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

void SequentialWriter::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

int SequentialWriter::Missing(const TestCluster& c) {
  EtcdClient reader = c.Client(c.ClientUrls());
  int missing = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (int k : ledger_) {
    auto got = reader.Get(absl::StrCat("/roll/", k));
    if (!got.ok() || !got->has_value()) ++missing;
  }
  return missing;
}

}  // namespace steward::testing
