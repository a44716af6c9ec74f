#include "etcd/bolt.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace steward {

static_assert(std::endian::native == std::endian::little,
              "bbolt files are read and written in the host's byte order; only little-endian "
              "hosts are supported");

namespace {

constexpr uint32_t kMagic = 0xED0CDAED;
constexpr uint32_t kVersion = 2;
constexpr uint16_t kBranchPage = 0x01;
constexpr uint16_t kLeafPage = 0x02;
constexpr uint16_t kMetaPage = 0x04;
constexpr uint32_t kBucketLeafFlag = 0x01;
constexpr size_t kPageHeader = 16;    // id u64, flags u16, count u16, overflow u32
constexpr size_t kElementSize = 16;   // leaf: flags, pos, ksize, vsize; branch: pos, ksize, pgid
constexpr size_t kBucketHeader = 16;  // root pgid u64, sequence u64
constexpr size_t kMetaChecksumOffset = 56;  // the meta's bytes the checksum covers
constexpr int kMaxDepth = 64;
constexpr uint64_t kNoFreelist = ~uint64_t{0};  // meta.freelist when the freelist is not kept

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void Store(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

uint64_t Fnv1a64(const char* p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint8_t>(p[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// Reads or writes exactly n bytes at `off`; a short transfer is an error of its own (errno
// would be stale).
absl::Status PreadAll(int fd, char* buf, size_t n, uint64_t off, const std::string& what) {
  ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(off));
  if (got < 0) return ErrnoStatus(errno, "reading " + what);
  if (static_cast<size_t>(got) != n) {
    return absl::DataLossError(absl::StrCat("reading ", what, ": the file ends early"));
  }
  return absl::OkStatus();
}
absl::Status PwriteAll(int fd, const char* buf, size_t n, uint64_t off, const std::string& what) {
  ssize_t put = ::pwrite(fd, buf, n, static_cast<off_t>(off));
  if (put < 0) return ErrnoStatus(errno, "writing " + what);
  if (static_cast<size_t>(put) != n) {
    return absl::InternalError(absl::StrCat("writing ", what, ": short write"));
  }
  return absl::OkStatus();
}

}  // namespace

struct BoltFile::Node {
  struct Elem {
    uint32_t flags = 0;  // leaf: kBucketLeafFlag for a bucket
    std::string key, value;
    uint64_t pgid = 0;  // branch: the child
  };
  bool leaf = true;
  std::vector<Elem> elems;

  size_t Size() const {
    size_t n = kPageHeader + elems.size() * kElementSize;
    for (const auto& e : elems) n += e.key.size() + (leaf ? e.value.size() : 0);
    return n;
  }
  // The index of the element whose subtree holds `key` (bbolt's branch search), or of the
  // first leaf element not less than `key`.
  size_t Search(const std::string& key) const {
    size_t i = std::lower_bound(elems.begin(), elems.end(), key,
                                [](const Elem& e, const std::string& k) { return e.key < k; }) -
               elems.begin();
    if (!leaf && (i == elems.size() || elems[i].key != key) && i > 0) --i;
    return i;
  }
};

namespace {

// Decodes a node from `bytes` (a page with its overflow pages, or an inline bucket's page).
absl::StatusOr<BoltFile::Node> DecodeNode(const char* bytes, size_t size, const std::string& at) {
  if (size < kPageHeader) return absl::DataLossError(at + ": shorter than a page header");
  const uint16_t flags = Load<uint16_t>(bytes + 8);
  const uint16_t count = Load<uint16_t>(bytes + 10);
  if (flags != kBranchPage && flags != kLeafPage) {
    return absl::DataLossError(absl::StrCat(at, ": not a branch or leaf page (flags ", flags, ")"));
  }
  BoltFile::Node n;
  n.leaf = flags == kLeafPage;
  if (kPageHeader + size_t{count} * kElementSize > size) {
    return absl::DataLossError(at + ": its elements overrun the page");
  }
  n.elems.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t off = kPageHeader + i * kElementSize;
    const char* e = bytes + off;
    uint32_t pos, ksize, vsize = 0;
    if (n.leaf) {
      n.elems[i].flags = Load<uint32_t>(e);
      pos = Load<uint32_t>(e + 4);
      ksize = Load<uint32_t>(e + 8);
      vsize = Load<uint32_t>(e + 12);
    } else {
      pos = Load<uint32_t>(e);
      ksize = Load<uint32_t>(e + 4);
      n.elems[i].pgid = Load<uint64_t>(e + 8);
    }
    const uint64_t start = off + uint64_t{pos};
    if (start + ksize + vsize > size) {
      return absl::DataLossError(absl::StrCat(at, ": element ", i, " overruns the page"));
    }
    n.elems[i].key.assign(bytes + start, ksize);
    n.elems[i].value.assign(bytes + start + ksize, vsize);
    if (i > 0 && !(n.elems[i - 1].key < n.elems[i].key)) {
      return absl::DataLossError(absl::StrCat(at, ": keys out of order at element ", i));
    }
  }
  return n;
}

// Writes `n` as a page into `out` (already sized; zero-filled).
void EncodeInto(const BoltFile::Node& n, uint64_t pgid, uint32_t overflow, char* out) {
  Store<uint64_t>(out, pgid);
  Store<uint16_t>(out + 8, n.leaf ? kLeafPage : kBranchPage);
  Store<uint16_t>(out + 10, static_cast<uint16_t>(n.elems.size()));
  Store<uint32_t>(out + 12, overflow);
  size_t data = kPageHeader + n.elems.size() * kElementSize;
  for (size_t i = 0; i < n.elems.size(); ++i) {
    const auto& el = n.elems[i];
    const size_t off = kPageHeader + i * kElementSize;
    char* e = out + off;
    const auto pos = static_cast<uint32_t>(data - off);
    if (n.leaf) {
      Store<uint32_t>(e, el.flags);
      Store<uint32_t>(e + 4, pos);
      Store<uint32_t>(e + 8, static_cast<uint32_t>(el.key.size()));
      Store<uint32_t>(e + 12, static_cast<uint32_t>(el.value.size()));
    } else {
      Store<uint32_t>(e, pos);
      Store<uint32_t>(e + 4, static_cast<uint32_t>(el.key.size()));
      Store<uint64_t>(e + 8, el.pgid);
    }
    std::memcpy(out + data, el.key.data(), el.key.size());
    data += el.key.size();
    if (n.leaf) {
      std::memcpy(out + data, el.value.data(), el.value.size());
      data += el.value.size();
    }
  }
}

struct BucketHeader {
  uint64_t root = 0, sequence = 0;
};

absl::StatusOr<BucketHeader> ParseBucket(const std::string& value, const std::string& name) {
  if (value.size() < kBucketHeader) {
    return absl::DataLossError(absl::StrCat("bucket ", name, ": value shorter than its header"));
  }
  return BucketHeader{Load<uint64_t>(value.data()), Load<uint64_t>(value.data() + 8)};
}

}  // namespace

BoltFile::~BoltFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<BoltFile>> BoltFile::Open(const std::string& path, bool writable) {
  std::unique_ptr<BoltFile> f(new BoltFile());
  f->path_ = path;
  f->writable_ = writable;
  f->fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (f->fd_ < 0) return ErrnoStatus(errno, "opening " + path);
  struct stat st;
  if (::fstat(f->fd_, &st) != 0) return ErrnoStatus(errno, "reading " + path);
  if (!S_ISREG(st.st_mode)) return absl::DataLossError(path + ": not a regular file");
  f->file_size_ = static_cast<uint64_t>(st.st_size);

  // Meta page 0 says the page size; meta page 1 is one page further.
  struct Meta {
    bool valid = false;
    uint32_t page_size = 0, flags = 0;
    uint64_t root = 0, sequence = 0, freelist = 0, pgid = 0, txid = 0;
  };
  auto read_meta = [&](uint64_t offset) -> Meta {
    char buf[kPageHeader + 64];
    Meta m;
    if (::pread(f->fd_, buf, sizeof buf, static_cast<off_t>(offset)) !=
        static_cast<ssize_t>(sizeof buf)) {
      return m;
    }
    const char* p = buf + kPageHeader;
    if ((Load<uint16_t>(buf + 8) & kMetaPage) == 0 || Load<uint32_t>(p) != kMagic ||
        Load<uint32_t>(p + 4) != kVersion ||
        Load<uint64_t>(p + kMetaChecksumOffset) != Fnv1a64(p, kMetaChecksumOffset)) {
      return m;
    }
    m.page_size = Load<uint32_t>(p + 8);
    m.flags = Load<uint32_t>(p + 12);
    m.root = Load<uint64_t>(p + 16);
    m.sequence = Load<uint64_t>(p + 24);
    m.freelist = Load<uint64_t>(p + 32);
    m.pgid = Load<uint64_t>(p + 40);
    m.txid = Load<uint64_t>(p + 48);
    m.valid = true;
    return m;
  };
  auto sane = [](uint32_t ps) { return ps >= 1024 && ps <= (1u << 16) && std::has_single_bit(ps); };
  Meta m0 = read_meta(0);
  if (m0.valid && !sane(m0.page_size)) {
    return absl::DataLossError(absl::StrCat(path, ": unexpected page size ", m0.page_size));
  }
  // Meta 0 names the page size; when it is damaged, bbolt looks for meta 1 one (OS) page on.
  Meta m1;
  for (uint32_t at : {m0.valid ? m0.page_size : 4096u, 8192u, 16384u, 65536u}) {
    m1 = read_meta(at);
    if (m1.valid && m1.page_size == at && (!m0.valid || m0.page_size == at)) break;
    m1 = Meta();
    if (m0.valid) break;
  }
  if (!m0.valid && !m1.valid) {
    return absl::DataLossError(
        f->file_size_ < 2 * 4096
            ? absl::StrCat(path, ": not a bbolt database (only ", f->file_size_, " bytes)")
            : path +
                  ": not a bbolt database (no valid meta page: wrong magic, version or "
                  "checksum)");
  }
  const bool use_m1 = m1.valid && (!m0.valid || m1.txid > m0.txid);
  const Meta& m = use_m1 ? m1 : m0;
  f->meta_slot_ = use_m1 ? 1 : 0;
  f->page_size_ = m.page_size;
  f->meta_flags_ = m.flags;
  f->root_ = m.root;
  f->root_sequence_ = m.sequence;
  f->high_water_ = m.pgid;
  f->txid_ = m.txid;
  f->next_pgid_ = m.pgid;
  uint64_t pages_bytes = 0;
  if (__builtin_mul_overflow(m.pgid, uint64_t{m.page_size}, &pages_bytes) ||
      f->file_size_ < pages_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: ", f->file_size_,
                                            " bytes of bbolt data, but its meta page says ", m.pgid,
                                            " pages of ", m.page_size, " bytes"));
  }
  if (m.pgid < 3 || m.root < 2 || m.root >= m.pgid) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt: the meta page puts the root at page ",
                                            m.root, " of ", m.pgid));
  }
  return f;
}

absl::StatusOr<BoltFile::Node> BoltFile::LoadNode(uint64_t pgid) const {
  const std::string at = absl::StrCat(path_, " page ", pgid);
  if (auto it = pending_.find(pgid); it != pending_.end()) {
    return DecodeNode(it->second.data(), it->second.size(), at);
  }
  if (pgid < 2 || pgid >= high_water_)
    return absl::DataLossError(at + ": outside the file's pages");
  char head[kPageHeader];
  const uint64_t off = pgid * page_size_;
  if (absl::Status s = PreadAll(fd_, head, sizeof head, off, at); !s.ok()) return s;
  if (Load<uint64_t>(head) != pgid)
    return absl::DataLossError(at + ": its header names another page");
  const uint64_t pages = 1 + uint64_t{Load<uint32_t>(head + 12)};
  if (pgid + pages > high_water_)
    return absl::DataLossError(at + ": overflows past the file's pages");
  std::string bytes(pages * page_size_, '\0');
  if (absl::Status s = PreadAll(fd_, bytes.data(), bytes.size(), off, at); !s.ok()) return s;
  return DecodeNode(bytes.data(), bytes.size(), at);
}

std::string BoltFile::EncodeNode(const Node& n, uint64_t pgid, uint32_t* pages) const {
  const size_t size = n.Size();
  *pages = static_cast<uint32_t>((size + page_size_ - 1) / page_size_);
  std::string out(size_t{*pages} * page_size_, '\0');
  EncodeInto(n, pgid, *pages - 1, out.data());
  return out;
}

absl::StatusOr<uint64_t> BoltFile::WriteNode(const Node& n) {
  if (n.elems.size() >= 0xFFFF) return absl::InternalError("a node of 65535 or more elements");
  uint32_t pages = 0;
  const uint64_t pgid = next_pgid_;
  std::string bytes = EncodeNode(n, pgid, &pages);
  pending_[pgid] = std::move(bytes);
  next_pgid_ += pages;
  return pgid;
}

absl::StatusOr<uint64_t> BoltFile::PutInTree(uint64_t root, const std::string& key,
                                             const std::string& value, uint32_t flags, int depth) {
  if (depth > kMaxDepth) return absl::DataLossError(path_ + ": tree deeper than expected");
  auto n = LoadNode(root);
  if (!n.ok()) return n.status();
  const size_t i = n->Search(key);
  if (n->leaf) {
    if (i < n->elems.size() && n->elems[i].key == key) {
      if (n->elems[i].flags != flags) {
        return absl::FailedPreconditionError(absl::StrCat(path_, ": key ", key, " is a ",
                                                          flags ? "value" : "bucket", ", not the ",
                                                          flags ? "bucket" : "value", " expected"));
      }
      n->elems[i].value = value;
    } else {
      Node::Elem e;
      e.flags = flags;
      e.key = key;
      e.value = value;
      n->elems.insert(n->elems.begin() + static_cast<long>(i), std::move(e));
    }
  } else {
    if (n->elems.empty()) return absl::DataLossError(path_ + ": an empty branch page");
    auto child = PutInTree(n->elems[i].pgid, key, value, flags, depth + 1);
    if (!child.ok()) return child.status();
    n->elems[i].pgid = *child;
    // A branch element's key is its child's first key (a key put before it moves it).
    if (key < n->elems[i].key) n->elems[i].key = key;
  }
  return WriteNode(*n);
}

absl::StatusOr<std::string> BoltFile::BucketValue(const std::string& bucket) {
  uint64_t pgid = root_;
  for (int depth = 0; depth <= kMaxDepth; ++depth) {
    auto n = LoadNode(pgid);
    if (!n.ok()) return n.status();
    const size_t i = n->Search(bucket);
    if (n->leaf) {
      if (i < n->elems.size() && n->elems[i].key == bucket &&
          (n->elems[i].flags & kBucketLeafFlag)) {
        return n->elems[i].value;
      }
      return absl::NotFoundError(absl::StrCat(path_, ": no bucket ", bucket));
    }
    if (n->elems.empty()) return absl::DataLossError(path_ + ": an empty branch page");
    pgid = n->elems[i].pgid;
  }
  return absl::DataLossError(path_ + ": tree deeper than expected");
}

absl::Status BoltFile::SetBucketValue(const std::string& bucket, const std::string& value) {
  auto r = PutInTree(root_, bucket, value, kBucketLeafFlag, 0);
  if (!r.ok()) return r.status();
  root_ = *r;
  return absl::OkStatus();
}

absl::Status BoltFile::CollectLeaves(uint64_t pgid, std::map<std::string, std::string>* out,
                                     int depth) {
  if (depth > kMaxDepth) return absl::DataLossError(path_ + ": tree deeper than expected");
  auto n = LoadNode(pgid);
  if (!n.ok()) return n.status();
  for (auto& e : n->elems) {
    if (n->leaf) {
      if (e.flags & kBucketLeafFlag) {
        return absl::FailedPreconditionError(path_ + ": a nested bucket where none is expected");
      }
      (*out)[e.key] = std::move(e.value);
    } else if (absl::Status s = CollectLeaves(e.pgid, out, depth + 1); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status BoltFile::WalkPages(uint64_t pgid, int depth, const Visitor& fn) const {
  if (depth > kMaxDepth) return absl::DataLossError(path_ + ": tree deeper than expected");
  const std::string at = absl::StrCat(path_, " page ", pgid);
  if (pgid < 2 || pgid >= high_water_)
    return absl::DataLossError(at + ": outside the file's pages");
  char head[kPageHeader];
  if (absl::Status s = PreadAll(fd_, head, sizeof head, pgid * page_size_, at); !s.ok()) return s;
  const uint64_t pages = 1 + uint64_t{Load<uint32_t>(head + 12)};
  if (Load<uint64_t>(head) != pgid || pgid + pages > high_water_) {
    return absl::DataLossError(at + ": its header names another page or overflows the file");
  }
  std::string bytes(pages * page_size_, '\0');
  if (absl::Status s = PreadAll(fd_, bytes.data(), bytes.size(), pgid * page_size_, at); !s.ok()) {
    return s;
  }
  return WalkNode(bytes, depth, at, fn);
}

absl::Status BoltFile::WalkNode(std::string_view bytes, int depth, const std::string& at,
                                const Visitor& fn) const {
  if (bytes.size() < kPageHeader) return absl::DataLossError(at + ": shorter than a page header");
  const uint16_t flags = Load<uint16_t>(bytes.data() + 8);
  const uint16_t count = Load<uint16_t>(bytes.data() + 10);
  if ((flags != kBranchPage && flags != kLeafPage) ||
      kPageHeader + size_t{count} * kElementSize > bytes.size()) {
    return absl::DataLossError(at + ": not a well-formed branch or leaf page");
  }
  for (size_t i = 0; i < count; ++i) {
    const size_t off = kPageHeader + i * kElementSize;
    const char* e = bytes.data() + off;
    if (flags == kBranchPage) {
      if (absl::Status s = WalkPages(Load<uint64_t>(e + 8), depth + 1, fn); !s.ok()) return s;
      continue;
    }
    const uint64_t start = off + uint64_t{Load<uint32_t>(e + 4)};
    const uint32_t ksize = Load<uint32_t>(e + 8), vsize = Load<uint32_t>(e + 12);
    if (start + ksize + vsize > bytes.size()) {
      return absl::DataLossError(absl::StrCat(at, ": element ", i, " overruns the page"));
    }
    fn(bytes.substr(start, ksize), bytes.substr(start + ksize, vsize), Load<uint32_t>(e));
  }
  return absl::OkStatus();
}

bool IsDamagedDb(const absl::Status& s) {
  return absl::IsDataLoss(s) && s.message().find(BoltFile::kDamaged) != absl::string_view::npos;
}

struct BoltFile::CheckState {
  std::vector<bool> seen;  // by page id
  int buckets = 0;         // nesting, for the depth guard
};

absl::Status BoltFile::CheckAll() const {
  CheckState st;
  st.seen.assign(high_water_, false);
  st.seen[0] = st.seen[1] = true;  // the meta pages
  return CheckPage(root_, "", nullptr, 0, "(root)", st);
}

absl::Status BoltFile::CheckPage(uint64_t pgid, const std::string& lo, const std::string* hi,
                                 int depth, const std::string& bucket, CheckState& st) const {
  const std::string at = absl::StrCat(kDamaged, ": page ", pgid, " (bucket ", bucket, ")");
  if (depth > kMaxDepth) return absl::DataLossError(at + ": the tree is deeper than bbolt makes");
  if (pgid < 2 || pgid >= high_water_) {
    return absl::DataLossError(absl::StrCat(at, ": outside the file's ", high_water_, " pages"));
  }
  char head[kPageHeader];
  if (absl::Status s = PreadAll(fd_, head, sizeof head, pgid * page_size_, path_); !s.ok())
    return s;
  if (Load<uint64_t>(head) != pgid) {
    return absl::DataLossError(absl::StrCat(at, ": its header names page ", Load<uint64_t>(head)));
  }
  const uint64_t pages = 1 + uint64_t{Load<uint32_t>(head + 12)};
  if (pgid + pages > high_water_) {
    return absl::DataLossError(
        absl::StrCat(at, ": its ", pages - 1, " overflow pages run past the file's pages"));
  }
  for (uint64_t p = pgid; p < pgid + pages; ++p) {
    if (st.seen[p]) {
      return absl::DataLossError(absl::StrCat(at, ": page ", p, " is reached twice"));
    }
    st.seen[p] = true;
  }
  std::string bytes(pages * page_size_, '\0');
  if (absl::Status s = PreadAll(fd_, bytes.data(), bytes.size(), pgid * page_size_, path_);
      !s.ok()) {
    return s;
  }
  return CheckNode(bytes, at, lo, hi, depth, bucket, st);
}

absl::Status BoltFile::CheckNode(std::string_view bytes, const std::string& at,
                                 const std::string& lo, const std::string* hi, int depth,
                                 const std::string& bucket, CheckState& st) const {
  if (bytes.size() < kPageHeader) return absl::DataLossError(at + ": shorter than a page header");
  const uint16_t flags = Load<uint16_t>(bytes.data() + 8);
  const uint16_t count = Load<uint16_t>(bytes.data() + 10);
  if (flags != kBranchPage && flags != kLeafPage) {
    return absl::DataLossError(absl::StrCat(at, ": not a branch or leaf page (flags ", flags, ")"));
  }
  if (kPageHeader + size_t{count} * kElementSize > bytes.size()) {
    return absl::DataLossError(at + ": its elements overrun the page");
  }
  if (flags == kBranchPage && count == 0) return absl::DataLossError(at + ": an empty branch");
  std::string_view prev;
  for (size_t i = 0; i < count; ++i) {
    const size_t off = kPageHeader + i * kElementSize;
    const char* e = bytes.data() + off;
    const bool branch = flags == kBranchPage;
    const uint64_t start = off + uint64_t{Load<uint32_t>(e + (branch ? 0 : 4))};
    const uint32_t ksize = Load<uint32_t>(e + (branch ? 4 : 8));
    const uint32_t vsize = branch ? 0 : Load<uint32_t>(e + 12);
    if (start + ksize + vsize > bytes.size()) {
      return absl::DataLossError(absl::StrCat(at, ": element ", i, " overruns the page"));
    }
    const std::string_view key = bytes.substr(start, ksize);
    if (i > 0 && !(prev < key)) {
      return absl::DataLossError(absl::StrCat(at, ": keys out of order at element ", i));
    }
    if (key < lo || (hi != nullptr && !(key < *hi))) {
      return absl::DataLossError(absl::StrCat(
          at, ": element ", i, "'s key lies outside the range its parent's branch keys give"));
    }
    prev = key;
    if (branch) {
      std::string next_key;
      const std::string* child_hi = hi;
      if (i + 1 < count) {
        const char* ne = e + kElementSize;
        const uint64_t ns = off + kElementSize + uint64_t{Load<uint32_t>(ne)};
        const uint32_t nk = Load<uint32_t>(ne + 4);
        if (ns + nk > bytes.size()) {
          return absl::DataLossError(absl::StrCat(at, ": element ", i + 1, " overruns the page"));
        }
        next_key.assign(bytes.data() + ns, nk);
        child_hi = &next_key;
      }
      if (absl::Status s =
              CheckPage(Load<uint64_t>(e + 8), std::string(key), child_hi, depth + 1, bucket, st);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if ((Load<uint32_t>(e) & kBucketLeafFlag) == 0) continue;
    // A nested bucket: its header, then its own tree (or its inline page).
    if (vsize < kBucketHeader) {
      return absl::DataLossError(
          absl::StrCat(at, ": bucket ", std::string(key), "'s value is shorter than its header"));
    }
    if (++st.buckets > 1000000 || depth > kMaxDepth) {
      return absl::DataLossError(at + ": buckets nested deeper than bbolt makes");
    }
    const std::string name =
        bucket == "(root)" ? std::string(key) : absl::StrCat(bucket, "/", std::string(key));
    const char* value = bytes.data() + start + ksize;
    const uint64_t root = Load<uint64_t>(value);
    absl::Status s = root == 0
                         ? CheckNode(std::string_view(value + kBucketHeader, vsize - kBucketHeader),
                                     absl::StrCat(at, ": inline bucket ", name), "", nullptr,
                                     depth + 1, name, st)
                         : CheckPage(root, "", nullptr, depth + 1, name, st);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BoltFile::ForEach(const std::string& bucket, const Visitor& fn) {
  auto v = BucketValue(bucket);
  if (!v.ok()) return v.status();
  auto h = ParseBucket(*v, bucket);
  if (!h.ok()) return h.status();
  if (h->root != 0) return WalkPages(h->root, 0, fn);
  return WalkNode(std::string_view(*v).substr(kBucketHeader), 0,
                  absl::StrCat(path_, " inline bucket ", bucket), fn);
}

absl::StatusOr<std::vector<std::string>> BoltFile::Buckets() const {
  std::vector<std::string> out;
  absl::Status s = WalkPages(
      root_, 0, [&](std::string_view key, std::string_view, uint32_t) { out.emplace_back(key); });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> BoltFile::ReadBucket(const std::string& bucket) {
  auto v = BucketValue(bucket);
  if (!v.ok()) return v.status();
  auto h = ParseBucket(*v, bucket);
  if (!h.ok()) return h.status();
  std::map<std::string, std::string> out;
  if (h->root != 0) {
    if (absl::Status s = CollectLeaves(h->root, &out, 0); !s.ok()) return s;
    return out;
  }
  auto n = DecodeNode(v->data() + kBucketHeader, v->size() - kBucketHeader,
                      absl::StrCat(path_, " inline bucket ", bucket));
  if (!n.ok()) return n.status();
  if (!n->leaf) return absl::DataLossError(path_ + ": an inline bucket that is not a leaf");
  for (auto& e : n->elems) {
    if (e.flags & kBucketLeafFlag) {
      return absl::FailedPreconditionError(path_ + ": a nested bucket where none is expected");
    }
    out[e.key] = std::move(e.value);
  }
  return out;
}

absl::StatusOr<std::string> BoltFile::LastKey(const std::string& bucket) {
  auto v = BucketValue(bucket);
  if (!v.ok()) return v.status();
  auto h = ParseBucket(*v, bucket);
  if (!h.ok()) return h.status();
  if (h->root == 0) {
    auto n = DecodeNode(v->data() + kBucketHeader, v->size() - kBucketHeader,
                        absl::StrCat(path_, " inline bucket ", bucket));
    if (!n.ok()) return n.status();
    return n->elems.empty() ? std::string() : n->elems.back().key;
  }
  uint64_t pgid = h->root;
  for (int depth = 0; depth <= kMaxDepth; ++depth) {
    auto n = LoadNode(pgid);
    if (!n.ok()) return n.status();
    if (n->elems.empty()) {
      // Only a bucket's root may be empty; an empty page below it would hide the newest key.
      if (n->leaf && depth == 0) return std::string();
      return absl::DataLossError(path_ + ": an empty page below a bucket's root");
    }
    if (n->leaf) return n->elems.back().key;
    pgid = n->elems.back().pgid;
  }
  return absl::DataLossError(path_ + ": tree deeper than expected");
}

absl::Status BoltFile::CanStage() const {
  // The new meta takes a txid above the one in use (and of the other slot's parity): one that
  // would wrap leaves the old meta the newer, and the edit would be lost without an error.
  if (txid_ > std::numeric_limits<uint64_t>::max() - 2) {
    return absl::DataLossError(absl::StrCat(path_, ": corrupt: the meta page's txid ", txid_,
                                            " leaves no room for another transaction"));
  }
  return absl::OkStatus();
}

absl::Status BoltFile::Put(const std::string& bucket, const std::string& key,
                           const std::string& value) {
  if (absl::Status s = CanStage(); !s.ok()) return s;
  auto v = BucketValue(bucket);
  if (!v.ok()) return v.status();
  auto h = ParseBucket(*v, bucket);
  if (!h.ok()) return h.status();
  if (h->root == 0) {  // inline: rewritten whole
    auto contents = ReadBucket(bucket);
    if (!contents.ok()) return contents.status();
    (*contents)[key] = value;
    return ReplaceBucket(bucket, *contents);
  }
  auto root = PutInTree(h->root, key, value, 0, 0);
  if (!root.ok()) return root.status();
  std::string nv(kBucketHeader, '\0');
  Store<uint64_t>(nv.data(), *root);
  Store<uint64_t>(nv.data() + 8, h->sequence);
  return SetBucketValue(bucket, nv);
}

absl::Status BoltFile::ReplaceBucket(const std::string& bucket,
                                     const std::map<std::string, std::string>& contents) {
  if (absl::Status s = CanStage(); !s.ok()) return s;
  auto v = BucketValue(bucket);
  if (!v.ok()) return v.status();
  auto h = ParseBucket(*v, bucket);
  if (!h.ok()) return h.status();
  // What it held before must be plain keys (its old pages are left unused, see bolt.h).
  if (auto old = ReadBucket(bucket); !old.ok()) return old.status();
  Node n;
  n.leaf = true;
  for (const auto& [k, val] : contents) {
    Node::Elem e;
    e.key = k;
    e.value = val;
    n.elems.push_back(std::move(e));
  }
  std::string nv;
  // bbolt keeps a bucket inline in its parent while it fits a quarter page.
  if (n.Size() <= page_size_ / 4) {
    nv.assign(kBucketHeader + n.Size(), '\0');
    Store<uint64_t>(nv.data(), 0);
    Store<uint64_t>(nv.data() + 8, h->sequence);
    EncodeInto(n, 0, 0, nv.data() + kBucketHeader);
  } else {
    auto pgid = WriteNode(n);
    if (!pgid.ok()) return pgid.status();
    nv.assign(kBucketHeader, '\0');
    Store<uint64_t>(nv.data(), *pgid);
    Store<uint64_t>(nv.data() + 8, h->sequence);
  }
  return SetBucketValue(bucket, nv);
}

absl::Status BoltFile::Commit() {
  if (!writable_) return absl::FailedPreconditionError(path_ + " was opened read-only");
  for (const auto& [pgid, bytes] : pending_) {
    if (absl::Status s = PwriteAll(fd_, bytes.data(), bytes.size(), pgid * page_size_, path_);
        !s.ok()) {
      return s;
    }
  }
  const uint64_t end = next_pgid_ * page_size_;
  // etcd's snapshot stream ends with a sha256 past the last page; bbolt wants whole pages.
  if (file_size_ % page_size_ != 0 && file_size_ > end) {
    if (::ftruncate(fd_, static_cast<off_t>(end)) != 0)
      return ErrnoStatus(errno, "truncating " + path_);
  }
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "syncing " + path_);
  // The new meta goes to the page that does not hold the current one (bbolt picks the valid
  // meta with the higher txid; the page a meta lives on is txid % 2 by convention only): the
  // current meta page is never overwritten, so a torn write leaves the file as it was.
  uint64_t txid = txid_ + 1;
  if (txid % 2 == meta_slot_) ++txid;
  std::string page(page_size_, '\0');
  Store<uint64_t>(page.data(), txid % 2);
  Store<uint16_t>(page.data() + 8, kMetaPage);
  char* m = page.data() + kPageHeader;
  Store<uint32_t>(m, kMagic);
  Store<uint32_t>(m + 4, kVersion);
  Store<uint32_t>(m + 8, page_size_);
  Store<uint32_t>(m + 12, meta_flags_);
  Store<uint64_t>(m + 16, root_);
  Store<uint64_t>(m + 24, root_sequence_);
  // No freelist on disk (as etcd itself runs bbolt on Linux, NoFreelistSync): whoever opens the
  // file next finds the free pages by walking the tree, so the pages only the old tree used are
  // free again and none in use can be.
  Store<uint64_t>(m + 32, kNoFreelist);
  Store<uint64_t>(m + 40, next_pgid_);
  Store<uint64_t>(m + 48, txid);
  Store<uint64_t>(m + kMetaChecksumOffset, Fnv1a64(m, kMetaChecksumOffset));
  if (absl::Status s = PwriteAll(fd_, page.data(), page.size(), (txid % 2) * page_size_,
                                 "the meta page of " + path_);
      !s.ok()) {
    return s;
  }
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "syncing " + path_);
  txid_ = txid;
  meta_slot_ = txid % 2;
  high_water_ = next_pgid_;
  file_size_ = std::max(file_size_, end);
  pending_.clear();
  return absl::OkStatus();
}

std::string RevisionKey(int64_t main, int64_t sub) {
  std::string k(17, '\0');
  for (int i = 0; i < 8; ++i) {
    k[i] = static_cast<char>(static_cast<uint64_t>(main) >> (56 - 8 * i));
    k[9 + i] = static_cast<char>(static_cast<uint64_t>(sub) >> (56 - 8 * i));
  }
  k[8] = '_';
  return k;
}

std::optional<int64_t> MainRevision(const std::string& key) {
  if ((key.size() != 17 && key.size() != 18) || key[8] != '_') return std::nullopt;
  if (key.size() == 18 && key[17] != 't') return std::nullopt;
  uint64_t main = 0;
  for (int i = 0; i < 8; ++i) main = (main << 8) | static_cast<uint8_t>(key[i]);
  return static_cast<int64_t>(main);
}

}  // namespace steward
