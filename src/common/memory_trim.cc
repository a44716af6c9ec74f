#include "common/memory_trim.h"

#include <malloc.h>
#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace steward {
namespace {

struct Mapping {
  uintptr_t start = 0, end = 0;
  bool candidate = false;  // private, read-only, backed by a file
  uint64_t rss_kib = 0, anonymous_kib = 0;
};

// /proc/self/smaps: a header line per mapping ("start-end perms offset dev inode path"), then
// "Key: value kB" lines.
std::vector<Mapping> ReadMappings() {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::vector<Mapping> out;
  std::ifstream in("/proc/self/smaps");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    const size_t space = line.find(' ');
    // A header's first field is the address range: its first space comes before any colon
    // (the device field "fd:01" comes later).
    if (space != std::string::npos && (colon == std::string::npos || space < colon)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      Mapping m;
      std::vector<std::string> range = absl::StrSplit(f[0], '-');
      if (range.size() != 2 || f.size() < 2 ||
          !absl::SimpleHexAtoi(range[0], &m.start) || !absl::SimpleHexAtoi(range[1], &m.end)) {
        continue;
      }
      const std::string& perms = f[1];
      // Only the program and its shared libraries: they stay mapped for the process's life
      // (nothing here unloads a library), so a range read here is still the same mapping when
      // madvise runs. Other files may be unmapped and the range reused meanwhile.
      m.candidate = f.size() >= 6 && (f[5] == exe || f[5].find(".so") != std::string::npos) &&
                    perms.size() == 4 && perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p';
      out.push_back(m);
      continue;
    }
    if (out.empty()) continue;
    uint64_t kib = 0;
    std::vector<std::string> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (kv.size() < 2 || !absl::SimpleAtoi(kv[1], &kib)) continue;
    if (kv[0] == "Rss:") out.back().rss_kib = kib;
    if (kv[0] == "Anonymous:") out.back().anonymous_kib = kib;
  }
  return out;
}

uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t kib = 0;
    if (f.size() >= 2 && absl::SimpleAtoi(f[1], &kib)) return kib * 1024;
  }
  return 0;
}

}  // namespace

MemoryRelease ReleaseIdleMemory() {
  MemoryRelease r;
  r.rss_before = RssBytes();
  for (const Mapping& m : ReadMappings()) {
    // A page with a private copy (relocated read-only data, a debugger's breakpoint) would be
    // dropped and read back from the file: leave such a mapping alone.
    if (!m.candidate || m.rss_kib == 0 || m.anonymous_kib != 0) continue;
    if (::madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED) == 0) {
      ++r.mappings;
      r.file_bytes += m.rss_kib * 1024;
    }
  }
  ::malloc_trim(0);
  r.rss_after = RssBytes();
  return r;
}

std::string Describe(const MemoryRelease& r) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return absl::StrFormat("released %d read-only mappings (%.1f MiB resident); RSS %.1f -> %.1f MiB",
                         r.mappings, r.file_bytes / kMiB, r.rss_before / kMiB,
                         r.rss_after / kMiB);
}

}  // namespace steward
