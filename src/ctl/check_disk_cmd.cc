#include "ctl/check_disk_cmd.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "etcd/client.h"
#include "etcd/disk_latency.h"

namespace steward {

absl::StatusOr<DiskCheck> MeasureSyncedWrites(const std::string& dir, int64_t bytes, int block) {
  const std::string path = absl::StrCat(dir, "/.steward-check-disk-", ::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a file in ", dir, ": ", std::strerror(errno)));
  }
  struct Cleanup {
    int fd;
    std::string path;
    ~Cleanup() {
      ::close(fd);
      ::unlink(path.c_str());
    }
  } cleanup{fd, path};
  const std::string data(static_cast<size_t>(block), 'x');
  std::vector<double> ms;
  for (int64_t done = 0; done < bytes; done += block) {
    if (::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("writing to ", dir, ": ", std::strerror(errno)));
    }
    const auto t = std::chrono::steady_clock::now();
    if (::fdatasync(fd) != 0) {
      return absl::DataLossError(absl::StrCat("fdatasync in ", dir, ": ", std::strerror(errno)));
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  if (ms.empty()) return absl::InvalidArgumentError("nothing to write");
  std::sort(ms.begin(), ms.end());
  DiskCheck out;
  out.writes = static_cast<int64_t>(ms.size());
  out.p50_ms = ms[ms.size() / 2];
  out.p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  out.max_ms = ms.back();
  return out;
}

namespace {

struct CheckDiskArgs {
  std::string dir;
  int size_mib = 22;
  bool force = false;
};

// "" if nothing of this node's etcd serves from `dir`, else what does.
std::string ServingHere(const Common& c, const Config& config, const std::string& dir) {
  std::error_code ec;
  const std::string data = config.EtcdDataDir();
  const bool inside = std::filesystem::equivalent(dir, config.node.data_dir, ec) ||
                      std::filesystem::equivalent(dir, data, ec) ||
                      dir.rfind(config.node.data_dir + "/", 0) == 0;
  if (!inside || !std::filesystem::exists(data + "/member", ec)) return "";
  EtcdClient client({config.ClientUrl(config.self())}, ClientOptions(c));
  auto st = client.Status(config.ClientUrl(config.self()), std::chrono::milliseconds(2000));
  if (!st.ok()) return "";
  return absl::StrCat("etcd on ", config.node.name, " serves its member from ", data);
}

int RunCheckDisk(const Common& c, const CheckDiskArgs& a) {
  std::string dir = a.dir;
  std::optional<Config> config;
  if (!c.config_path.empty()) {
    int rc = 0;
    config = ConfigFor(c, "check-disk", &rc);
    if (!config) return rc;
    if (dir.empty()) dir = config->node.data_dir;
  }
  if (dir.empty()) {
    std::cerr << "stewardctl check-disk: name the directory (--dir) or a node's config\n";
    return 2;
  }
  if (a.size_mib < 1 || a.size_mib > 1024) {
    std::cerr << "stewardctl check-disk: --size-mib must be 1..1024\n";
    return 2;
  }
  if (config && !a.force) {
    if (std::string serving = ServingHere(c, *config, dir); !serving.empty()) {
      std::cerr << "stewardctl check-disk: refusing: " << serving
                << "; its own fsyncs would compete with the check and slow the cluster "
                   "(--force to measure anyway)\n";
      return 1;
    }
  }
  constexpr int kBlock = 2300;  // about one WAL entry, as in etcd's guidance
  auto r = MeasureSyncedWrites(dir, int64_t{a.size_mib} << 20, kBlock);
  if (!r.ok()) {
    std::cerr << "stewardctl check-disk: " << r.status().message() << "\n";
    return 1;
  }
  const bool ok = r->p99_ms < kWalFsyncGuidanceMs;
  std::cout << absl::StrFormat(
      "%s: %d writes of %d bytes, each followed by fdatasync: p50 %.2f ms, p99 %.2f ms, max "
      "%.2f ms\n%s\n",
      dir, r->writes, kBlock, r->p50_ms, r->p99_ms, r->max_ms,
      ok ? absl::StrFormat("within etcd's guidance (p99 under %.0f ms)", kWalFsyncGuidanceMs)
         : absl::StrFormat("TOO SLOW for etcd: its guidance is a p99 under %.0f ms; a member's "
                           "WAL here would slow every write of the cluster",
                           kWalFsyncGuidanceMs));
  return ok ? 0 : 1;
}

}  // namespace

void AddCheckDiskCommand(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<CheckDiskArgs>();
  CLI::App* sub = app.add_subcommand(
      "check-disk",
      "measure small synced writes in a directory as etcd's guidance does (p99 under 10 ms)");
  AddCommonFlags(sub, common, false);
  sub->add_option("--dir", args->dir, "the directory (default: the node's data_dir)");
  sub->add_option("--size-mib", args->size_mib, "how much to write (default 22, as etcd's fio)");
  sub->add_flag("--force", args->force, "measure even where this node's etcd serves");
  commands->push_back({sub, [common, args] { return RunCheckDisk(*common, *args); }});
}

}  // namespace steward
