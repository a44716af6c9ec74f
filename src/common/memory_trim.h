// Gives back the memory an idle agent holds but does not use.
//
// Most of a freshly started agent's resident memory is library code and read-only data touched
// once while starting (dynamic linking, gRPC's and OpenSSL's initialisation): about 26 of its
// 32 MiB. The idle loops touch a few MiB of it. ReleaseIdleMemory unmaps the pages of the
// program's and its libraries' segments that are never written (madvise MADV_DONTNEED on their
// read-only PT_LOAD segments, found with dl_iterate_phdr; relocated read-only data and objects
// with text relocations are left alone) and returns free heap to the system (malloc_trim). The
// pages stay in the page cache, shared with every other process that maps them, and are mapped
// again on first use: what the kernel would do to them under memory pressure anyway, only sooner.
// Afterwards the resident set counts what the agent actually uses.
#pragma once

#include <cstdint>
#include <string>

namespace steward {

struct MemoryRelease {
  uint64_t segments = 0;    // read-only segments released
  uint64_t rss_before = 0;  // VmRSS before and after, bytes
  uint64_t rss_after = 0;
};

// Safe to call from any thread: it walks the loaded objects under the dynamic loader's lock
// (no library comes or goes meanwhile) and never touches a page that was ever written, whose
// contents would otherwise be lost.
MemoryRelease ReleaseIdleMemory();

// "released 120 read-only segments; RSS 26.7 -> 7.6 MiB" (for the log).
std::string Describe(const MemoryRelease& r);

}  // namespace steward
