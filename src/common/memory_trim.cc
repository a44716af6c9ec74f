#include "common/memory_trim.h"

#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace steward {
namespace {

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

// Does the object's dynamic section ask for text relocations (code written at load time)?
bool HasTextRelocations(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_DYNAMIC) continue;
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_TEXTREL) return true;
      if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL) != 0) return true;
    }
  }
  return false;
}

struct Walk {
  uintptr_t page = 4096;
  uintptr_t vdso = 0;
  MemoryRelease* out = nullptr;
};

// Called by dl_iterate_phdr for every loaded object (the program, each library), with the
// dynamic loader's lock held: no library is loaded or unloaded while it runs, so the segments
// it releases are exactly the ones it reads.
int ReleaseObject(dl_phdr_info* info, size_t, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  if (walk->vdso != 0 && info->dlpi_addr == walk->vdso) return 0;  // the kernel's, not a file
  if (HasTextRelocations(info)) return 0;
  // Read-only after relocation (GOT, vtables): written once at load time, so its pages are
  // private copies that differ from the file.
  uintptr_t relro_start = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_GNU_RELRO) {
      relro_start = info->dlpi_addr + ph.p_vaddr;
      relro_end = relro_start + ph.p_memsz;
    }
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    // Only segments never written: loaded from the file, not writable (code, constants).
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0 || ph.p_filesz == 0) continue;
    const uintptr_t seg_start = info->dlpi_addr + ph.p_vaddr;
    const uintptr_t seg_end = seg_start + ph.p_filesz;
    if (relro_end > relro_start && seg_start < relro_end && relro_start < seg_end) continue;
    // Whole pages inside the segment only: a page shared with a neighbour is left alone.
    const uintptr_t start = (seg_start + walk->page - 1) & ~(walk->page - 1);
    const uintptr_t end = seg_end & ~(walk->page - 1);
    if (end <= start) continue;
    if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0) {
      ++walk->out->segments;
    }
  }
  return 0;
}

}  // namespace

MemoryRelease ReleaseIdleMemory() {
  MemoryRelease r;
  r.rss_before = RssBytes();
  Walk walk;
  walk.page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  walk.vdso = static_cast<uintptr_t>(::getauxval(AT_SYSINFO_EHDR));
  walk.out = &r;
  ::dl_iterate_phdr(ReleaseObject, &walk);
  ::malloc_trim(0);
  r.rss_after = RssBytes();
  return r;
}

std::string Describe(const MemoryRelease& r) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return absl::StrFormat("released %d read-only segments; RSS %.1f -> %.1f MiB", r.segments,
                         r.rss_before / kMiB, r.rss_after / kMiB);
}

}  // namespace steward
