// Gives back the memory an idle agent holds but does not use.
//
// Most of a freshly started agent's resident memory is library code and read-only data touched
// once while starting (dynamic linking, gRPC's and OpenSSL's initialisation): about 26 of its
// 32 MiB. The idle loops touch a few MiB of it. ReleaseIdleMemory unmaps the clean read-only file
// pages (madvise MADV_DONTNEED on private read-only file mappings that hold no private copy of
// any page) and returns free heap to the system (malloc_trim). The pages stay in the page cache,
// shared with every other process that maps them, and are mapped again on first use: what the
// kernel would do to them under memory pressure anyway, only sooner. Afterwards the resident
// set counts what the agent actually uses.
#pragma once

#include <cstdint>
#include <string>

namespace steward {

struct MemoryRelease {
  uint64_t mappings = 0;       // read-only file mappings released
  uint64_t file_bytes = 0;     // their resident bytes before
  uint64_t rss_before = 0;     // VmRSS before and after, bytes
  uint64_t rss_after = 0;
};

// Safe to call from any thread at any time. Never touches a writable mapping or one with a
// private (copy-on-write) page: those would lose their contents.
MemoryRelease ReleaseIdleMemory();

// "released 41 read-only mappings (24.1 MiB resident); RSS 32.0 -> 9.8 MiB" (for the log).
std::string Describe(const MemoryRelease& r);

}  // namespace steward
