// The in-place restore (etcd/restore_in_place.h) against the real tools and servers, on
// 127.0.66.x: from one snapshot of a real etcd 3.4 (keys overwritten and deleted, enough of them
// for a multi-level tree), it makes the same DB edits, member and cluster IDs and WAL commit as
// etcd 3.5's `etcdutl snapshot restore --bump-revision --mark-compacted`; three members so
// restored form a cluster under etcd 3.4 that serves the snapshot's data at the raised,
// compacted revision, takes writes and keeps them across restarts; etcd 3.5 runs one too.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "etcd/bolt.h"
#include "etcd/client.h"
#include "etcd/restore_in_place.h"
#include "etcd/wal.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char kNet[] = "127.0.66";
constexpr uint64_t kBump = 1000000;

std::string Ip(int i) { return absl::StrCat(kNet, ".", i); }

RunResult Ctl(const std::string& endpoint, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl",
                                   "--endpoints", endpoint};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, 60s);
}

class RestoreInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("restore_in_place_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (!HasFailure()) fs::remove_all(dir_);
  }

  pid_t StartEtcd(const std::string& binary, const std::string& name, const std::string& ip,
                  const std::string& data_dir, const std::string& initial,
                  const std::string& token) {
    pid_t pid = SpawnTo({binary, "--name", name, "--data-dir", data_dir, "--listen-client-urls",
                         "http://" + ip + ":2379", "--advertise-client-urls",
                         "http://" + ip + ":2379", "--listen-peer-urls", "http://" + ip + ":2380",
                         "--initial-advertise-peer-urls", "http://" + ip + ":2380",
                         "--initial-cluster", initial, "--initial-cluster-token", token},
                        (dir_ / (name + ".log")).string());
    pids_.push_back(pid);
    return pid;
  }
  void Stop(pid_t pid) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
  }
  std::string Log(const std::string& name) {
    std::ifstream in(dir_ / (name + ".log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  // A snapshot (etcdctl snapshot save: the DB and its sha256 trailer) of a single etcd 3.4
  // holding 3000 keys of 200 bytes in 30 transactions, then k7 overwritten and k8 deleted.
  // Returns its newest revision.
  int64_t MakeSnapshot() {
    const std::string ip = Ip(1);
    pid_t pid = StartEtcd("/usr/bin/etcd", "src", ip, (dir_ / "src").string(),
                          "src=http://" + ip + ":2380", "src-token");
    // (A client made before etcd listens backs off: wait with etcdctl first.)
    EXPECT_TRUE(WaitFor([&] { return Ctl("http://" + ip + ":2379", {"endpoint", "health"}).exit_code == 0; },
                        20s))
        << Log("src");
    EtcdClient client({"http://" + ip + ":2379"});
    for (int t = 0; t < 30; ++t) {
      etcdserverpb::TxnRequest txn;
      for (int i = 0; i < 100; ++i) {
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(absl::StrCat("/k", t * 100 + i));
        put->set_value(std::string(200, static_cast<char>('a' + t % 26)));
      }
      EXPECT_TRUE(client.Txn(txn).ok());
    }
    EXPECT_TRUE(client.Put("/k7", "overwritten").ok());
    EXPECT_EQ(Ctl("http://" + ip + ":2379", {"del", "/k8"}).exit_code, 0);
    RunResult save = Ctl("http://" + ip + ":2379", {"snapshot", "save", Snapshot()});
    EXPECT_EQ(save.exit_code, 0) << save.output;
    RunResult get = Ctl("http://" + ip + ":2379", {"get", "/k7", "-w", "json"});
    Stop(pid);
    return nlohmann::json::parse(get.output)["header"]["revision"].get<int64_t>();
  }
  std::string Snapshot() const { return (dir_ / "snap.db").string(); }

  std::vector<std::pair<std::string, std::string>> Initial(int n) const {
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < n; ++i) {
      out.emplace_back(absl::StrCat("m", i + 1), "http://" + Ip(11 + i) + ":2380");
    }
    return out;
  }
  static std::string InitialFlag(const std::vector<std::pair<std::string, std::string>>& ic) {
    std::string s;
    for (const auto& [name, url] : ic) absl::StrAppend(&s, s.empty() ? "" : ",", name, "=", url);
    return s;
  }

  // The snapshot's DB as member `name`'s data dir at `data_dir`, restored in place.
  absl::Status InPlace(const std::string& data_dir, const std::string& name, int members,
                       uint64_t bump) {
    fs::create_directories(fs::path(data_dir) / "member" / "snap");
    fs::copy_file(Snapshot(), fs::path(data_dir) / "member" / "snap" / "db");
    InPlaceRestore r;
    r.data_dir = data_dir;
    r.name = name;
    r.token = "restored-token";
    r.initial_cluster = Initial(members);
    r.bump_revision = bump;
    return RestoreInPlace(r);
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

std::map<std::string, std::string> Bucket(const std::string& db, const std::string& bucket) {
  auto f = BoltFile::Open(db);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  auto b = (*f)->ReadBucket(bucket);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : std::map<std::string, std::string>{};
}

TEST_F(RestoreInPlaceTest, MakesTheSameEditsAsEtcdutl) {
  MakeSnapshot();
  const std::string tool_dir = (dir_ / "tool").string();
  RunResult tool = RunCommand({ETCDUTL_BIN, "snapshot", "restore", Snapshot(), "--name", "m2",
                               "--initial-cluster", InitialFlag(Initial(3)),
                               "--initial-cluster-token", "restored-token",
                               "--initial-advertise-peer-urls", Initial(3)[1].second,
                               "--data-dir", tool_dir, absl::StrCat("--bump-revision=", kBump),
                               "--mark-compacted"},
                              120s);
  ASSERT_EQ(tool.exit_code, 0) << tool.output;
  const std::string ours_dir = (dir_ / "ours").string();
  ASSERT_TRUE(InPlace(ours_dir, "m2", 3, kBump).ok());

  auto tool_id = ReadWalIdentity(tool_dir), ours_id = ReadWalIdentity(ours_dir);
  ASSERT_TRUE(tool_id.ok() && ours_id.ok());
  EXPECT_EQ(ours_id->member_id, tool_id->member_id);
  EXPECT_EQ(ours_id->cluster_id, tool_id->cluster_id);
  EXPECT_EQ(*ReadWalCommit(ours_dir), *ReadWalCommit(tool_dir));

  const std::string tool_db = tool_dir + "/member/snap/db", ours_db = ours_dir + "/member/snap/db";
  EXPECT_EQ(Bucket(ours_db, "members"), Bucket(tool_db, "members"));
  EXPECT_TRUE(Bucket(ours_db, "members_removed").empty());
  EXPECT_EQ(Bucket(ours_db, "members_removed"), Bucket(tool_db, "members_removed"));
  EXPECT_EQ(Bucket(ours_db, "meta"), Bucket(tool_db, "meta"));
  auto last = [](const std::string& db) {
    auto f = BoltFile::Open(db);
    return f.ok() ? (*f)->LastKey("key").value_or("?") : "?";
  };
  EXPECT_EQ(last(ours_db), last(tool_db));
  // The snap files are named alike (term and index).
  std::vector<std::string> tool_snaps, ours_snaps;
  for (const auto& e : fs::directory_iterator(tool_dir + "/member/snap")) {
    if (e.path().extension() == ".snap") tool_snaps.push_back(e.path().filename());
  }
  for (const auto& e : fs::directory_iterator(ours_dir + "/member/snap")) {
    if (e.path().extension() == ".snap") ours_snaps.push_back(e.path().filename());
  }
  EXPECT_EQ(ours_snaps, tool_snaps);
  EXPECT_EQ(ours_snaps.size(), 1u);
  // bbolt's own consistency check (etcdutl snapshot status runs tx.Check) passes on our DB:
  // every page reachable once, keys in order, branch keys their children's first keys.
  RunResult status = RunCommand({ETCDUTL_BIN, "snapshot", "status", ours_db, "-w", "json"}, 60s);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  RunResult tool_status = RunCommand({ETCDUTL_BIN, "snapshot", "status", tool_db, "-w", "json"}, 60s);
  ASSERT_EQ(tool_status.exit_code, 0) << tool_status.output;
  // Every bucket holds exactly what etcdutl's holds: status hashes every bucket's name and
  // every key and value in it.
  auto ours_j = nlohmann::json::parse(status.output, nullptr, false);
  auto tool_j = nlohmann::json::parse(tool_status.output, nullptr, false);
  EXPECT_EQ(ours_j.value("revision", -1), tool_j.value("revision", -2)) << status.output;
  EXPECT_EQ(ours_j.value("totalKey", -1), tool_j.value("totalKey", -2)) << status.output;
  EXPECT_EQ(ours_j.value("hash", int64_t{-1}), tool_j.value("hash", int64_t{-2}));
}

TEST_F(RestoreInPlaceTest, ThreeRestoredMembersServeTheSnapshotUnderEtcd34) {
  const int64_t revision = MakeSnapshot();
  const auto initial = Initial(3);
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    const std::string dd = (dir_ / initial[i].first).string();
    ASSERT_TRUE(InPlace(dd, initial[i].first, 3, kBump).ok());
    pids.push_back(StartEtcd("/usr/bin/etcd", initial[i].first, Ip(11 + i), dd,
                             InitialFlag(initial), "restored-token"));
  }
  const std::string ep = "http://" + Ip(11) + ":2379";
  ASSERT_TRUE(WaitFor([&] { return Ctl(ep, {"endpoint", "health"}).exit_code == 0; }, 30s))
      << Log("m1");
  RunResult members = Ctl(ep, {"member", "list"});
  EXPECT_NE(members.output.find("m1"), std::string::npos) << members.output;
  EXPECT_NE(members.output.find("m3"), std::string::npos) << members.output;
  for (int i = 0; i < 3; ++i) {
    const std::string epi = "http://" + Ip(11 + i) + ":2379";
    EXPECT_EQ(Ctl(epi, {"get", "/k7", "--print-value-only", "--consistency=s"}).output,
              "overwritten\n");
    EXPECT_EQ(Ctl(epi, {"get", "/k8", "--print-value-only", "--consistency=s"}).output, "");
    EXPECT_EQ(Ctl(epi, {"get", "/k2999", "--print-value-only", "--consistency=s"}).output,
              std::string(200, 'a' + 29 % 26) + "\n");
  }
  RunResult count = Ctl(ep, {"get", "/k", "--prefix", "--limit=1", "-w", "json"});
  ASSERT_EQ(count.exit_code, 0) << count.output;
  auto j = nlohmann::json::parse(count.output);
  EXPECT_EQ(j["count"].get<int64_t>(), 2999);  // /k0../k2999 less /k8
  // The revision is past the lost cluster's by the bump, and what lies before it is compacted.
  EXPECT_GE(j["header"]["revision"].get<int64_t>(), revision + static_cast<int64_t>(kBump));
  RunResult old = Ctl(ep, {"get", "/k7", "--rev", std::to_string(revision)});
  EXPECT_NE(old.exit_code, 0);
  EXPECT_NE(old.output.find("compacted"), std::string::npos) << old.output;
  // Writes are taken and survive a restart of every member.
  ASSERT_EQ(Ctl(ep, {"put", "/after", "restore"}).exit_code, 0);
  EtcdClient client({ep});
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(client.Put(absl::StrCat("/bulk", i), std::string(3000, 'y')).ok());
  }
  for (pid_t p : pids) Stop(p);
  for (int i = 0; i < 3; ++i) {
    StartEtcd("/usr/bin/etcd", initial[i].first, Ip(11 + i), (dir_ / initial[i].first).string(),
              InitialFlag(initial), "restored-token");
  }
  ASSERT_TRUE(WaitFor([&] { return Ctl(ep, {"endpoint", "health"}).exit_code == 0; }, 30s))
      << Log("m1");
  EXPECT_EQ(Ctl(ep, {"get", "/after", "--print-value-only"}).output, "restore\n");
  EXPECT_EQ(Ctl(ep, {"get", "/bulk499", "--print-value-only"}).output, std::string(3000, 'y') + "\n");
  EXPECT_EQ(Ctl(ep, {"get", "/k7", "--print-value-only"}).output, "overwritten\n");
}

TEST_F(RestoreInPlaceTest, Etcd35RunsARestoredMember) {
  MakeSnapshot();
  const std::string dd = (dir_ / "m1").string();
  ASSERT_TRUE(InPlace(dd, "m1", 1, kBump).ok());
  StartEtcd(ETCD35_BIN, "m1", Ip(11), dd, InitialFlag(Initial(1)), "restored-token");
  const std::string ep = "http://" + Ip(11) + ":2379";
  ASSERT_TRUE(WaitFor([&] { return Ctl(ep, {"endpoint", "health"}).exit_code == 0; }, 30s))
      << Log("m1");
  EXPECT_EQ(Ctl(ep, {"get", "/k7", "--print-value-only"}).output, "overwritten\n");
  EXPECT_EQ(Ctl(ep, {"put", "/after", "restore"}).exit_code, 0);
  EXPECT_EQ(Ctl(ep, {"get", "/after", "--print-value-only"}).output, "restore\n");
}

}  // namespace
}  // namespace steward::testing
