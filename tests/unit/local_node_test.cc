// The node side of the agent (node/local_node.h) over fakes of its seams: an in-memory disk,
// a runner that records what it was asked, etcd handles and peers that answer as told. Each
// test names the rule the node applies; the simulation (tests/sim/) runs the same code in
// whole fault histories.
#include "node/local_node.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "backup/layout.h"
#include "control/records.h"

namespace steward {
namespace {

using std::chrono::milliseconds;

class FakeDisk : public NodeDisk {
 public:
  struct Data {
    DataDirState state = DataDirState::kEmpty;
    WalIdentity id;
    uint64_t commit = 0;
  };
  Data data;
  std::map<std::string, Data> aside;  // label -> data set aside
  std::map<Marker, std::string> markers;
  absl::Status stage_result, restore_result;
  bool staged = false, restored = false;
  std::vector<std::string> log;

  std::string DataDir() const override { return "/fake/etcd"; }
  DataDirState State() override { return data.state; }
  absl::StatusOr<WalIdentity> Identity() override {
    if (data.state != DataDirState::kMember) return absl::NotFoundError("no WAL");
    return data.id;
  }
  absl::StatusOr<uint64_t> WalCommit() override { return data.commit; }
  absl::Status SetAside(const std::string& label, std::string* moved_to) override {
    moved_to->clear();
    if (data.state == DataDirState::kEmpty) return absl::OkStatus();
    aside[label] = data;
    data = Data();
    *moved_to = label;
    log.push_back("aside " + label);
    return absl::OkStatus();
  }
  absl::Status SetPartialAside(std::string* moved_to) override {
    data = Data();
    *moved_to = "partial-aside";
    log.push_back("partial aside");
    return absl::OkStatus();
  }
  absl::Status PutBack(const std::string& label) override {
    data = aside.at(label);
    log.push_back("put back " + label);
    return absl::OkStatus();
  }
  absl::Status RemoveData() override {
    data = Data();
    return absl::OkStatus();
  }
  bool Has(Marker m) override { return markers.count(m) > 0; }
  std::string Read(Marker m) override { return markers.count(m) ? markers[m] : ""; }
  absl::Status Write(Marker m, const std::string& c) override {
    markers[m] = c;
    return absl::OkStatus();
  }
  absl::Status Remove(Marker m) override {
    markers.erase(m);
    return absl::OkStatus();
  }
  absl::Status StageBackup(BackupStore&, const std::string&, const BackupMeta&) override {
    staged = stage_result.ok();
    return stage_result;
  }
  absl::Status RestoreStaged(const SnapshotRestore& r) override {
    last_tool = r.tool;
    restored = restore_result.ok();
    return restore_result;
  }
  absl::Status CheckStagedInPlace(const SnapshotRestore&) override {
    ++checks;
    return check_result;
  }
  absl::Status check_result = absl::OkStatus();
  int checks = 0;
  std::string last_tool;
  absl::Status InstallStaged() override {
    if (data.state != DataDirState::kEmpty) return absl::FailedPreconditionError("exists");
    data.state = DataDirState::kMember;
    data.id = {0x77, 0x88};
    return absl::OkStatus();
  }
  void ClearStaging() override {}
};

class FakeRunner : public Runner {
 public:
  bool running = false, is_wanted = false;
  std::vector<std::string> flags;
  int runs = 0, stops = 0;
  std::optional<pid_t> Adopt() override { return std::nullopt; }
  void Run(std::vector<std::string> f) override {
    flags = std::move(f);
    is_wanted = running = true;
    ++runs;
  }
  absl::Status Stop() override {
    is_wanted = running = false;
    ++stops;
    return absl::OkStatus();
  }
  absl::Status Stop(milliseconds) override { return Stop(); }
  bool wanted() const override { return is_wanted; }
  std::optional<pid_t> pid() const override {
    return running ? std::optional<pid_t>(42) : std::nullopt;
  }
  int restarts_done = 0;
  int restarts() const override { return restarts_done; }
  void SetBinary(const std::string& b) override { binary_path = b; }
  std::string binary() const override { return binary_path; }
  std::optional<std::vector<std::string>> running_flags() const override {
    return running ? std::optional<std::vector<std::string>>(flags) : std::nullopt;
  }
  std::string binary_path = "/usr/bin/etcd";
  std::string Flag(const std::string& name) const {
    for (const auto& f : flags) {
      if (f.rfind("--" + name + "=", 0) == 0) return f.substr(name.size() + 3);
    }
    return "";
  }
};

// etcd as the other members (or this node's own etcd) answer: a member list, or nothing.
class FakeEtcd : public EtcdApi {
 public:
  std::vector<MemberInfo> members;
  uint64_t cluster_id = 0;
  bool answers = false;
  std::vector<std::string> urls = {"http://127.0.0.1:2379"};

  const std::vector<std::string>& endpoints() const override { return urls; }
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cid) override {
    if (!answers) return absl::UnavailableError("silent");
    if (cid) *cid = cluster_id;
    return members;
  }
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t* cid) override {
    return MemberList(cid);
  }
  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>&, bool) override {
    return absl::UnimplementedError("");
  }
  absl::Status MemberRemove(uint64_t) override { return absl::UnimplementedError(""); }
  absl::Status MemberPromote(uint64_t) override { return absl::UnimplementedError(""); }
  absl::Status Put(const std::string&, const std::string&, int64_t) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::optional<std::string>> Get(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds) override {
    return absl::UnimplementedError("");
  }
  absl::Status LeaseRevoke(int64_t) override { return absl::UnimplementedError(""); }
  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override {
    return absl::UnimplementedError("");
  }
  absl::Status LeaseKeepAliveOnce(int64_t) override { return absl::UnimplementedError(""); }
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<MemberStatus> Status(const std::string& url, milliseconds) override {
    if (!answers) return absl::UnavailableError("silent");
    MemberStatus st;
    st.endpoint = url;
    st.leader = 1;
    return st;
  }
  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    milliseconds) override {
    return absl::UnimplementedError("");
  }
};

class MemStore : public BackupStore {
 public:
  std::map<std::string, std::string> objects;
  std::string Describe() const override { return "mem://"; }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Put(const std::string& k, const std::string& v) override {
    objects[k] = v;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& k) override {
    auto it = objects.find(k);
    if (it == objects.end()) return absl::NotFoundError(k);
    return it->second;
  }
  absl::Status Read(const std::string& k,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    auto v = Get(k);
    if (!v.ok()) return v.status();
    return sink(*v);
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    std::vector<ObjectInfo> out;
    for (const auto& [k, v] : objects) {
      if (k.rfind(prefix, 0) == 0) out.push_back({k, v.size()});
    }
    return out;
  }
  absl::Status Delete(const std::string& k) override {
    objects.erase(k);
    return absl::OkStatus();
  }
};

class LocalNodeTest : public ::testing::Test {
 protected:
  LocalNodeTest() {
    config_.cluster.name = "c";
    config_.cluster.size = 3;
    for (int i = 1; i <= 4; ++i) {
      config_.cluster.nodes.push_back({absl::StrCat("n", i), absl::StrCat("127.0.0.", i)});
    }
    config_.node.name = "n1";
    config_.node.data_dir = "/fake";
    config_.etcd.etcdctl = "/usr/bin/etcdctl";
    LocalNodeEnv env;
    env.disk = &disk_;
    env.runner = &runner_;
    env.peers = &peers_;
    env.local = &local_;
    env.store = &store_;
    env.clock = Clock::Real();
    env.parallel = false;
    env.etcd_version = [this] { return version_; };
    node_ = std::make_unique<LocalNode>(config_, env);
  }

  // The leader's order to join as n2's learner.
  static peer::StartRequest JoinRequest() {
    peer::StartRequest req;
    req.set_token("tok");
    auto* m = req.add_initial_cluster();
    m->set_name("n2");
    m->set_peer_url("https://127.0.0.2:2380");
    return req;
  }

  static BackupMeta Meta(const std::string& name) {
    BackupMeta m;
    m.name = name;
    m.cluster = "c";
    m.sha256 = m.db_sha256 = std::string(64, 'a');
    return m;
  }

  // The data dir holds member 0x11 of cluster 0x22.
  void HaveMember() {
    disk_.data.state = DataDirState::kMember;
    disk_.data.id = {0x11, 0x22};
  }

  // A restored member, fenced by `restore_id`.
  void Fence(const std::string& restore_id) {
    HaveMember();
    disk_.markers[Marker::kFenced] = restore_id;
    disk_.markers[Marker::kRestoreId] = restore_id;
  }

  // A LocalNode whose etcd binary reports `reported` (the agent's --version probe).
  std::unique_ptr<LocalNode> NodeWithBinary(const std::string& reported) {
    LocalNodeEnv env;
    env.disk = &disk_;
    env.runner = &runner_;
    env.peers = &peers_;
    env.local = &local_;
    env.store = &store_;
    env.clock = Clock::Real();
    env.parallel = false;
    env.etcd_version = [this] { return version_; };
    env.binaries = [this, reported] {
      return std::vector<EtcdBinary>{{"", runner_.binary_path, reported, ""}};
    };
    return std::make_unique<LocalNode>(config_, env);
  }

  Config config_;
  std::string version_;
  FakeDisk disk_;
  FakeRunner runner_;
  FakeEtcd peers_, local_;
  MemStore store_;
  std::unique_ptr<LocalNode> node_;
};

TEST_F(LocalNodeTest, UnfencingStartsEtcdOnItsClientUrl) {
  Fence("r1");
  peer::UnfenceRequest req;
  req.set_restore_id("r1");
  ASSERT_TRUE(node_->Unfence(req).ok());
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  EXPECT_TRUE(runner_.wanted());
  EXPECT_EQ(runner_.Flag("listen-client-urls"), config_.ClientUrl(config_.self()));
}

// Found by the simulation once it ran this code: the data dir of a fenced member was wiped;
// dropping the fence restarted etcd with the launch for member data on the empty dir, where
// etcd would bootstrap the initial cluster anew.
TEST_F(LocalNodeTest, UnfencingAnEmptyDataDirDoesNotStartEtcd) {
  Fence("r1");
  disk_.data = FakeDisk::Data();  // wiped under the fence
  peer::UnfenceRequest req;
  req.set_restore_id("r1");
  ASSERT_TRUE(node_->Unfence(req).ok());
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  EXPECT_FALSE(runner_.wanted());
  EXPECT_EQ(runner_.runs, 0);
}

TEST_F(LocalNodeTest, AnUnfenceForAnotherRestoreIsRefused) {
  Fence("r1");
  peer::UnfenceRequest req;
  req.set_restore_id("r2");
  EXPECT_TRUE(absl::IsFailedPrecondition(node_->Unfence(req)));
  EXPECT_EQ(disk_.Read(Marker::kFenced), "r1");
}

// W-rules through the node: a member still listed by the other members is not wiped.
TEST_F(LocalNodeTest, AWipeOfAMemberTheClusterStillListsIsRefusedAndTouchesNothing) {
  HaveMember();
  runner_.Run({"--x=1"});
  peers_.answers = true;
  peers_.cluster_id = 0x22;
  peers_.members = {MemberInfo{0x11, "n1", {}, {}, false}};
  peer::OrderHeader h;
  h.set_cluster_id(0x22);
  h.set_leader("n2");
  EXPECT_FALSE(node_->Wipe(h).ok());
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  EXPECT_TRUE(runner_.wanted());
  EXPECT_EQ(runner_.stops, 0);
}

TEST_F(LocalNodeTest, AWipeOfARemovedMemberSetsItsDataAside) {
  HaveMember();
  peers_.answers = true;
  peers_.cluster_id = 0x22;
  peers_.members = {MemberInfo{0x33, "n2", {}, {}, false}};
  peer::OrderHeader h;
  h.set_cluster_id(0x22);
  ASSERT_TRUE(node_->Wipe(h).ok());
  EXPECT_EQ(disk_.data.state, DataDirState::kEmpty);
  EXPECT_TRUE(disk_.aside.count("etcd-member-11"));
}

// A corrupt or missing backup is refused before anything is stopped or moved.
TEST_F(LocalNodeTest, ARestoreWhoseBackupFailsToStageLeavesTheNodeAsItWas) {
  HaveMember();
  runner_.Run({"--x=1"});
  BackupMeta meta = Meta("b1");
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(meta).dump()).ok());
  disk_.stage_result = absl::DataLossError("zstd frame checksum mismatch");
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  EXPECT_TRUE(absl::IsDataLoss(node_->Restore(req)));
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  EXPECT_TRUE(runner_.wanted());
  EXPECT_EQ(runner_.stops, 0);
  EXPECT_TRUE(disk_.aside.empty());
  EXPECT_EQ(node_->State().restore_error(), "zstd frame checksum mismatch");
}

// Issue 12: etcd does not support downgrades, so a backup from a newer minor version is not
// restored onto an older etcd; refused before anything is touched.
TEST_F(LocalNodeTest, ABackupFromANewerEtcdIsRefusedBeforeAnythingIsTouched) {
  version_ = "3.4.23";
  HaveMember();
  runner_.Run({"--x=1"});
  BackupMeta meta = Meta("b1");
  meta.etcd_version = "3.5.16";
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(meta).dump()).ok());
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  absl::Status s = node_->Restore(req);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("does not support downgrades"), std::string::npos) << s;
  EXPECT_FALSE(disk_.staged);
  EXPECT_EQ(runner_.stops, 0);
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  // The same backup onto etcd 3.5 is restored (with etcdutl, 3.5's restore tool).
  version_ = "3.5.16";
  config_.etcd.etcdutl = "/usr/bin/etcdutl";
  EXPECT_TRUE(node_->Restore(req).ok());
  EXPECT_EQ(disk_.last_tool, "/usr/bin/etcdutl");
}

TEST_F(LocalNodeTest, ARestoreWhoseToolFailsPutsTheOldDataBack) {
  HaveMember();
  BackupMeta meta = Meta("b1");
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(meta).dump()).ok());
  disk_.restore_result = absl::InternalError("etcdctl snapshot restore failed");
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  req.set_fenced(true);
  EXPECT_FALSE(node_->Restore(req).ok());
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  EXPECT_EQ(disk_.data.id.member_id, 0x11u);
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  EXPECT_FALSE(disk_.Has(Marker::kRestoreId));
}

// Without etcdutl a restore still raises the revision, in place: the node says it can, and
// checks that the staged DB is one the edit takes before it stops etcd (there is no tool to
// fall back on); a DB the edit would refuse leaves the node as it was.
TEST_F(LocalNodeTest, ARevisionBumpWithoutEtcdutlGoesInPlaceCheckedBeforeEtcdStops) {
  config_.etcd.etcdutl.clear();
  config_.etcd.restore_in_place = true;
  EXPECT_TRUE(node_->State().can_bump_revision());
  HaveMember();
  runner_.Run({"--x=1"});
  BackupMeta meta = Meta("b1");
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(meta).dump()).ok());
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  req.set_bump_revision(1000000);
  // A failed read is no refusal: the order fails, to be retried, and nothing is recorded.
  disk_.check_result = absl::UnavailableError("reading the staged DB: Input/output error");
  EXPECT_FALSE(node_->Restore(req).ok());
  EXPECT_EQ(node_->State().bump_refused(), "");
  EXPECT_EQ(runner_.stops, 0);
  // A structure the edit does not support is a refusal too, whatever its code.
  disk_.check_result = absl::FailedPreconditionError("a nested bucket where etcd keeps none");
  absl::Status s = node_->Restore(req);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("only the in-place restore"), std::string::npos) << s;
  EXPECT_EQ(disk_.checks, 2);
  EXPECT_EQ(runner_.stops, 0);
  EXPECT_TRUE(runner_.wanted());
  EXPECT_FALSE(disk_.restored);
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  EXPECT_TRUE(disk_.aside.empty());
  // The node says so (the coordinator then restores without the bump), and the same order
  // again is refused at once, without fetching the backup again.
  EXPECT_EQ(node_->State().bump_refused(), "r1");
  disk_.staged = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(node_->Restore(req)));
  EXPECT_FALSE(disk_.staged);
  EXPECT_EQ(disk_.checks, 2);
  // A DB the edit takes (another restore) is restored in place, with no tool to fall back on.
  disk_.check_result = absl::OkStatus();
  req.set_restore_id("r2");
  ASSERT_TRUE(node_->Restore(req).ok());
  EXPECT_EQ(disk_.checks, 3);
  EXPECT_TRUE(disk_.restored);
  EXPECT_EQ(disk_.last_tool, "");
}

// With neither etcdutl nor the in-place edit the node cannot raise the revision: it says so,
// and an order to is refused before anything is fetched or stopped.
TEST_F(LocalNodeTest, ARevisionBumpWithNeitherEtcdutlNorInPlaceIsRefused) {
  config_.etcd.etcdutl.clear();
  config_.etcd.restore_in_place = false;
  EXPECT_FALSE(node_->State().can_bump_revision());
  HaveMember();
  runner_.Run({"--x=1"});
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(Meta("b1")).dump()).ok());
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  req.set_bump_revision(1000000);
  absl::Status s = node_->Restore(req);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_FALSE(disk_.staged);
  EXPECT_EQ(runner_.stops, 0);
  EXPECT_EQ(disk_.data.state, DataDirState::kMember);
  // With etcdutl the tool does it (in place first when that is on).
  config_.etcd.etcdutl = "/usr/bin/etcdutl";
  EXPECT_TRUE(node_->State().can_bump_revision());
  ASSERT_TRUE(node_->Restore(req).ok());
  EXPECT_EQ(disk_.last_tool, "/usr/bin/etcdutl");
  // The staged DB is walked before etcd stops whatever the tool (issue 34: damage refuses).
  EXPECT_EQ(disk_.checks, 1);
}

TEST_F(LocalNodeTest, ARestoreInstallsTheDataFencedAndStartsEtcdOnTheFencePort) {
  HaveMember();
  BackupMeta meta = Meta("b1");
  ASSERT_TRUE(store_.Put(MetaKey("c", "b1"), MetaToJson(meta).dump()).ok());
  peer::RestoreRequest req;
  req.set_restore_id("r1");
  req.set_backup("b1");
  req.set_member(true);
  req.set_fenced(true);
  req.set_token("c-rr1");
  auto* m = req.add_initial_cluster();
  m->set_name("n1");
  m->set_peer_url(config_.PeerUrl(config_.self()));
  ASSERT_TRUE(node_->Restore(req).ok());
  EXPECT_EQ(disk_.data.id.member_id, 0x77u);
  EXPECT_EQ(disk_.Read(Marker::kFenced), "r1");
  EXPECT_EQ(disk_.Read(Marker::kRestoreId), "r1");
  EXPECT_TRUE(disk_.aside.count("etcd-before-restore-r1"));
  EXPECT_EQ(runner_.Flag("listen-client-urls"), config_.FenceUrl(config_.self()));
  EXPECT_EQ(runner_.Flag("initial-cluster-token"), "c-rr1");
  // Applied: the same order again changes nothing.
  const int runs = runner_.runs;
  ASSERT_TRUE(node_->Restore(req).ok());
  EXPECT_EQ(runner_.runs, runs);
}

TEST_F(LocalNodeTest, AJoinSetsAPartialDirAsideAndStartsAsAnExistingMember) {
  disk_.data.state = DataDirState::kPartial;
  ASSERT_TRUE(node_->Join(JoinRequest()).ok());
  EXPECT_EQ(disk_.log.front(), "partial aside");
  EXPECT_EQ(runner_.Flag("initial-cluster-state"), "existing");
  EXPECT_EQ(runner_.Flag("initial-cluster"), "n2=https://127.0.0.2:2380");
}

// Found by the simulation (3 nodes, seed 721): a member wiped a moment after its join, before
// its agent saw the data; the runner's restarts of the join left a dir without a WAL that etcd
// cannot start on, and the leader waited for the node to come back empty, for good. Now the
// node sets that dir aside (it holds nothing acknowledged) once etcd is down after a restart.
TEST_F(LocalNodeTest, AJoinThatLeftAPartialDirAfterARestartSetsItAside) {
  ASSERT_TRUE(node_->Join(JoinRequest()).ok());
  disk_.data.state = DataDirState::kPartial;
  node_->ControlPass();  // etcd is starting (running, no restart yet): left alone
  EXPECT_EQ(runner_.stops, 0);
  EXPECT_EQ(disk_.data.state, DataDirState::kPartial);
  runner_.running = false;  // it exited, and the runner restarted it once already
  runner_.restarts_done = 1;
  node_->ControlPass();
  EXPECT_EQ(runner_.stops, 1);
  EXPECT_EQ(disk_.log.back(), "partial aside");
  EXPECT_EQ(disk_.data.state, DataDirState::kEmpty) << "the node now reports empty";
}

// Found by the simulation (deltas, seed 1573 at --crash-rate 0.01): a node applied restore X,
// lost its data, and X was replaced (its deltas were lost); the node then joined the restored
// cluster, but X's fence marker stayed, so every later start of its etcd was on the fence port,
// and X, replaced, never settled to lift it. A join drops a fence left from lost data.
TEST_F(LocalNodeTest, AJoinDropsTheFenceOfARestoreWhoseDataIsGone) {
  disk_.markers[Marker::kFenced] = "1790000097-f2b6";
  disk_.markers[Marker::kRestoreId] = "1790000097-f2b6";
  ASSERT_TRUE(node_->Join(JoinRequest()).ok());
  EXPECT_FALSE(disk_.Has(Marker::kFenced));
  EXPECT_EQ(runner_.runs, 1);
  EXPECT_EQ(runner_.Flag("listen-client-urls"), config_.ClientUrl(config_.self()));
}

TEST_F(LocalNodeTest, AJoinOnMemberDataIsRefused) {
  disk_.data.state = DataDirState::kMember;
  EXPECT_TRUE(absl::IsAlreadyExists(node_->Join(peer::StartRequest())));
  EXPECT_EQ(runner_.runs, 0);
}

// D1 through the node: once etcd was started on member data and the data was seen, a data
// dir that vanished is never restarted on.
TEST_F(LocalNodeTest, TheRunnerMayNotRestartEtcdOnAVanishedDataDir) {
  disk_.data.state = DataDirState::kMember;
  node_->AdoptRunning();
  node_->ControlPass();  // sees the member data under the running etcd
  std::string why;
  EXPECT_TRUE(node_->MayRestart(&why));
  disk_.data = FakeDisk::Data();
  EXPECT_FALSE(node_->MayRestart(&why));
  EXPECT_NE(why.find("no longer holds"), std::string::npos) << why;
}

// S-rules through the node: a node that was a member and lost its data waits for the leader
// instead of starting anything on its own.
TEST_F(LocalNodeTest, AFormerMemberWithAnEmptyDataDirWaits) {
  disk_.markers[Marker::kJoined] = "1";
  node_->ControlPass();
  EXPECT_EQ(runner_.runs, 0);
  EXPECT_FALSE(disk_.Has(Marker::kInitialBootstrap));
}

TEST_F(LocalNodeTest, MemberDataIsStartedOnWithTheJoinedMarkerWrittenOnceALeaderIsSeen) {
  HaveMember();
  disk_.data.commit = 3;  // a bootstrap's entries only: not yet known to have had a leader
  node_->ControlPass();
  EXPECT_EQ(runner_.runs, 1);
  EXPECT_EQ(runner_.Flag("listen-client-urls"), config_.ClientUrl(config_.self()));
  EXPECT_FALSE(disk_.Has(Marker::kJoined));
  local_.answers = true;  // its etcd now reports a leader
  node_->ControlPass();
  EXPECT_TRUE(disk_.Has(Marker::kJoined));
}

// The flags name the version of the binary the runner starts: etcd 3.4 gets the zap logger
// (etcd/flags.h), which 3.5 needs not.
TEST_F(LocalNodeTest, Etcd34IsStartedWithTheZapLogger) {
  HaveMember();
  disk_.data.commit = 3;
  auto node = NodeWithBinary("3.4.23");
  node->ControlPass();
  ASSERT_EQ(runner_.runs, 1);
  EXPECT_EQ(runner_.Flag("logger"), "zap");
  runner_.binary_path = "/opt/etcd-3.5/etcd";
  ASSERT_TRUE(runner_.Stop().ok());
  auto newer = NodeWithBinary("3.5.30");
  newer->ControlPass();
  ASSERT_EQ(runner_.runs, 2);
  EXPECT_EQ(runner_.Flag("logger"), "");
}

}  // namespace
}  // namespace steward
