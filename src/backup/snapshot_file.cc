// Reading etcd snapshot files without etcd: the bbolt structure through etcd/bolt.h (read
// only, every page bounds-checked, so a truncated or corrupt file is an error, never a crash),
// and etcd's sha256 trailer.
#include "backup/snapshot_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "backup/pipeline.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status.h"
#include "etcd/bolt.h"

namespace steward {
namespace {

constexpr uint32_t kBucketLeaf = 0x01;  // a leaf element that is a nested bucket
constexpr size_t kTrailer = 32;

uint64_t BigEndian64(std::string_view d) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < d.size(); ++i) v = v << 8 | static_cast<unsigned char>(d[i]);
  return v;
}

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
}

// Streams the file in 1 MiB reads to `sink`.
absl::Status ReadFileChunks(const std::string& path,
                            const std::function<absl::Status(std::string_view)>& sink) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("opening ", path));
  std::string buf(1 << 20, '\0');
  absl::Status result;
  while (result.ok()) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result = ErrnoStatus(errno, absl::StrCat("reading ", path));
      break;
    }
    if (n == 0) break;
    result = sink(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  return result;
}

}  // namespace

absl::StatusOr<SnapshotFileInfo> InspectSnapshotFile(const std::string& path) {
  auto bolt = BoltFile::Open(path, /*writable=*/false);
  if (!bolt.ok()) {
    // The file's own faults ("not a bbolt database", "truncated", "corrupt") are bad input.
    if (absl::IsDataLoss(bolt.status())) {
      return absl::InvalidArgumentError(bolt.status().message());
    }
    return bolt.status();
  }
  SnapshotFileInfo info;
  std::error_code ec;
  info.size = std::filesystem::file_size(path, ec);
  info.has_trailer = info.size % 512 == kTrailer;
  info.page_size = (*bolt)->page_size();
  info.txid = (*bolt)->txid();
  const uint64_t db_size = info.has_trailer ? info.size - kTrailer : info.size;
  if (db_size % info.page_size != 0) {
    return Bad(path, absl::StrCat("truncated: ", db_size,
                                  " bytes of bbolt data, not a whole "
                                  "number of ",
                                  info.page_size, "-byte pages"));
  }
  // Revisions are the keys: 8 bytes of main revision (big-endian), '_', 8 bytes of sub.
  absl::Status walked =
      (*bolt)->ForEach("key", [&](std::string_view k, std::string_view, uint32_t) {
        ++info.keys;
        if (k.size() >= 8) {
          info.revision = std::max(info.revision, static_cast<int64_t>(BigEndian64(k)));
        }
      });
  if (absl::IsNotFound(walked))
    return Bad(path, "a bbolt database, but not etcd's (no \"key\" bucket)");
  if (!walked.ok()) return Bad(path, absl::StrCat("corrupt: ", walked.message()));
  auto value_of = [&](const std::string& bucket, std::string_view want) {
    std::optional<std::string> out;
    (*bolt)
        ->ForEach(bucket,
                  [&](std::string_view k, std::string_view v, uint32_t flags) {
                    if (!(flags & kBucketLeaf) && k == want) out = std::string(v);
                  })
        .IgnoreError();  // an absent or damaged bucket leaves the field empty
    return out;
  };
  if (auto ci = value_of("meta", "consistent_index"); ci && ci->size() == 8) {
    info.consistent_index = BigEndian64(*ci);
  }
  if (auto cv = value_of("cluster", "clusterVersion")) info.cluster_version = *cv;
  return info;
}

absl::Status CheckSnapshotTrailer(const std::string& path,
                                  const std::function<void(uint64_t)>& progress) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("reading ", path));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size % 512 != kTrailer) {
    return absl::DataLossError(absl::StrCat(path, ": no sha256 trailer (size ", size,
                                            " is not 32 past a multiple of 512)"));
  }
  Sha256 hash;
  std::string tail;
  uint64_t seen = 0;
  absl::Status s = ReadFileChunks(path, [&](std::string_view c) {
    const uint64_t body_left = seen < size - kTrailer ? size - kTrailer - seen : 0;
    const size_t body = static_cast<size_t>(std::min<uint64_t>(body_left, c.size()));
    hash.Update(c.substr(0, body));
    tail.append(c.substr(body));
    seen += c.size();
    if (progress) progress(seen);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (seen != size || tail.size() != kTrailer) {
    return absl::DataLossError(absl::StrCat(path, ": changed while it was read"));
  }
  if (hash.Raw() != tail) {
    return absl::DataLossError(absl::StrCat(
        path, ": etcd's sha256 trailer does not match the data (corrupt or truncated)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BackupMeta> ImportSnapshotFile(BackupStore& store, const std::string& cluster,
                                              const std::string& path, const SnapshotFileInfo& info,
                                              int64_t generation, const ImportOptions& opts) {
  if (!info.has_trailer && !opts.skip_hash_check) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " has no sha256 trailer (it is not what a snapshot save writes, perhaps a copy of "
        "a member's db file): it cannot be checked for corruption. Pass --skip-hash-check "
        "to use it anyway"));
  }
  const auto now = std::chrono::system_clock::now();
  BackupMeta meta;
  meta.cluster = cluster;
  meta.etcd_version = info.cluster_version;
  meta.revision = info.revision;
  meta.revision_max = info.revision;  // read from the file itself: exact
  meta.raft_index = info.consistent_index;
  meta.member = "file";
  meta.node = opts.taken_by;
  meta.unix_time = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  meta.generation = generation;
  meta.imported_from = path;
  meta.name = BackupName(now, meta.revision);
  return StoreSnapshotStream(
      store, std::move(meta), [&](const auto& sink) -> absl::StatusOr<uint64_t> {
        Sha256 body;  // for a file without a trailer: the one etcd would have appended
        uint64_t seen = 0;
        absl::Status s = ReadFileChunks(path, [&](std::string_view c) {
          if (!info.has_trailer) body.Update(c);
          seen += c.size();
          if (opts.progress) opts.progress(seen);
          return sink(c);
        });
        if (!s.ok()) return s;
        if (seen != info.size) {
          return absl::DataLossError(absl::StrCat(path, ": changed while it was read (", seen,
                                                  " bytes, ", info.size, " when inspected)"));
        }
        if (!info.has_trailer) {
          const std::string trailer = body.Raw();
          if (absl::Status t = sink(trailer); !t.ok()) return t;
          seen += trailer.size();
        }
        return seen;
      });
}

}  // namespace steward
