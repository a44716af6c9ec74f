// Plain snapshot files with real agents, real etcd 3.4 and Debian's etcdctl 3.4 on
// 127.0.46.x and 127.0.49.x: stewardctl snapshot save is accepted by etcdctl snapshot status,
// backup export by etcdctl snapshot restore; restore-backup --from-file brings back what an
// etcdctl snapshot holds, and refuses a corrupt, truncated or trailer-less file with the
// cluster untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

enum Subnet { kSaveExport = 46, kFromFile = 49 };

// stewardctl with stdout alone (progress and notes go to stderr), for -o json.
RunResult CtlStdout(const TestCluster& c, const std::vector<std::string>& args,
                    std::chrono::seconds timeout = 60s) {
  std::string cmd = absl::StrCat("'", STEWARDCTL_BIN, "'");
  for (const auto& a : args) absl::StrAppend(&cmd, " '", a, "'");
  absl::StrAppend(&cmd, " --config '", c.ConfigPath(0), "' 2>'", c.Root(), "/ctl.err'");
  return RunCommand({"/bin/sh", "-c", cmd}, timeout);
}

// Debian's etcdctl 3.4 with the test's admin certificate, against one member.
RunResult Etcdctl(const TestCluster& c, std::vector<std::string> args, int node = 0) {
  std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3",   "/usr/bin/etcdctl",
                                   "--endpoints",  c.ClientUrl(node), "--cacert",
                                   c.CaCert(),     "--cert",          c.AdminCert(),
                                   "--key",        c.AdminKey()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, 60s);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

TEST(SnapshotFileTest, SaveIsEtcdctlsFormatAndExportRestoresWithEtcdctl) {
  TestCluster c(kSaveExport, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  for (int i = 0; i < 50; ++i) Put(c, absl::StrCat("/it/k", i), std::string(1000, 'v'));

  // snapshot save: the table line, then etcdctl's own reading of the file.
  const std::string file = c.Root() + "/saved.db";
  RunResult saved = c.Ctl({"snapshot", "save", file});
  ASSERT_EQ(saved.exit_code, 0) << saved.output << c.Logs();
  std::cerr << "snapshot save said:\n" << saved.output;
  EXPECT_NE(saved.output.find("saved snapshot of member n"), std::string::npos) << saved.output;
  EXPECT_NE(saved.output.find("sha256 trailer verified"), std::string::npos) << saved.output;
  EXPECT_NE(saved.output.find("snapshot of n"), std::string::npos)
      << "the progress summary on stderr\n"
      << saved.output;
  EXPECT_FALSE(fs::exists(file + ".part"));
  ASSERT_TRUE(fs::exists(file));
  RunResult status = Etcdctl(c, {"snapshot", "status", file, "-w", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  auto st = nlohmann::json::parse(status.output, nullptr, false);
  ASSERT_FALSE(st.is_discarded()) << status.output;
  EXPECT_GE(st.value("totalKey", 0), 50) << status.output;

  // -o json: the revision stewardctl read from the file is etcdctl's.
  const std::string file2 = c.Root() + "/saved2.db";
  RunResult saved2 = CtlStdout(c, {"snapshot", "save", file2, "-o", "json"});
  ASSERT_EQ(saved2.exit_code, 0) << saved2.output << ReadAll(c.Root() + "/ctl.err");
  auto j = nlohmann::json::parse(saved2.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << saved2.output;
  EXPECT_EQ(j.value("size", uint64_t{0}), fs::file_size(file2)) << saved2.output;
  EXPECT_EQ(j.value("sha256_trailer", ""), "ok");
  RunResult status2 = Etcdctl(c, {"snapshot", "status", file2, "-w", "json"});
  auto st2 = nlohmann::json::parse(status2.output, nullptr, false);
  ASSERT_FALSE(st2.is_discarded()) << status2.output;
  EXPECT_EQ(j.value("revision", int64_t{-1}), st2.value("revision", int64_t{-2}))
      << saved2.output << status2.output;
  // The last write acknowledged before the command is in it (a caught-up member was chosen).
  RunResult put = Etcdctl(c, {"put", "/it/last", "yes", "-w", "json"}, 2);
  auto pj = nlohmann::json::parse(put.output, nullptr, false);
  ASSERT_FALSE(pj.is_discarded()) << put.output;
  const int64_t put_revision = pj["header"].value("revision", int64_t{0});
  ASSERT_GT(put_revision, 0) << put.output;
  const std::string file3 = c.Root() + "/saved3.db";
  RunResult saved3 = CtlStdout(c, {"snapshot", "save", file3, "-o", "json"});
  ASSERT_EQ(saved3.exit_code, 0) << saved3.output;
  auto j3 = nlohmann::json::parse(saved3.output, nullptr, false);
  ASSERT_FALSE(j3.is_discarded()) << saved3.output;
  RunResult st3 = Etcdctl(c, {"snapshot", "status", file3, "-w", "json"});
  auto s3 = nlohmann::json::parse(st3.output, nullptr, false);
  ASSERT_FALSE(s3.is_discarded()) << st3.output;
  EXPECT_GE(s3.value("revision", int64_t{0}), put_revision) << st3.output;
  EXPECT_EQ(j3.value("revision", int64_t{-1}), s3.value("revision", int64_t{-2}));

  // stewardctl's own reading, table and json.
  RunResult ours = c.Ctl({"snapshot", "status", file2});
  EXPECT_EQ(ours.exit_code, 0) << ours.output;
  EXPECT_NE(ours.output.find("sha256 trailer:    ok"), std::string::npos) << ours.output;
  RunResult ours_json = CtlStdout(c, {"snapshot", "status", file2, "-o", "json"});
  auto oj = nlohmann::json::parse(ours_json.output, nullptr, false);
  ASSERT_FALSE(oj.is_discarded()) << ours_json.output;
  EXPECT_EQ(oj.value("revision", int64_t{-1}), st2.value("revision", int64_t{-2}));

  // backup export: verified, refuses to overwrite, --force replaces; etcdctl restores it.
  std::string name = TakeBackup(c);
  ASSERT_FALSE(name.empty());
  const std::string out = c.Root() + "/export.db";
  RunResult exported = c.Ctl({"backup", "export", name, out});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::cerr << "backup export said:\n" << exported.output;
  EXPECT_NE(exported.output.find("exported backup " + name), std::string::npos) << exported.output;
  EXPECT_FALSE(fs::exists(out + ".part"));
  const auto size = fs::file_size(out);
  RunResult again = c.Ctl({"backup", "export", name, out});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("refusing to overwrite"), std::string::npos) << again.output;
  RunResult forced = CtlStdout(c, {"backup", "export", name, out, "--force", "-o", "json"});
  ASSERT_EQ(forced.exit_code, 0) << forced.output << ReadAll(c.Root() + "/ctl.err");
  auto fj = nlohmann::json::parse(forced.output, nullptr, false);
  ASSERT_FALSE(fj.is_discarded()) << forced.output;
  EXPECT_EQ(fj.value("size", uint64_t{0}), size);
  EXPECT_EQ(fj.value("backup", ""), name);
  // From the store alone, without any node's config (an operator's machine).
  const std::string bare = c.Root() + "/bare.db";
  RunResult store_only = c.Ctl({"backup", "export", name, bare, "--backup-store",
                                absl::StrCat("file://", c.Root(), "/backups"), "--cluster", "it46"},
                               /*with_config=*/false);
  ASSERT_EQ(store_only.exit_code, 0) << store_only.output;
  EXPECT_EQ(ReadAll(bare), ReadAll(out));
  RunResult missing =
      c.Ctl({"backup", "export", "20260101T000000Z-00000000000000000001", c.Root() + "/none.db"});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_FALSE(fs::exists(c.Root() + "/none.db"));

  const std::string restored = c.Root() + "/restored";
  RunResult r = RunCommand({"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl", "snapshot",
                            "restore", out, "--data-dir", restored},
                           60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(restored + "/member/snap/db")) << r.output;
}

TEST(SnapshotFileTest, RestoreFromAnEtcdctlSnapshotBringsItsKeysBack) {
  TestCluster c(kFromFile, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  Put(c, "/it/a", "1");
  Put(c, "/it/b", "1");
  const std::string file = c.Root() + "/etcdctl.db";
  RunResult saved = Etcdctl(c, {"snapshot", "save", file});
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  // Changed and deleted after the snapshot, and one key it never had.
  Put(c, "/it/a", "2");
  RunResult del = Etcdctl(c, {"del", "/it/b"});
  ASSERT_EQ(del.exit_code, 0) << del.output;
  Put(c, "/it/c", "new");

  const std::string snap = ReadAll(file);
  ASSERT_GT(snap.size(), 4096u);
  // A flipped byte: the trailer catches it, nothing is stopped.
  std::string flipped = snap;
  flipped[flipped.size() / 2] ^= 0x5a;
  WriteAll(c.Root() + "/flipped.db", flipped);
  RunResult bad = c.Ctl({"restore-backup", "--from-file", c.Root() + "/flipped.db", "--yes"});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("refusing to restore"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("sha256"), std::string::npos) << bad.output;
  // Truncated: no longer a trailer's length, so no hash to check: refused without the flag,
  // and with it the bbolt structure says it is cut short.
  WriteAll(c.Root() + "/cut.db", snap.substr(0, snap.size() / 2));
  RunResult cut = c.Ctl({"restore-backup", "--from-file", c.Root() + "/cut.db", "--yes"});
  EXPECT_EQ(cut.exit_code, 1) << cut.output;
  EXPECT_NE(cut.output.find("refusing to restore"), std::string::npos) << cut.output;
  RunResult cut2 =
      c.Ctl({"restore-backup", "--from-file", c.Root() + "/cut.db", "--yes", "--skip-hash-check"});
  EXPECT_EQ(cut2.exit_code, 1) << cut2.output;
  EXPECT_NE(cut2.output.find("truncated"), std::string::npos) << cut2.output;
  // Not a snapshot at all.
  WriteAll(c.Root() + "/text.db", std::string(100000, 'x'));
  RunResult text =
      c.Ctl({"restore-backup", "--from-file", c.Root() + "/text.db", "--yes", "--skip-hash-check"});
  EXPECT_EQ(text.exit_code, 1) << text.output;
  EXPECT_NE(text.output.find("not a bbolt database"), std::string::npos) << text.output;
  // A missing file, and usage errors.
  RunResult none = c.Ctl({"restore-backup", "--from-file", c.Root() + "/none.db", "--yes"});
  EXPECT_EQ(none.exit_code, 1) << none.output;
  RunResult both = c.Ctl({"restore-backup", "x", "--from-file", file, "--yes"});
  EXPECT_EQ(both.exit_code, 2) << both.output;
  RunResult neither = c.Ctl({"restore-backup", "--yes"});
  EXPECT_EQ(neither.exit_code, 2) << neither.output;
  // None of that touched the cluster or left a backup behind.
  EXPECT_EQ(Get(c, 0, "/it/a"), "2");
  EXPECT_EQ(Get(c, 1, "/it/c"), "new");
  EXPECT_EQ(c.HealthyVoters(), (std::vector<std::string>{"n1", "n2", "n3"}));
  RunResult list = CtlStdout(c, {"list-backups", "-o", "json"});
  auto before = nlohmann::json::parse(list.output, nullptr, false);
  ASSERT_FALSE(before.is_discarded()) << list.output;
  for (const auto& b : before) EXPECT_FALSE(b.contains("imported_from")) << list.output;

  // The real file: imported, then the named restore with its safety backup.
  RunResult r =
      c.Ctl({"restore-backup", "--from-file", file, "--yes", "--wait", "120"}, true, 150s);
  ASSERT_EQ(r.exit_code, 0) << r.output << c.Logs();
  std::cerr << "restore-backup --from-file said:\n" << r.output;  // the runbook quotes it
  EXPECT_NE(r.output.find("imported " + file + " as backup "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("took a fresh backup first"), std::string::npos) << r.output;
  ASSERT_TRUE(c.WaitVoters({"n1", "n2", "n3"}, 60s)) << c.Logs();
  EXPECT_EQ(Get(c, 0, "/it/a"), "1");
  EXPECT_EQ(Get(c, 1, "/it/b"), "1");
  EXPECT_EQ(Get(c, 2, "/it/c"), "<absent>");
  // The store lists the import as such, beside the safety backup holding the later writes.
  list = CtlStdout(c, {"list-backups", "-o", "json"});
  auto after = nlohmann::json::parse(list.output, nullptr, false);
  ASSERT_FALSE(after.is_discarded()) << list.output;
  int imported = 0;
  for (const auto& b : after) {
    if (b.value("imported_from", "") == file) ++imported;
  }
  EXPECT_EQ(imported, 1) << list.output;
  RunResult table = c.Ctl({"list-backups"});
  EXPECT_NE(table.output.find("imported from " + file), std::string::npos) << table.output;
}

}  // namespace
}  // namespace steward::testing
