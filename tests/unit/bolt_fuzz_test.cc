// Mutated bbolt files go to the reader (etcd/bolt.h) and to the in-place restore's edit
// (etcd/restore_in_place.h), built with AddressSanitizer and UBSan (the bolt_fuzz target).
// The seeds are real etcd 3.4 and 3.5 snapshots (testdata/README.md); the mutations are what
// a rotting disk or a bad copy makes of a file: bit flips, truncations, swapped, repeated and
// zeroed pages, garbage runs, page headers with extreme values, and meta pages rewritten with a
// valid checksum. For each mutated file:
//   - reading, the full walk and the edit return an error or succeed; none crashes or hangs;
//   - a file the full walk accepts can be read bucket by bucket;
//   - an edit that is refused leaves the file byte for byte as it was (the node's data is only
//     set aside after the edit goes through), and a check-only pass that accepts a file
//     promises that the real edit goes through;
//   - an edit that goes through yields a DB the full walk accepts, with every key it had plus
//     the bumped revision, grown by a bounded number of pages; nothing outside the member
//     directory is written.
// STEWARD_BOLT_FUZZ_ITERATIONS (per seed, default 1000) and STEWARD_BOLT_FUZZ_SEED (default 1)
// run more or other cases; a failure names the seed and the iteration and keeps the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "bolt_builder.h"
#include "common/files.h"
#include "etcd/bolt.h"
#include "etcd/restore_in_place.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kPage = 4096;  // the seeds' page size (amd64)

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

template <typename T>
void PutAt(std::string& b, size_t at, T v) {
  if (at + sizeof(T) <= b.size()) std::memcpy(b.data() + at, &v, sizeof(T));
}

// Rewrites meta page `meta_page`'s checksum (bbolt's FNV-1a over its first 56 bytes) after a
// field was changed, so the mutated meta is read as valid rather than passed over.
void ResealMeta(std::string& file, size_t meta_page) {
  const size_t m = meta_page * kPage + 16;
  if (m + 64 > file.size()) return;
  PutAt<uint64_t>(file, m + 56, bolt_builder::Fnv(file.data() + m, 56));
}

// One mutation of `file`, described in `what` for the failure message.
void Mutate(std::string& file, std::mt19937_64& rng, std::string& what) {
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const size_t pages = file.size() / kPage;
  switch (below(8)) {
    case 0: {  // bit flips, half of them in page and element headers
      const int n = 1 + static_cast<int>(below(16));
      for (int i = 0; i < n; ++i) {
        size_t at = below(file.size());
        if (rng() % 2 == 0 && pages > 0) at = below(pages) * kPage + below(64);
        if (at < file.size()) file[at] = static_cast<char>(file[at] ^ (1 << below(8)));
      }
      what += " flip" + std::to_string(n);
      break;
    }
    case 1: {
      const size_t to = below(file.size());
      file.resize(rng() % 2 == 0 ? to : to / kPage * kPage);
      what += " truncate@" + std::to_string(file.size());
      break;
    }
    case 2: {
      if (pages < 2) break;
      const size_t a = below(pages), b = below(pages);
      std::string pa = file.substr(a * kPage, kPage);
      file.replace(a * kPage, kPage, file.substr(b * kPage, kPage));
      file.replace(b * kPage, kPage, pa);
      what += " swap" + std::to_string(a) + "," + std::to_string(b);
      break;
    }
    case 3: {
      if (pages < 2) break;
      const size_t a = below(pages), b = below(pages);
      file.replace(b * kPage, kPage, file.substr(a * kPage, kPage));
      what += " repeat" + std::to_string(a) + "->" + std::to_string(b);
      break;
    }
    case 4: {
      if (pages < 1) break;
      const size_t a = below(pages);
      file.replace(a * kPage, kPage, std::string(kPage, '\0'));
      what += " zero" + std::to_string(a);
      break;
    }
    case 5: {
      const size_t at = below(file.size()), n = 1 + below(64);
      for (size_t i = at; i < std::min(file.size(), at + n); ++i)
        file[i] = static_cast<char>(rng());
      what += " garbage@" + std::to_string(at);
      break;
    }
    case 6: {  // a page header field at an extreme: count, overflow or id
      if (pages < 3) break;
      const size_t p = 2 + below(pages - 2);
      const uint64_t extremes[] = {0, 1, 0xffff, 0xffffffff, ~uint64_t{0}, pages, pages + 1};
      const uint64_t v = extremes[below(7)];
      switch (below(3)) {
        case 0:
          PutAt<uint16_t>(file, p * kPage + 10, static_cast<uint16_t>(v));
          break;
        case 1:
          PutAt<uint32_t>(file, p * kPage + 12, static_cast<uint32_t>(v));
          break;
        default:
          PutAt<uint64_t>(file, p * kPage, v);
          break;
      }
      what += " header" + std::to_string(p);
      break;
    }
    default: {  // a meta field rewritten with a valid checksum: root, high water, txid, page size
      if (pages < 2) break;
      const size_t meta = below(2), m = meta * kPage + 16;
      const uint64_t values[] = {0, 1, 2, 3, pages - 1, pages, pages + 7, 0xffffffff, ~uint64_t{0}};
      const uint64_t v = values[below(9)];
      switch (below(4)) {
        case 0:
          PutAt<uint64_t>(file, m + 16, v);
          break;  // root
        case 1:
          PutAt<uint64_t>(file, m + 40, v);
          break;  // pgid
        case 2:
          PutAt<uint64_t>(file, m + 48, v);
          break;  // txid
        default:
          PutAt<uint32_t>(file, m + 8, static_cast<uint32_t>(v * 512));
          break;  // page size
      }
      ResealMeta(file, meta);
      what += " meta" + std::to_string(meta);
      break;
    }
  }
}

class BoltFuzzTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    // tmpfs where there is one: the edit fsyncs, and a disk would make the iterations slow.
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir_ = base / ("steward-bolt-fuzz-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

// Every file under `root`, relative to it.
std::set<std::string> Files(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
  }
  return out;
}

// Keys of bucket "key" by the reader, or -1 when the file cannot be read that far.
int64_t KeyCount(const std::string& path) {
  auto f = BoltFile::Open(path, false);
  if (!f.ok()) return -1;
  int64_t n = 0;
  if (!(*f)->ForEach("key", [&](std::string_view, std::string_view, uint32_t) { ++n; }).ok()) {
    return -1;
  }
  return n;
}

TEST_P(BoltFuzzTest, MutatedFilesAreRefusedOrYieldADbTheFullWalkAccepts) {
  auto seed_file = ReadFile(std::string(TESTDATA_DIR) + "/" + GetParam());
  ASSERT_TRUE(seed_file.ok()) << seed_file.status();
  const uint64_t iterations = EnvOr("STEWARD_BOLT_FUZZ_ITERATIONS", 1000);
  const uint64_t seed = EnvOr("STEWARD_BOLT_FUZZ_SEED", 1);
  std::mt19937_64 rng(seed);
  int refused = 0, restored = 0;
  for (uint64_t it = 0; it < iterations; ++it) {
    std::string file = *seed_file;
    std::string what;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n && !file.empty(); ++i) Mutate(file, rng, what);
    const std::string where =
        "seed " + std::to_string(seed) + " iteration " + std::to_string(it) + ":" + what;
    const fs::path data = dir_ / "data", member = data / "member";
    fs::remove_all(data);
    fs::create_directories(member / "snap");
    const std::string db = (member / "snap" / "db").string();
    std::ofstream(db, std::ios::binary) << file;
    std::ofstream(dir_ / "canary") << "outside";
    const auto started = std::chrono::steady_clock::now();

    // The reader and the full walk.
    bool walk_ok = false;
    if (auto f = BoltFile::Open(db, false); f.ok()) {
      walk_ok = (*f)->CheckAll().ok();
      if (walk_ok) {
        for (const char* bucket : {"key", "meta", "members", "members_removed", "lease"}) {
          absl::Status s =
              (*f)->ForEach(bucket, [](std::string_view, std::string_view, uint32_t) {});
          ASSERT_TRUE(s.ok() || absl::IsNotFound(s))
              << where << ": the walk took the file but " << bucket << " cannot be read: " << s;
        }
      } else {
        (void)(*f)->ReadBucket("members");
        (void)(*f)->LastKey("key");
      }
    }
    const int64_t keys = walk_ok ? KeyCount(db) : -1;

    // The edit: a check first, then the real one.
    InPlaceRestore r;
    r.data_dir = data.string();
    r.name = "n1";
    r.peer_url = "https://127.0.0.1:2380";
    r.token = "fuzz";
    r.initial_cluster = {{"n1", "https://127.0.0.1:2380"}, {"n2", "https://127.0.0.2:2380"}};
    r.bump_revision = 1000;
    r.check_only = true;
    const bool check_ok = RestoreInPlace(r).ok();
    ASSERT_EQ(*ReadFile(db), file) << where << ": a check wrote to the DB";
    r.check_only = false;
    bool changed = false;
    absl::Status s = RestoreInPlace(r, &changed);
    ASSERT_EQ(*ReadFile(dir_ / "canary"), "outside") << where;
    if (!s.ok()) {
      ++refused;
      ASSERT_FALSE(check_ok) << where << ": the check took the file, the edit refused it: " << s;
      ASSERT_FALSE(changed) << where << ": " << s;
      ASSERT_EQ(*ReadFile(db), file) << where << ": a refused edit changed the DB: " << s;
    } else {
      ++restored;
      ASSERT_TRUE(walk_ok) << where << ": the edit took a file the full walk refuses";
      ASSERT_TRUE(check_ok) << where << ": the edit took a file the check refused";
      auto f = BoltFile::Open(db, false);
      ASSERT_TRUE(f.ok()) << where << ": " << f.status();
      absl::Status walk = (*f)->CheckAll();
      ASSERT_TRUE(walk.ok()) << where << ": the edited DB: " << walk;
      EXPECT_EQ(KeyCount(db), keys + 1) << where << ": every key and the bumped revision";
      ASSERT_LE(fs::file_size(db), file.size() + 64 * kPage) << where;
      for (const std::string& f : Files(member)) {
        const bool expected = f == "snap/db" ||
                              (f.rfind("snap/", 0) == 0 && f.ends_with(".snap")) ||
                              (f.rfind("wal/", 0) == 0 && f.ends_with(".wal"));
        ASSERT_TRUE(expected) << where << ": the edit wrote " << f;
      }
    }
    const auto took = std::chrono::steady_clock::now() - started;
    ASSERT_LT(took, std::chrono::seconds(10)) << where << ": as good as a hang";
  }
  // The mutations reach both outcomes (a fuzz that only ever refuses tests little).
  EXPECT_GT(refused, 0);
  EXPECT_GT(restored, 0);
  std::printf("%s: %d refused, %d restored\n", GetParam(), refused, restored);
}

INSTANTIATE_TEST_SUITE_P(Seeds, BoltFuzzTest,
                         ::testing::Values("etcd34-snapshot.db", "etcd35-snapshot.db"),
                         [](const auto& info) { return std::string(info.param).substr(0, 6); });

}  // namespace
}  // namespace steward
