// Small bbolt files built byte by byte for unit tests of the code that reads and edits them
// (backup/snapshot_file.h, etcd/bolt.h): the page header (id, flags, count, overflow), leaf
// elements (flags, pos relative to the element, ksize, vsize), inline buckets after a 16-byte
// header, meta pages checked by FNV-1a.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace steward::bolt_builder {

inline constexpr uint32_t kPage = 4096;

struct Kv {
  std::string key, value;
  uint32_t flags = 0;  // 1: a bucket
};

template <typename T>
void Put(std::string& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// A leaf page (or an inline bucket's page) holding `kvs`, `size` bytes (0: as small as it fits).
inline std::string Leaf(const std::vector<Kv>& kvs, size_t size) {
  size_t need = 16 + 16 * kvs.size();
  for (const auto& kv : kvs) need += kv.key.size() + kv.value.size();
  std::string p(size == 0 ? need : size, '\0');
  Put<uint16_t>(p, 8, 0x02);
  Put<uint16_t>(p, 10, static_cast<uint16_t>(kvs.size()));
  size_t data = 16 + 16 * kvs.size();
  for (size_t i = 0; i < kvs.size(); ++i) {
    const size_t e = 16 + 16 * i;
    Put<uint32_t>(p, e, kvs[i].flags);
    Put<uint32_t>(p, e + 4, static_cast<uint32_t>(data - e));
    Put<uint32_t>(p, e + 8, static_cast<uint32_t>(kvs[i].key.size()));
    Put<uint32_t>(p, e + 12, static_cast<uint32_t>(kvs[i].value.size()));
    std::memcpy(p.data() + data, kvs[i].key.data(), kvs[i].key.size());
    data += kvs[i].key.size();
    std::memcpy(p.data() + data, kvs[i].value.data(), kvs[i].value.size());
    data += kvs[i].value.size();
  }
  return p;
}

// An inline bucket's value: the bucket header (root 0, sequence 0), then its page.
inline std::string InlineBucket(const std::vector<Kv>& kvs) {
  return std::string(16, '\0') + Leaf(kvs, 0);
}

inline std::string Rev(uint64_t main) {
  std::string k(17, '_');
  for (int i = 0; i < 8; ++i) k[static_cast<size_t>(i)] = static_cast<char>(main >> (56 - 8 * i));
  for (int i = 9; i < 17; ++i) k[static_cast<size_t>(i)] = 0;
  return k;
}

inline std::string Be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

inline uint64_t Fnv(const char* d, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(d[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// Meta page `i` of `file` (already sized), pointing at `root` with `pages` pages in use.
// `page`: the page size (64 KiB on arm64 and ppc64le hosts).
inline void Meta(std::string& file, int i, uint64_t root, uint64_t pages, uint64_t txid,
                 uint64_t freelist = 2, uint32_t page = kPage) {
  const size_t m = static_cast<size_t>(i) * page + 16;
  Put<uint16_t>(file, static_cast<size_t>(i) * page + 8, 0x04);
  Put<uint32_t>(file, m, 0xED0CDAED);
  Put<uint32_t>(file, m + 4, 2);
  Put<uint32_t>(file, m + 8, page);
  Put<uint64_t>(file, m + 16, root);
  Put<uint64_t>(file, m + 32, freelist);
  Put<uint64_t>(file, m + 40, pages);
  Put<uint64_t>(file, m + 48, txid);
  Put<uint64_t>(file, m + 56, Fnv(file.data() + m, 56));
}

}  // namespace steward::bolt_builder
