// The in-place restore (etcd/restore_in_place.h) against the real tools and servers, on
// 127.0.66.x: from one snapshot of a real etcd 3.4 (keys overwritten and deleted, enough of them
// for a multi-level tree), it makes the same DB edits, member and cluster IDs and WAL commit as
// etcd 3.5's `etcdutl snapshot restore --bump-revision --mark-compacted`; three members so
// restored form a cluster under etcd 3.4 that serves the snapshot's data at the raised,
// compacted revision, takes writes and keeps them across restarts; etcd 3.5 runs one too.
#include "etcd/restore_in_place.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "etcd/bolt.h"
#include "etcd/client.h"
#include "etcd/wal.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char kNet[] = "127.0.66";
constexpr uint64_t kBump = 1000000;

RunResult Ctl(const std::string& endpoint, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl",
                                   "--endpoints", endpoint};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, 60s);
}

class RestoreInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ctest runs these tests at once: each takes its own 20 addresses of 127.0.66.x.
    static const std::vector<std::string> kTests = {
        "MakesTheSameEditsAsEtcdutl", "ThreeRestoredMembersServeTheSnapshotUnderEtcd34",
        "Etcd35RunsARestoredMember"};
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const auto it = std::find(kTests.begin(), kTests.end(), test);
    ASSERT_NE(it, kTests.end()) << "give " << test << " its own addresses";
    first_ = 20 * static_cast<int>(it - kTests.begin());
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

  std::string Ip(int i) const { return absl::StrCat(kNet, ".", first_ + i); }

  pid_t StartEtcd(const std::string& binary, const std::string& name, const std::string& ip,
                  const std::string& data_dir, const std::string& initial,
                  const std::string& token) {
    pid_t pid = SpawnTo(
        {binary, "--name", name, "--data-dir", data_dir, "--listen-client-urls",
         "http://" + ip + ":2379", "--advertise-client-urls", "http://" + ip + ":2379",
         "--listen-peer-urls", "http://" + ip + ":2380", "--initial-advertise-peer-urls",
         "http://" + ip + ":2380", "--initial-cluster", initial, "--initial-cluster-token", token},
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
    EXPECT_TRUE(WaitFor(
        [&] {
          return Ctl("http://" + ip + ":2379", {"endpoint", "health"}).exit_code == 0;
        },
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
    for (const auto& [n, url] : Initial(members)) {
      if (n == name) r.peer_url = url;
    }
    r.initial_cluster = Initial(members);
    r.bump_revision = bump;
    return RestoreInPlace(r);
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
  int first_ = 0;  // this test's addresses are 127.0.66.(first_ + 1..20)
};

// A protobuf message's fields, for comparing what two writers encoded: field -> values
// (varints in decimal, bytes as they are), zero varints left out (Go's encoder writes them,
// ours does not; a reader cannot tell the difference).
using Fields = std::map<uint32_t, std::vector<std::string>>;
Fields Decode(const std::string& b) {
  Fields out;
  size_t pos = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && pos < b.size(); shift += 7) {
      const auto c = static_cast<uint8_t>(b[pos++]);
      *v |= uint64_t{c & 0x7fu} << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  };
  while (pos < b.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(&key)) break;
    if ((key & 7) == 0) {
      if (!varint(&v)) break;
      if (v != 0) out[key >> 3].push_back(std::to_string(v));
    } else if ((key & 7) == 2) {
      if (!varint(&v) || v > b.size() - pos) break;
      out[key >> 3].push_back(b.substr(pos, v));
      pos += v;
    } else {
      out[0].push_back("unexpected wire type");
      break;
    }
  }
  return out;
}

// The WAL's records of one data dir: type -> each record's data, decoded.
std::multimap<int, Fields> WalRecords(const std::string& data_dir) {
  std::multimap<int, Fields> out;
  for (const auto& e : fs::directory_iterator(data_dir + "/member/wal")) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t pos = 0;
    while (pos + 8 <= all.size()) {
      uint64_t len = 0;
      std::memcpy(&len, all.data() + pos, 8);
      const uint64_t pad = (len >> 63) ? (len >> 56) & 7 : 0;
      len &= (uint64_t{1} << 56) - 1;
      if (len == 0 || pos + 8 + len > all.size()) break;
      Fields rec = Decode(all.substr(pos + 8, len));
      const int type = rec[1].empty() ? 0 : std::stoi(rec[1][0]);
      out.emplace(type, Decode(rec[3].empty() ? "" : rec[3][0]));
      pos += 8 + len + pad;
    }
  }
  return out;
}

// The raftpb.Snapshot in the data dir's one .snap file (checked against its CRC).
Fields SnapFile(const std::string& data_dir) {
  for (const auto& e : fs::directory_iterator(data_dir + "/member/snap")) {
    if (e.path().extension() != ".snap") continue;
    std::ifstream in(e.path(), std::ios::binary);
    Fields wrapper =
        Decode(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    if (wrapper[1].empty() || wrapper[2].empty()) return {};
    const std::string& data = wrapper[2][0];
    EXPECT_EQ(wrapper[1][0], std::to_string(Crc32c(0, data.data(), data.size())));
    return Decode(data);
  }
  return {};
}

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
  RunResult tool = RunCommand(
      {ETCDUTL_BIN, "snapshot", "restore", Snapshot(), "--name", "m2", "--initial-cluster",
       InitialFlag(Initial(3)), "--initial-cluster-token", "restored-token",
       "--initial-advertise-peer-urls", Initial(3)[1].second, "--data-dir", tool_dir,
       absl::StrCat("--bump-revision=", kBump), "--mark-compacted"},
      120s);
  ASSERT_EQ(tool.exit_code, 0) << tool.output;
  const std::string ours_dir = (dir_ / "ours").string();
  ASSERT_TRUE(InPlace(ours_dir, "m2", 3, kBump).ok());

  auto tool_id = ReadWalIdentity(tool_dir), ours_id = ReadWalIdentity(ours_dir);
  ASSERT_TRUE(tool_id.ok() && ours_id.ok());
  EXPECT_EQ(ours_id->member_id, tool_id->member_id);
  EXPECT_EQ(ours_id->cluster_id, tool_id->cluster_id);
  auto ours_commit = ReadWalCommit(ours_dir), tool_commit = ReadWalCommit(tool_dir);
  ASSERT_TRUE(ours_commit.ok() && tool_commit.ok());
  EXPECT_EQ(*ours_commit, *tool_commit);
  // Record by record, decoded: the metadata, the configuration entries (each ConfChange and its
  // member JSON), the hard state (term, vote, commit) and the snapshot records.
  auto ours_wal = WalRecords(ours_dir), tool_wal = WalRecords(tool_dir);
  EXPECT_EQ(ours_wal.size(), tool_wal.size());
  for (int type : {1, 2, 3, 5}) {
    std::vector<Fields> o, t;
    for (auto [it, end] = ours_wal.equal_range(type); it != end; ++it) o.push_back(it->second);
    for (auto [it, end] = tool_wal.equal_range(type); it != end; ++it) t.push_back(it->second);
    ASSERT_EQ(o.size(), t.size()) << "records of type " << type;
    for (size_t i = 0; i < o.size(); ++i) {
      if (type == 2) {  // an entry: compare its ConfChange decoded too
        ASSERT_FALSE(o[i][4].empty() || t[i][4].empty());
        EXPECT_EQ(Decode(o[i][4][0]), Decode(t[i][4][0])) << "entry " << i;
        o[i].erase(4);
        t[i].erase(4);
      }
      if (type == 5 && o[i].count(3) && t[i].count(3)) {  // the snapshot's ConfState
        EXPECT_EQ(Decode(o[i][3][0]), Decode(t[i][3][0]));
        o[i].erase(3);
        t[i].erase(3);
      }
      EXPECT_EQ(o[i], t[i]) << "record " << i << " of type " << type;
    }
  }
  // The snap file: the same metadata (voters, index, term) and the same v2 store membership.
  Fields ours_snap = SnapFile(ours_dir), tool_snap = SnapFile(tool_dir);
  ASSERT_FALSE(ours_snap[1].empty() || tool_snap[1].empty() || ours_snap[2].empty() ||
               tool_snap[2].empty());
  Fields ours_md = Decode(ours_snap[2][0]), tool_md = Decode(tool_snap[2][0]);
  ASSERT_FALSE(ours_md[1].empty() || tool_md[1].empty());
  EXPECT_EQ(Decode(ours_md[1][0]), Decode(tool_md[1][0]));
  ours_md.erase(1);
  tool_md.erase(1);
  EXPECT_EQ(ours_md, tool_md);
  auto ours_v2 = nlohmann::json::parse(ours_snap[1][0]),
       tool_v2 = nlohmann::json::parse(tool_snap[1][0]);
  EXPECT_EQ(ours_v2["Root"], tool_v2["Root"]);
  EXPECT_EQ(ours_v2["CurrentIndex"], tool_v2["CurrentIndex"]);

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
  RunResult tool_status =
      RunCommand({ETCDUTL_BIN, "snapshot", "status", tool_db, "-w", "json"}, 60s);
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
  ASSERT_TRUE(WaitFor(
      [&] {
        return Ctl(ep, {"endpoint", "health"}).exit_code == 0;
      },
      30s))
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
  ASSERT_TRUE(WaitFor(
      [&] {
        return Ctl(ep, {"endpoint", "health"}).exit_code == 0;
      },
      30s))
      << Log("m1");
  EXPECT_EQ(Ctl(ep, {"get", "/after", "--print-value-only"}).output, "restore\n");
  EXPECT_EQ(Ctl(ep, {"get", "/bulk499", "--print-value-only"}).output,
            std::string(3000, 'y') + "\n");
  EXPECT_EQ(Ctl(ep, {"get", "/k7", "--print-value-only"}).output, "overwritten\n");
}

TEST_F(RestoreInPlaceTest, Etcd35RunsARestoredMember) {
  MakeSnapshot();
  const std::string dd = (dir_ / "m1").string();
  ASSERT_TRUE(InPlace(dd, "m1", 1, kBump).ok());
  StartEtcd(ETCD35_BIN, "m1", Ip(11), dd, InitialFlag(Initial(1)), "restored-token");
  const std::string ep = "http://" + Ip(11) + ":2379";
  ASSERT_TRUE(WaitFor(
      [&] {
        return Ctl(ep, {"endpoint", "health"}).exit_code == 0;
      },
      30s))
      << Log("m1");
  EXPECT_EQ(Ctl(ep, {"get", "/k7", "--print-value-only"}).output, "overwritten\n");
  EXPECT_EQ(Ctl(ep, {"put", "/after", "restore"}).exit_code, 0);
  EXPECT_EQ(Ctl(ep, {"get", "/after", "--print-value-only"}).output, "restore\n");
}

}  // namespace
}  // namespace steward::testing
