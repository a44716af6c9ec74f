// "Never make it worse" (issue 9): regression tests that replay, against real agents and etcd
// 3.4, the paths by which etcd-steward itself could destroy data. Each test is named for the
// behaviour it proves; each failed on the code before its fix.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "etcd/client.h"
#include "harness.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "pki/node_certs.h"
#include "pki/pki.h"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet {
  kMinority = 71,
  kNoStore = 72,
  kSkew = 73,
  kLeases = 74,
  kAlarm = 75,
  kRoles = 76,
  kPartial = 77,
  kReimaged = 78,
  kMarker = 79,
  kWipeCluster = 80,
  kNoEtcdutl = 67,
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every agent's whole log (Logs() shows only the tails).
std::string AgentLogs(const TestCluster& c, int nodes) {
  std::string out;
  for (int i = 0; i < nodes; ++i)
    out += ReadText(absl::StrCat(c.Root(), "/agent-n", i + 1, ".log"));
  return out;
}

// Path 1: with 5 nodes and size 3, n1 and n2 freeze (SIGSTOP: a partition or paused VMs) while
// n3 comes back wiped. n3, n4 and n5 are a majority of the configured nodes and none has
// data, but they are not a majority of the members: they must not restore, and when n1 and n2
// thaw, no write acknowledged after the last backup may be lost.
TEST(SafetyTest, AMinorityOfMembersNeverRestoresOverTheLiveCluster) {
  TestCluster c(kMinority, 5, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 5; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  Put(c, "/it/before", "1");
  ASSERT_FALSE(TakeBackup(c).empty());
  Put(c, "/it/after-backup", "acknowledged");

  std::vector<pid_t> frozen;
  for (int i : {0, 1}) {
    c.SignalAgent(i, SIGSTOP);
    if (auto pid = c.EtcdPid(i)) {
      kill(*pid, SIGSTOP);
      frozen.push_back(*pid);
    }
  }
  c.SignalAgent(2, SIGKILL);
  c.KillEtcd(2);
  fs::remove_all(c.DataDir(2));
  c.StartAgent(2);

  // Long enough for the old rule to have restored several times over (it took ~2 s).
  const std::string intent = c.Root() + "/backups/it71/control/restore.json";
  bool restored = WaitFor([&] { return fs::exists(intent); }, 20s);
  EXPECT_FALSE(restored) << "a restore was started by a minority of the members:\n"
                         << ReadText(intent) << c.Logs();
  EXPECT_NE(AgentLogs(c, 5).find("of the last known voting members"), std::string::npos)
      << "the coordinator must say why it waits\n"
      << c.Logs();

  for (pid_t p : frozen) kill(p, SIGCONT);
  for (int i : {0, 1}) c.SignalAgent(i, SIGCONT);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Get(c, 2, "/it/after-backup"), "acknowledged") << c.Logs();
  EXPECT_FALSE(fs::exists(intent)) << ReadText(intent);
}

// Path 3: after total loss the store is "not mounted" (its root is gone). The agents must not
// create it, must not bootstrap an empty cluster, and must restore once it is back.
TEST(SafetyTest, AMissingStoreRootMeansWaitNeverANewCluster) {
  TestCluster c(kNoStore, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/precious", "data");
  ASSERT_FALSE(TakeBackup(c).empty());
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGKILL);
  for (int i = 0; i < 3; ++i) c.KillEtcd(i);
  for (int i = 0; i < 3; ++i) fs::remove_all(c.DataDir(i));
  const std::string root = c.Root() + "/backups";
  fs::rename(root, c.Root() + "/backups-unmounted");

  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  bool started = WaitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (c.EtcdPid(i)) return true;
        }
        return false;
      },
      15s);
  EXPECT_FALSE(started) << "an etcd was started while the store was missing\n" << c.Logs();
  EXPECT_FALSE(fs::exists(root)) << "an agent created the missing store root";
  EXPECT_NE(AgentLogs(c, 3).find("does not exist (not mounted?)"), std::string::npos) << c.Logs();

  fs::rename(c.Root() + "/backups-unmounted", root);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/precious"), "data") << c.Logs();
}

// Path 2: a `stewardctl backup` run on a machine whose clock is two hours ahead names its
// backup two hours "later". After total loss the backup holding the later revision must be
// restored, and list-backups must flag the time.
TEST(SafetyTest, ASkewedClockNeverMakesAnOlderBackupWin) {
  TestCluster c(kSkew, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/phase", "one");
  RunResult ahead = RunCommand(
      {"/usr/bin/faketime", "-f", "+2h", STEWARDCTL_BIN, "backup", "--config", c.ConfigPath(0)},
      60s);
  ASSERT_EQ(ahead.exit_code, 0) << ahead.output;
  Put(c, "/it/phase", "two");
  std::string normal = TakeBackup(c);
  ASSERT_FALSE(normal.empty());

  RunResult list = c.Ctl({"list-backups"});
  EXPECT_NE(list.output.find("TIME IN FUTURE"), std::string::npos) << list.output;
  // Newest first: the later revision heads the list, whatever the names say.
  EXPECT_LT(list.output.find(normal), list.output.find("TIME IN FUTURE")) << list.output;

  LoseEverything(c, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/phase"), "two") << "the backup with the later revision is restored\n"
                                           << c.Logs();
}

// Path 10: a lock held (through a lease) at the moment of the backup must not come back to
// life after the restore: the restored leases are revoked before any client can reach the
// restored cluster, so their keys are gone from its very first answer, and the holder's
// keep-alive fails. Keys without a lease are restored as they were.
TEST(SafetyTest, ARestoreRevokesTheLeasesAndLocksItBroughtBack) {
  TestCluster c(kLeases, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient client = c.Client(c.ClientUrls());
  absl::StatusOr<int64_t> lease = absl::UnavailableError("not yet");
  ASSERT_TRUE(WaitFor([&] { return (lease = client.LeaseGrant(600s)).ok(); }, 15s));
  ASSERT_TRUE(
      WaitFor([&] { return client.Put("/service/pg/leader", "old-primary", *lease).ok(); }, 15s));
  Put(c, "/it/plain", "kept");
  ASSERT_FALSE(TakeBackup(c).empty());
  // Writes after the backup: the lost cluster served these revisions; none may be served again.
  for (int i = 0; i < 20; ++i) Put(c, absl::StrCat("/it/lost", i), "x");
  auto before = client.Status(c.ClientUrl(0), 2000ms);
  ASSERT_TRUE(before.ok()) << before.status();

  LoseEverything(c, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  // The very first answer the restored cluster gives a client must already lack the lock: the
  // restored members serve only on the fence port until the leases are revoked.
  std::optional<std::string> first;
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (!first && std::chrono::steady_clock::now() < until) {
    // A fresh client each time: a channel that failed its first handshakes may stay stuck.
    EtcdClient probe = c.Client(c.ClientUrls());
    auto got = probe.Get("/service/pg/leader");
    if (got.ok()) {
      first = got->value_or("<absent>");
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_TRUE(first.has_value()) << c.Logs();
  EXPECT_EQ(*first, "<absent>") << "a client saw the lock of the moment of the backup\n"
                                << c.Logs();
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  const std::string intent = c.Root() + "/backups/it74/control/restore.json";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = nlohmann::json::parse(ReadText(intent), nullptr, false);
        return !j.is_discarded() && j.value("done", false);
      },
      60s))
      << c.Logs();
  EXPECT_NE(AgentLogs(c, 3).find("lease(s) that came with the backup"), std::string::npos)
      << c.Logs();
  // Path 11: the restored cluster's revision lies above every revision the lost one served.
  auto restored = c.Client(c.ClientUrls()).Status(c.ClientUrl(1), 2000ms);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_GT(restored->revision, before->revision) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/lost0"), "<absent>")
      << "restored from the backup, before the lost writes";
  EXPECT_EQ(Get(c, 0, "/it/plain"), "kept") << c.Logs();
  EXPECT_EQ(Get(c, 1, "/service/pg/leader"), "<absent>")
      << "the lock of the moment of the backup came back\n"
      << c.Logs();
  EtcdClient after = c.Client(c.ClientUrls());
  absl::Status alive = absl::OkStatus();
  WaitFor(
      [&] {
        alive = after.LeaseKeepAliveOnce(*lease);
        return absl::IsNotFound(alive);
      },
      15s);
  EXPECT_TRUE(absl::IsNotFound(alive)) << "the old holder can still keep its lease: " << alive;
  // The restored cluster is a new generation: backups of it sort above the lost cluster's.
  RunResult backup = c.Ctl({"backup"});
  ASSERT_EQ(backup.exit_code, 0) << backup.output;
  RunResult list = c.Ctl({"list-backups", "-o", "json"});
  auto j = nlohmann::json::parse(list.output, nullptr, false);
  ASSERT_TRUE(!j.is_discarded() && j.is_array() && !j.empty()) << list.output;
  EXPECT_EQ(j[0].value("generation", -1), 1) << list.output;
}

// Path 11 on nodes with etcd 3.4 alone (Debian's etcd-server: no etcdutl): the in-place
// restore raises the revision, so a restore still never serves a revision number again.
TEST(SafetyTest, WithoutEtcdutlARestoreStillRaisesTheRevision) {
  ASSERT_NE(::access("/usr/bin/etcdutl", X_OK), 0)
      << "this test needs a machine whose etcd has no /usr/bin/etcdutl (Debian's etcd-server 3.4)";
  TestCluster c(kNoEtcdutl, 3, 3, kFastLeader, kFileBackup);
  const std::string etcdutl = absl::StrCat("  etcdutl: ", ETCDUTL_BIN, "\n");
  for (int i = 0; i < 3; ++i) {
    std::string yaml = ReadText(c.ConfigPath(i));
    const size_t at = yaml.find(etcdutl);
    ASSERT_NE(at, std::string::npos) << yaml;
    yaml.erase(at, etcdutl.size());
    std::ofstream(c.ConfigPath(i), std::ios::trunc) << yaml;
  }
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/kept", "yes");
  ASSERT_FALSE(TakeBackup(c).empty());
  for (int i = 0; i < 20; ++i) Put(c, absl::StrCat("/it/lost", i), "x");
  EtcdClient client = c.Client(c.ClientUrls());
  auto before = client.Status(c.ClientUrl(0), 2000ms);
  ASSERT_TRUE(before.ok()) << before.status();

  LoseEverything(c, 3);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 120s)) << c.Logs();
  const std::string intent = c.Root() + "/backups/it67/control/restore.json";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = nlohmann::json::parse(ReadText(intent), nullptr, false);
        return !j.is_discarded() && j.value("done", false);
      },
      60s))
      << c.Logs();
  auto j = nlohmann::json::parse(ReadText(intent), nullptr, false);
  EXPECT_GT(j.value("bump_revision", int64_t{0}), 0) << ReadText(intent);
  const std::string logs = AgentLogs(c, 3);
  EXPECT_EQ(logs.find("can raise no revision"), std::string::npos) << c.Logs();
  EXPECT_NE(logs.find("restored in place"), std::string::npos) << c.Logs();
  auto restored = c.Client(c.ClientUrls()).Status(c.ClientUrl(1), 2000ms);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_GT(restored->revision, before->revision) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/kept"), "yes") << c.Logs();
  EXPECT_EQ(Get(c, 2, "/it/lost0"), "<absent>") << c.Logs();
  // The old revisions are compacted: a watcher from one of them is told so and re-lists.
  RunResult old =
      RunCommand({"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl", "--endpoints",
                  c.ClientUrl(0), "--cacert", c.CaCert(), "--cert", c.AdminCert(), "--key",
                  c.AdminKey(), "get", "/it/kept", "--rev", std::to_string(before->revision)},
                 30s);
  EXPECT_NE(old.exit_code, 0) << old.output;
  EXPECT_NE(old.output.find("compacted"), std::string::npos) << old.output;
}

// Path 9: an alarm is reported by every member. It is an alarm, not quorum loss, and a backup
// is taken all the same (it is exactly when one is wanted).
TEST(SafetyTest, AnAlarmIsShownAsAnAlarmAndBackupsGoOn) {
  // (Without the leader's NOSPACE recovery, which would clear the alarm: space_test.cc.)
  TestCluster c(kAlarm, 3, 3, std::string(kFastLeader) + "  recover_nospace: false\n", kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EtcdClient client = c.Client(c.ClientUrls());
  auto st = client.Status(c.ClientUrl(1), 2000ms);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_TRUE(WaitFor([&] { return client.AlarmActivate(st->member_id, "NOSPACE").ok(); }, 15s));
  RunResult status;
  ASSERT_TRUE(WaitFor(
      [&] {
        status = c.Ctl({"status"});
        return status.output.find("ALARM NOSPACE on n2") != std::string::npos;
      },
      20s))
      << status.output;
  EXPECT_EQ(status.output.find("QUORUM LOST"), std::string::npos) << status.output;
  RunResult backup = c.Ctl({"backup"});
  EXPECT_EQ(backup.exit_code, 0) << backup.output;
  // And nothing was replaced: the three members stay.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(c.Status().members.size(), 3u);
}

// Path 6: the agent API obeys orders only from agents of its own cluster. The operator's
// certificate, an application's certificate and another cluster's agent certificate (all from
// the same CA) may read state but every order, including a Promise of term 2^64-1 that would
// otherwise fence every real leader out for good, is refused with PERMISSION_DENIED.
TEST(SafetyTest, OnlyThisClustersAgentsMayGiveOrders) {
  TestCluster c(kRoles, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  const std::string pki = c.Root() + "/pki";
  auto issue = [&](const std::string& name, std::vector<std::string> uris) {
    CertRequest r;
    r.common_name = name;
    r.client_auth = true;
    r.uris = std::move(uris);
    r.lifetime = std::chrono::hours(1);
    EXPECT_TRUE(IssueCert(pki + "/ca.crt", pki + "/ca.key", r, pki + "/" + name + ".crt",
                          pki + "/" + name + ".key")
                    .ok());
    auto creds =
        TlsChannelCredentials(c.CaCert(), pki + "/" + name + ".crt", pki + "/" + name + ".key");
    EXPECT_TRUE(creds.ok());
    return *creds;
  };
  const std::string agent = absl::StrCat(c.Host(0), ":2390");
  auto admin = TlsChannelCredentials(c.CaCert(), c.AdminCert(), c.AdminKey());
  ASSERT_TRUE(admin.ok());
  const std::vector<std::pair<std::string, std::shared_ptr<grpc::ChannelCredentials>>> callers = {
      {"operator", *admin},
      {"application", issue("app", {})},
      {"other cluster's agent", issue("foreign-agent", {AgentRoleUri("another-cluster", "n1")})},
  };
  PeerClient reader(agent, *admin);
  auto before = reader.GetState(3000ms);
  ASSERT_TRUE(before.ok()) << before.status();
  for (const auto& [who, creds] : callers) {
    PeerClient p(agent, creds);
    EXPECT_TRUE(p.GetState(3000ms).ok()) << who << " may read state";
    peer::OrderHeader h;
    h.set_term(UINT64_MAX);
    h.set_leader("intruder");
    absl::Status promise = p.Promise(h, 3000ms);
    EXPECT_TRUE(absl::IsPermissionDenied(promise)) << who << ": " << promise;
    EXPECT_NE(promise.message().find("lacks the agent role"), std::string::npos) << promise;
    absl::Status wipe = p.Wipe(h, 3000ms);
    EXPECT_TRUE(absl::IsPermissionDenied(wipe)) << who << ": " << wipe;
    absl::Status stop = p.StopEtcd(h, 3000ms);
    EXPECT_TRUE(absl::IsPermissionDenied(stop)) << who << ": " << stop;
    peer::RestoreRequest rr;
    *rr.mutable_header() = h;
    rr.set_restore_id("evil");
    rr.set_backup("none");
    absl::Status restore = p.Restore(rr, 3000ms);
    EXPECT_TRUE(absl::IsPermissionDenied(restore)) << who << ": " << restore;
  }
  auto after = reader.GetState(3000ms);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->highest_term(), before->highest_term()) << "a refused promise was recorded";
  EXPECT_TRUE(after->etcd_running());
  // The node's own agent certificate is accepted: its own term promise goes through.
  const std::string tls = c.DataDir(1) + "/tls/";
  auto own = TlsChannelCredentials(c.CaCert(), tls + "client.crt", tls + "client.key");
  ASSERT_TRUE(own.ok()) << own.status();
  peer::OrderHeader h;
  h.set_term(after->highest_term() + 1);
  h.set_leader("n2");
  EXPECT_TRUE(PeerClient(agent, *own).Promise(h, 3000ms).ok());
}

// Path 5: a join that failed before etcd wrote its WAL leaves member/snap/db and nothing else.
// That is not a member's data: the agent sets it aside and the node is healed like an empty
// one, instead of restarting an etcd that can never start on it.
TEST(SafetyTest, APartialDataDirIsSetAsideAndTheNodeHealed) {
  TestCluster c(kPartial, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/k", "v");
  c.SignalAgent(2, SIGKILL);
  c.KillEtcd(2);
  fs::remove_all(c.DataDir(2));
  fs::create_directories(c.DataDir(2));
  // A real etcd join that fails (its peers cannot be reached) leaves the partial data dir.
  const std::string peer = absl::StrCat("http://", c.Host(2), ":2390");
  RunResult join =
      RunCommand({"/usr/bin/etcd", "--name", "n3", "--data-dir", c.DataDir(2) + "/etcd",
                  "--initial-cluster-state", "existing", "--initial-cluster",
                  absl::StrCat("n3=", peer, ",n1=http://", c.Host(0), ":2391"),
                  "--initial-advertise-peer-urls", peer, "--listen-peer-urls", peer,
                  "--listen-client-urls", absl::StrCat("http://", c.Host(2), ":2392"),
                  "--advertise-client-urls", absl::StrCat("http://", c.Host(2), ":2392")},
                 30s);
  ASSERT_NE(join.exit_code, 0) << join.output;
  ASSERT_TRUE(fs::exists(c.DataDir(2) + "/etcd/member/snap/db")) << join.output;
  ASSERT_FALSE(fs::exists(c.DataDir(2) + "/etcd/member/wal")) << join.output;

  c.StartAgent(2);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Get(c, 2, "/it/k"), "v") << c.Logs();
  EXPECT_NE(AgentLogs(c, 3).find("held no WAL"), std::string::npos) << c.Logs();
  EXPECT_TRUE(fs::exists(c.DataDir(2) + "/partial-aside/member/snap/db"))
      << "the partial dir is set aside, not deleted";
}

// Path 4: without a backup store, a re-imaged node (its whole data dir gone, the "joined"
// marker with it) comes up while its peers are still down. It must not start a new member under
// its old identity with an empty log: it waits until every other initial node answers, sees
// that they hold the cluster's data, and is then healed like any wiped node.
TEST(SafetyTest, AReimagedNodeWithoutAStoreNeverBootstrapsWhilePeersAreSilent) {
  TestCluster c(kReimaged, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/acknowledged", "yes");
  // Each agent has recorded that its member was part of a running cluster (the "joined"
  // marker, written once the member saw a leader): that is what the rule goes by.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (!fs::exists(c.DataDir(i) + "/joined")) return false;
        }
        return true;
      },
      30s))
      << c.Logs();
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGKILL);
  for (int i = 0; i < 3; ++i) c.KillEtcd(i);
  fs::remove_all(c.DataDir(0));

  c.StartAgent(0);
  bool started = WaitFor([&] { return c.EtcdPid(0).has_value(); }, 12s);
  EXPECT_FALSE(started) << "the re-imaged node bootstrapped while its peers were silent\n"
                        << c.Logs();
  EXPECT_NE(AgentLogs(c, 3).find("not bootstrapping the initial cluster yet"), std::string::npos)
      << c.Logs();

  c.StartAgent(1);
  c.StartAgent(2);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 90s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/acknowledged"), "yes") << c.Logs();
}

// Path 3, with the cluster alive: the share is unmounted and its empty mount point takes the
// store's place. The leader must not mark that directory as this cluster's store, nor write
// backups into it: it says why and holds backups until the real store is back.
TEST(SafetyTest, AStoreThatLostItsMarkerIsNotMarkedAgain) {
  TestCluster c(kMarker, 3, 3, kFastLeader,
                "backup:\n  store: file://ROOT/backups\n  interval: 2s\n");
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  const std::string root = c.Root() + "/backups";
  ASSERT_TRUE(WaitFor([&] { return fs::exists(root + "/it79/control/created.json"); }, 30s))
      << c.Logs();
  // The agents restart (etcd keeps serving); meanwhile the share goes away.
  for (int i = 0; i < 3; ++i) c.SignalAgent(i, SIGKILL);
  auto count = [&] {
    RunResult list = c.Ctl({"list-backups", "-o", "json"});
    auto j = nlohmann::json::parse(list.output, nullptr, false);
    return !j.is_discarded() && j.is_array() ? j.size() : 0u;
  };
  const size_t before = count();
  fs::rename(root, c.Root() + "/backups-unmounted");
  fs::create_directories(root);  // the empty mount point
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  RunResult got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = c.Ctl({"get"});
        return got.output.find("holds no marker of this cluster") != std::string::npos;
      },
      30s))
      << got.output << c.Logs();
  std::this_thread::sleep_for(5s);  // longer than backup.interval
  EXPECT_TRUE(fs::is_empty(root)) << "the leader wrote into a store that is not this cluster's";
  // The share is back: backups resume.
  fs::remove(root);
  fs::rename(c.Root() + "/backups-unmounted", root);
  EXPECT_TRUE(WaitFor([&] { return count() > before; }, 60s)) << c.Logs();
}

// Path 8: a wipe rests on "my member is no longer in the member list". etcd 3.4 serves that list
// locally, so a member that missed a restore answers with its old cluster's list. The order
// carries the leader's cluster ID, and an answer from any other cluster proves nothing.
TEST(SafetyTest, AWipeIsRefusedOnAMemberListFromAnotherCluster) {
  TestCluster c(kWipeCluster, 3, 3, kFastLeader);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/k", "v");
  const std::string tls = c.DataDir(1) + "/tls/";
  auto agent_creds = TlsChannelCredentials(c.CaCert(), tls + "client.crt", tls + "client.key");
  ASSERT_TRUE(agent_creds.ok()) << agent_creds.status();
  PeerClient n1(absl::StrCat(c.Host(0), ":2390"), *agent_creds);
  auto state = n1.GetState(3000ms);
  ASSERT_TRUE(state.ok()) << state.status();
  peer::OrderHeader h;
  h.set_term(state->highest_term() + 1);
  h.set_leader("n2");
  h.set_cluster_id(0x1234567890abcdefULL);  // not the cluster that will answer
  absl::Status wipe = n1.Wipe(h, 10000ms);
  EXPECT_FALSE(wipe.ok());
  EXPECT_NE(wipe.message().find("not from the leader's cluster"), std::string::npos) << wipe;
  EXPECT_TRUE(fs::exists(c.DataDir(0) + "/etcd/member/wal")) << "the data was touched";
  EXPECT_EQ(Get(c, 0, "/it/k"), "v") << c.Logs();
}

}  // namespace
}  // namespace steward::testing
