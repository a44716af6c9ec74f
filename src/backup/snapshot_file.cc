// Reading etcd snapshot files without etcd: bbolt's on-disk format (meta pages, branch and leaf
// pages, buckets inline or in pages of their own), read through bounds-checked views of a
// read-only mapping, so a truncated or corrupt file is an error, never a crash.
#include "backup/snapshot_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "backup/pipeline.h"
#include "common/files.h"
#include "common/status.h"
#include "common/sha256.h"

namespace steward {
namespace {

constexpr uint32_t kBoltMagic = 0xED0CDAED;
constexpr uint32_t kBoltVersion = 2;
constexpr uint16_t kBranchPage = 0x01;
constexpr uint16_t kLeafPage = 0x02;
constexpr uint32_t kBucketLeaf = 0x01;
constexpr size_t kPageHeader = 16;  // id u64, flags u16, count u16, overflow u32
constexpr size_t kElement = 16;     // branch: pos, ksize, pgid; leaf: flags, pos, ksize, vsize
constexpr size_t kTrailer = 32;
constexpr int kMaxDepth = 64;

template <typename T>
bool Load(std::string_view d, size_t at, T* out) {
  if (at > d.size() || d.size() - at < sizeof(T)) return false;
  std::memcpy(out, d.data() + at, sizeof(T));  // bbolt writes native (little-endian) order
  return true;
}

uint64_t Fnv64a(std::string_view d) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : d) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t BigEndian64(std::string_view d) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < d.size(); ++i) v = v << 8 | static_cast<unsigned char>(d[i]);
  return v;
}

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
}

struct Meta {
  uint32_t page_size = 0;
  uint64_t root = 0;
  uint64_t high_water = 0;  // pgid: pages in use
  uint64_t txid = 0;
};

// Meta page `i` (0 or 1) if its magic, version and checksum hold. The page size comes from the
// meta itself; meta 1 sits one page after meta 0.
std::optional<Meta> ReadMeta(std::string_view file, uint32_t page_size_guess, int i) {
  const size_t base = static_cast<size_t>(i) * page_size_guess + kPageHeader;
  uint32_t magic = 0, version = 0, page_size = 0;
  if (!Load(file, base, &magic) || !Load(file, base + 4, &version) ||
      !Load(file, base + 8, &page_size)) {
    return std::nullopt;
  }
  uint64_t checksum = 0;
  if (magic != kBoltMagic || version != kBoltVersion || !Load(file, base + 56, &checksum) ||
      Fnv64a(file.substr(base, 56)) != checksum) {
    return std::nullopt;
  }
  Meta m;
  m.page_size = page_size;
  Load(file, base + 16, &m.root);
  Load(file, base + 40, &m.high_water);
  Load(file, base + 48, &m.txid);
  return m;
}

class BoltReader {
 public:
  BoltReader(std::string_view file, uint32_t page_size) : file_(file), page_size_(page_size) {}

  // The page `id` with its overflow pages, or nullopt if it lies outside the file.
  std::optional<std::string_view> Page(uint64_t id) const {
    const uint64_t pages = file_.size() / page_size_;
    if (id < 2 || id >= pages) return std::nullopt;  // 0 and 1 are the metas
    uint32_t overflow = 0;
    Load(file_, id * page_size_ + 12, &overflow);
    if (overflow >= pages - id) return std::nullopt;
    return file_.substr(id * page_size_, (uint64_t{overflow} + 1) * page_size_);
  }

  // Calls `leaf` with each (key, value, flags) of the tree rooted at `page` (a page view: a real
  // page or an inline bucket's), in key order. False when a page is out of bounds or malformed.
  bool Walk(std::string_view page, int depth,
            const std::function<void(std::string_view, std::string_view, uint32_t)>& leaf) const {
    if (depth > kMaxDepth) return false;
    uint16_t flags = 0, count = 0;
    if (!Load(page, 8, &flags) || !Load(page, 10, &count)) return false;
    for (uint16_t i = 0; i < count; ++i) {
      const size_t e = kPageHeader + size_t{i} * kElement;
      if (flags & kBranchPage) {
        uint64_t child = 0;
        if (!Load(page, e + 8, &child)) return false;
        auto p = Page(child);
        if (!p || !Walk(*p, depth + 1, leaf)) return false;
      } else if (flags & kLeafPage) {
        uint32_t eflags = 0, pos = 0, ksize = 0, vsize = 0;
        if (!Load(page, e, &eflags) || !Load(page, e + 4, &pos) || !Load(page, e + 8, &ksize) ||
            !Load(page, e + 12, &vsize)) {
          return false;
        }
        const uint64_t k = uint64_t{e} + pos;
        if (k + ksize + vsize > page.size()) return false;
        leaf(page.substr(k, ksize), page.substr(k + ksize, vsize), eflags);
      } else {
        return false;
      }
    }
    return true;
  }

  // The root page view of a bucket whose header is `value` (root pgid, sequence; root 0: the
  // bucket's page follows inline).
  std::optional<std::string_view> BucketRoot(std::string_view value) const {
    uint64_t root = 0;
    if (!Load(value, 0, &root)) return std::nullopt;
    if (root == 0) return value.substr(16);
    return Page(root);
  }

 private:
  std::string_view file_;
  uint32_t page_size_;
};

// A read-only mapping of a whole file.
class Mapping {
 public:
  static absl::StatusOr<Mapping> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("opening ", path));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return ErrnoStatus(e, absl::StrCat("reading ", path));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
    }
    Mapping m;
    m.size_ = static_cast<size_t>(st.st_size);
    if (m.size_ > 0) {
      m.data_ = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m.data_ == MAP_FAILED) {
        int e = errno;
        ::close(fd);
        m.data_ = nullptr;
        return ErrnoStatus(e, absl::StrCat("mapping ", path));
      }
    }
    ::close(fd);
    return m;
  }
  Mapping() = default;
  Mapping(Mapping&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  std::string_view view() const {
    return data_ == nullptr ? std::string_view() : std::string_view(static_cast<char*>(data_), size_);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

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
  auto mapping = Mapping::Open(path);
  if (!mapping.ok()) return mapping.status();
  const std::string_view file = mapping->view();
  SnapshotFileInfo info;
  info.size = file.size();
  info.has_trailer = file.size() % 512 == kTrailer;
  const std::string_view db = info.has_trailer ? file.substr(0, file.size() - kTrailer) : file;
  // Meta 0 names the page size; meta 1 is one page further. Either may be the valid one (a
  // crash mid-commit leaves the other); bbolt uses the valid one with the higher txid.
  std::optional<Meta> best;
  auto m0 = ReadMeta(db, 0, 0);
  for (uint32_t guess : {m0 ? m0->page_size : 0u, 4096u, 8192u, 16384u, 65536u}) {
    if (guess < 1024 || guess > (1u << 20)) continue;
    auto m1 = ReadMeta(db, guess, 1);
    auto a = (m0 && m0->page_size == guess) ? m0 : std::nullopt;
    auto b = (m1 && m1->page_size == guess) ? m1 : std::nullopt;
    if (a && (!b || a->txid >= b->txid)) best = a;
    if (b && (!a || b->txid > a->txid)) best = b;
    if (best) break;
  }
  if (!best) {
    return Bad(path, db.size() < 2 * 4096
                         ? absl::StrCat("not a bbolt database (only ", file.size(), " bytes)")
                         : "not a bbolt database (no valid meta page: wrong magic, version or "
                           "checksum)");
  }
  info.page_size = best->page_size;
  info.txid = best->txid;
  if (db.size() % best->page_size != 0 || db.size() / best->page_size < best->high_water) {
    return Bad(path, absl::StrCat("truncated: ", db.size(), " bytes of bbolt data, but its meta "
                                  "page says ", best->high_water, " pages of ",
                                  best->page_size, " bytes"));
  }
  BoltReader bolt(db, best->page_size);
  auto root = bolt.Page(best->root);
  if (!root) return Bad(path, "corrupt: the root bucket's page lies outside the file");
  std::optional<std::string_view> key_bucket, meta_bucket, cluster_bucket;
  bool ok = bolt.Walk(*root, 0, [&](std::string_view k, std::string_view v, uint32_t flags) {
    if (!(flags & kBucketLeaf)) return;
    if (k == "key") key_bucket = v;
    if (k == "meta") meta_bucket = v;
    if (k == "cluster") cluster_bucket = v;
  });
  if (!ok) return Bad(path, "corrupt: a page of the root bucket is malformed or out of bounds");
  if (!key_bucket) return Bad(path, "a bbolt database, but not etcd's (no \"key\" bucket)");
  auto key_root = bolt.BucketRoot(*key_bucket);
  if (!key_root) return Bad(path, "corrupt: the \"key\" bucket's page lies outside the file");
  // Revisions are the keys: 8 bytes of main revision (big-endian), '_', 8 bytes of sub.
  ok = bolt.Walk(*key_root, 0, [&](std::string_view k, std::string_view, uint32_t) {
    ++info.keys;
    if (k.size() >= 8) {
      info.revision = std::max(info.revision, static_cast<int64_t>(BigEndian64(k)));
    }
  });
  if (!ok) return Bad(path, "corrupt: a page of the \"key\" bucket is malformed or out of bounds");
  auto value_of = [&](std::optional<std::string_view> bucket, std::string_view want) {
    std::optional<std::string> out;
    if (!bucket) return out;
    auto r = bolt.BucketRoot(*bucket);
    if (!r) return out;
    bolt.Walk(*r, 0, [&](std::string_view k, std::string_view v, uint32_t flags) {
      if (!(flags & kBucketLeaf) && k == want) out = std::string(v);
    });
    return out;
  };
  if (auto ci = value_of(meta_bucket, "consistent_index"); ci && ci->size() == 8) {
    info.consistent_index = BigEndian64(*ci);
  }
  if (auto cv = value_of(cluster_bucket, "clusterVersion")) info.cluster_version = *cv;
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
                                              const std::string& path,
                                              const SnapshotFileInfo& info, int64_t generation,
                                              const ImportOptions& opts) {
  if (!info.has_trailer && !opts.skip_hash_check) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has no sha256 trailer (it is not what a snapshot save writes, perhaps a copy of "
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
  return StoreSnapshotStream(store, std::move(meta), [&](const auto& sink) -> absl::StatusOr<uint64_t> {
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
