// bench/member_restore: one member's share of a restore, through the agent's own code
// (FsNodeDisk::StageBackup, then FsNodeDisk::RestoreStaged, as src/node/node_restore.cc calls
// them), timed. The newest backup of CLUSTER in the file store at STORE_DIR is fetched, checked
// and decompressed into WORK_DIR's staging area and restored in place (docs/restore-in-place.md;
// raising the revision by BUMP > 0, as a restore after total loss does; TOOL, etcdutl, only if
// the in-place restore refused the DB).
// Prints "stage_ms restore_ms total_ms"; the staged files are removed afterwards.
// bench/restore runs it beside a plain `etcdctl snapshot restore` of the same DB on one node.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/numbers.h"
#include "backup/pipeline.h"
#include "backup/store.h"
#include "node/node_disk.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  uint64_t bump = 0;
  if (argc != 6 || !absl::SimpleAtoi(argv[5], &bump)) {
    std::fprintf(stderr, "usage: member_restore STORE_DIR CLUSTER WORK_DIR TOOL BUMP\n");
    return 2;
  }
  const std::string store_dir = argv[1], cluster = argv[2], work = argv[3], tool = argv[4];
  spdlog::set_level(spdlog::level::warn);  // stdout is the result line
  auto store = steward::NewFileStore(store_dir);
  auto listed = steward::ListBackups(*store, cluster);
  if (!listed.ok() || listed->empty() || !listed->front().meta) {
    std::fprintf(stderr, "member_restore: no complete backup of %s in %s\n", cluster.c_str(),
                 store_dir.c_str());
    return 1;
  }
  std::filesystem::create_directories(work);
  steward::FsNodeDisk disk(work, work + "/etcd");
  steward::SnapshotRestore r;
  r.tool = tool;
  r.name = "n1";
  r.peer_url = "https://127.0.0.1:2380";
  r.token = "member-restore";
  r.initial_cluster = {{"n1", "https://127.0.0.1:2380"},
                       {"n2", "https://127.0.0.2:2380"},
                       {"n3", "https://127.0.0.3:2380"}};
  r.bump_revision = bump;
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  const auto t0 = Clock::now();
  absl::Status s = disk.StageBackup(*store, cluster, *listed->front().meta);
  const auto t1 = Clock::now();
  if (s.ok()) s = disk.RestoreStaged(r);
  const auto t2 = Clock::now();
  disk.ClearStaging();
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  if (!s.ok()) {
    std::fprintf(stderr, "member_restore: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("%lld %lld %lld\n", ms(t1 - t0), ms(t2 - t1), ms(t2 - t0));
  return 0;
}
