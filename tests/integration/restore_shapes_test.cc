// The in-place restore (etcd/restore_in_place.h) on DB shapes real etcd makes, each restored
// into three members that run under etcd 3.4 and under etcd 3.5 (issue 34, part 2), on
// 127.0.67.x. A source etcd is given the shape through its API; its snapshot is checked to
// have the shape (so a test never passes on a shape it did not make); three members restored
// in place from it, with the revision bumped, must serve every key as the source did (value,
// create and mod revision, version), its users, roles and leases, then again after all three
// restart:
//   - members_removed too big to be inline (45 removed members) and a newest value larger
//     than a page;
//   - a root that is a branch page (removed members, a learner, leases, users and roles, each
//     bucket inline and together more than a page);
//   - a last leaf of "key" so full that the bump's key overflows it;
//   - a snapshot from etcd 3.5 (the first shape).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "etcd/restore_in_place.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum class Shape { kRemovedOutOfLineBigNewest, kBranchRoot, kFullLastLeaf };

struct Case {
  const char* name;
  Shape shape;
  bool source35;  // the source runs etcd 3.5 (else Debian's 3.4)
  bool run35;     // the restored members run etcd 3.5
};

const Case kCases[] = {
    {"RemovedOutOfLineAndBigNewestUnder34", Shape::kRemovedOutOfLineBigNewest, false, false},
    {"RemovedOutOfLineAndBigNewestUnder35", Shape::kRemovedOutOfLineBigNewest, false, true},
    {"BranchRootUnder34", Shape::kBranchRoot, false, false},
    {"BranchRootUnder35", Shape::kBranchRoot, false, true},
    {"FullLastLeafUnder34", Shape::kFullLastLeaf, false, false},
    {"FullLastLeafUnder35", Shape::kFullLastLeaf, false, true},
    {"Etcd35SnapshotUnder34", Shape::kRemovedOutOfLineBigNewest, true, false},
    {"Etcd35SnapshotUnder35", Shape::kRemovedOutOfLineBigNewest, true, true},
};

// A bbolt file read page by page, only as far as these checks need.
class RawBolt {
 public:
  explicit RawBolt(std::string bytes) : b_(std::move(bytes)) {
    uint64_t best = 0;
    for (int i = 0; i < 2; ++i) {
      const size_t m = static_cast<size_t>(i) * 4096 + 16;
      page_ = U32(m + 8);
      const uint64_t txid = U64(m + 48);
      if (i == 0 || txid > best) {
        best = txid;
        root_ = U64(m + 16);
      }
    }
  }
  struct Elem {
    std::string key, value;
    uint64_t child = 0;
  };
  bool Branch(uint64_t pg) const { return (U16(pg * page_ + 8) & 0x01) != 0; }
  uint32_t Overflow(uint64_t pg) const { return U32(pg * page_ + 12); }
  std::vector<Elem> Elems(uint64_t pg) const {
    std::vector<Elem> out;
    const size_t off = pg * page_;
    const bool branch = Branch(pg);
    for (size_t j = 0; j < U16(off + 10); ++j) {
      const size_t e = off + 16 + 16 * j;
      if (branch) {
        out.push_back({b_.substr(e + U32(e), U32(e + 4)), "", U64(e + 8)});
      } else {
        const size_t at = e + U32(e + 4);
        out.push_back({b_.substr(at, U32(e + 8)), b_.substr(at + U32(e + 8), U32(e + 12)), 0});
      }
    }
    return out;
  }
  // The top-level bucket's header root (0: inline), found through the root's tree.
  uint64_t BucketRoot(const std::string& name) const { return FindRoot(root_, name); }
  uint64_t root() const { return root_; }
  uint32_t page() const { return page_; }
  // The rightmost leaf under `pg`.
  uint64_t LastLeaf(uint64_t pg) const {
    while (Branch(pg)) pg = Elems(pg).back().child;
    return pg;
  }
  size_t Used(uint64_t pg) const {
    size_t used = 16;
    for (const Elem& e : Elems(pg)) used += 16 + e.key.size() + e.value.size();
    return used;
  }

 private:
  uint64_t FindRoot(uint64_t pg, const std::string& name) const {
    for (const Elem& e : Elems(pg)) {
      if (Branch(pg)) {
        if (uint64_t r = FindRoot(e.child, name); r != ~uint64_t{0}) return r;
      } else if (e.key == name) {
        uint64_t r = 0;
        std::memcpy(&r, e.value.data(), 8);
        return r;
      }
    }
    return ~uint64_t{0};
  }
  uint16_t U16(size_t at) const {
    uint16_t v = 0;
    std::memcpy(&v, b_.data() + at, 2);
    return v;
  }
  uint32_t U32(size_t at) const {
    uint32_t v = 0;
    std::memcpy(&v, b_.data() + at, 4);
    return v;
  }
  uint64_t U64(size_t at) const {
    uint64_t v = 0;
    std::memcpy(&v, b_.data() + at, 8);
    return v;
  }
  std::string b_;
  uint32_t page_ = 4096;
  uint64_t root_ = 0;
};

class RestoreShapeTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    first_ = 20 * GetParam();  // ctest runs the cases at once: 20 addresses each
    dir_ = fs::temp_directory_path() / absl::StrCat("restore_shape_", GetParam(), "_", ::getpid());
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
  const Case& C() const { return kCases[GetParam()]; }
  std::string Ip(int i) const { return absl::StrCat("127.0.67.", first_ + i); }
  std::string Ep(int i) const { return "http://" + Ip(i) + ":2379"; }

  RunResult Ctl(int i, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl",
                                     "--endpoints",  Ep(i),           "--command-timeout=10s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, 60s);
  }
  pid_t StartEtcd(bool v35, const std::string& name, int ip, const std::string& initial,
                  const std::string& token) {
    const std::string url = "http://" + Ip(ip);
    pid_t pid = SpawnTo(
        {v35 ? ETCD35_BIN : "/usr/bin/etcd", "--name", name, "--data-dir", (dir_ / name).string(),
         "--listen-client-urls", url + ":2379", "--advertise-client-urls", url + ":2379",
         "--listen-peer-urls", url + ":2380", "--initial-advertise-peer-urls", url + ":2380",
         "--initial-cluster", initial, "--initial-cluster-token", token},
        (dir_ / (name + ".log")).string());
    pids_.push_back(pid);
    return pid;
  }
  void StopAll() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    pids_.clear();
  }
  std::string Log(const std::string& name) const {
    return ReadFile((dir_ / (name + ".log")).string()).value_or("");
  }
  bool Healthy(int i) { return Ctl(i, {"endpoint", "health"}).exit_code == 0; }

  // Gives the source its shape through etcd's API.
  void MakeShape() {
    auto ok = [&](std::vector<std::string> args) {
      RunResult r = Ctl(1, args);
      ASSERT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.output;
    };
    auto removed = [&](int n) {
      // One learner at a time (etcd allows one): added, then removed.
      for (int i = 0; i < n; ++i) {
        RunResult add =
            Ctl(1, {"member", "add", absl::StrCat("gone", i), "--learner",
                    absl::StrCat("--peer-urls=http://127.0.68.", i + 1, ":2380"), "-w", "json"});
        ASSERT_EQ(add.exit_code, 0) << add.output;
        const auto id = nlohmann::json::parse(add.output)["member"]["ID"].get<uint64_t>();
        char hex[17];
        std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
        ok({"member", "remove", hex});
      }
    };
    switch (C().shape) {
      case Shape::kRemovedOutOfLineBigNewest:
        removed(45);
        for (int i = 0; i < 60; ++i)
          ok({"put", absl::StrCat("/k", i), std::string(150, 'a' + i % 26)});
        ok({"del", "/k7"});
        ok({"put", "/big", std::string(10000, 'B')});
        break;
      case Shape::kBranchRoot: {
        removed(20);
        ok({"member", "add", "learner", "--learner", "--peer-urls=http://127.0.68.200:2380"});
        for (int i = 0; i < 24; ++i) ok({"lease", "grant", "36000"});
        for (int i = 0; i < 9; ++i) ok({"user", "add", absl::StrCat("user", i, ":pw", i)});
        for (int i = 0; i < 18; ++i) {
          ok({"role", "add", absl::StrCat("role", i)});
          ok({"role", "grant-permission", absl::StrCat("role", i), "readwrite",
              absl::StrCat("/app", i, "/"), "--prefix"});
        }
        ok({"user", "grant-role", "user0", "role0"});
        for (int i = 0; i < 6; ++i) ok({"put", absl::StrCat("/x", i), std::string(100, 'v')});
        break;
      }
      case Shape::kFullLastLeaf:
        // Values of 966 bytes fill a leaf with four entries of about 1 KiB (bbolt splits a
        // leaf only past four); put them until a snapshot shows the last leaf that full.
        for (int i = 0; i < 16; ++i) {
          char key[16];
          std::snprintf(key, sizeof key, "/f%04d", i + 1);
          ok({"put", key, std::string(966, 'f')});
          const std::string probe = (dir_ / "probe.db").string();
          fs::remove(probe);
          ok({"snapshot", "save", probe});
          RawBolt db(*ReadFile(probe));
          const uint64_t leaf = db.LastLeaf(db.BucketRoot("key"));
          if (db.Overflow(leaf) == 0 && db.Used(leaf) + 16 + 17 > db.page()) break;
        }
        break;
    }
  }

  void ExpectShape(const std::string& snapshot) {
    RawBolt db(*ReadFile(snapshot));
    switch (C().shape) {
      case Shape::kRemovedOutOfLineBigNewest: {
        EXPECT_NE(db.BucketRoot("members_removed"), 0u) << "members_removed is not out of line";
        const uint64_t leaf = db.LastLeaf(db.BucketRoot("key"));
        EXPECT_GT(db.Overflow(leaf), 0u) << "the newest value fits a page";
        break;
      }
      case Shape::kBranchRoot:
        EXPECT_TRUE(db.Branch(db.root())) << "the root is a leaf";
        for (const char* b : {"members_removed", "lease", "authUsers", "authRoles"}) {
          EXPECT_EQ(db.BucketRoot(b), 0u) << b << " is not inline";
        }
        break;
      case Shape::kFullLastLeaf: {
        const uint64_t leaf = db.LastLeaf(db.BucketRoot("key"));
        EXPECT_EQ(db.Overflow(leaf), 0u);
        EXPECT_GT(db.Used(leaf) + 16 + 17, db.page()) << "the bump's key fits the last leaf";
        break;
      }
    }
  }

  // What a client sees: every key (value, create and mod revision, version), users, roles,
  // leases. `i`: the member asked (serializable: each member's own data).
  std::string View(int i) {
    std::string out;
    RunResult kv = Ctl(i, {"get", "", "--from-key", "--consistency=s", "-w", "json"});
    EXPECT_EQ(kv.exit_code, 0) << kv.output;
    auto j = nlohmann::json::parse(kv.output, nullptr, false);
    if (j.contains("kvs")) {
      for (const auto& e : j["kvs"]) {
        nlohmann::json k = e;
        k.erase("lease");  // (a leased key keeps its lease: compared through `lease list`)
        const std::string v = k.value("value", "");  // base64; shown by length and hash
        k["value"] = absl::StrCat(v.size(), ":", std::hash<std::string>{}(v));
        absl::StrAppend(&out, k.dump(), "\n");
      }
    }
    for (std::vector<std::string> list : {std::vector<std::string>{"user", "list"},
                                          {"role", "list"},
                                          {"user", "get", "user0"},
                                          {"role", "get", "role0"},
                                          {"lease", "list"}}) {
      // A failure's output has a time in it (its code only); etcd lists leases in no order.
      RunResult r = Ctl(i, list);
      std::vector<std::string> lines = absl::StrSplit(r.output, '\n');
      std::sort(lines.begin(), lines.end());
      absl::StrAppend(&out, absl::StrJoin(list, " "), ": ",
                      r.exit_code == 0 ? absl::StrJoin(lines, "\n") : "", " exit ", r.exit_code,
                      "\n");
    }
    return out;
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
  int first_ = 0;
};

TEST_P(RestoreShapeTest, ThreeMembersRestoredInPlaceServeTheSourceAndSurviveARestart) {
  // The source, given its shape, then its snapshot and what a client sees of it.
  StartEtcd(C().source35, "src", 1, "src=http://" + Ip(1) + ":2380", "src-token");
  ASSERT_TRUE(WaitFor([&] { return Healthy(1); }, 30s)) << Log("src");
  MakeShape();
  if (HasFatalFailure()) return;
  const std::string snapshot = (dir_ / "snap.db").string();
  RunResult save = Ctl(1, {"snapshot", "save", snapshot});
  ASSERT_EQ(save.exit_code, 0) << save.output;
  std::string want = View(1);
  ASSERT_NE(want.find("\"key\""), std::string::npos) << want;
  StopAll();
  ExpectShape(snapshot);

  std::string initial;
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&initial, i ? "," : "", "m", i + 1, "=http://", Ip(11 + i), ":2380");
  }
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("m", i + 1);
    fs::create_directories(dir_ / name / "member" / "snap");
    fs::copy_file(snapshot, dir_ / name / "member" / "snap" / "db");
    InPlaceRestore r;
    r.data_dir = (dir_ / name).string();
    r.name = name;
    r.peer_url = "http://" + Ip(11 + i) + ":2380";
    r.token = "restored";
    for (int m = 0; m < 3; ++m) {
      r.initial_cluster.emplace_back(absl::StrCat("m", m + 1), "http://" + Ip(11 + m) + ":2380");
    }
    r.bump_revision = 1000;
    absl::Status s = RestoreInPlace(r);
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int round = 0; round < 2; ++round) {  // started, then all three restarted
    for (int i = 0; i < 3; ++i) {
      StartEtcd(C().run35, absl::StrCat("m", i + 1), 11 + i, initial, "restored");
    }
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(WaitFor([&] { return Healthy(11 + i); }, 60s))
          << "round " << round << ": " << Log(absl::StrCat("m", i + 1));
    }
    // Every member serves what the source served (the bump's key is a tombstone: unseen).
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(View(11 + i), want) << "round " << round << ", member m" << i + 1;
    }
    if (round == 0) {
      RunResult put = Ctl(11, {"put", "/after", "restore"});
      ASSERT_EQ(put.exit_code, 0) << put.output;
      want = View(11);  // with the write, which the restart must keep
      StopAll();
    }
  }
  EXPECT_EQ(Ctl(12, {"get", "/after", "--print-value-only"}).output, "restore\n");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RestoreShapeTest,
                         ::testing::Range(0, static_cast<int>(std::size(kCases))),
                         [](const auto& info) { return std::string(kCases[info.param].name); });

}  // namespace
}  // namespace steward::testing
