#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

#include "agent/agent.h"

namespace {

// Runs the agent with every library's symbols bound at start (LD_BIND_NOW), by executing
// itself once more with it set. Bound lazily, each function first called after the agent
// released its start-up pages (common/memory_trim.h) sent the dynamic linker through the
// symbol tables of many libraries again, each read faulting in 64 KiB: on the steward leader
// ~0.3 MiB of its idle resident memory (bench/idle). Binding everything at start costs no
// measurable time (13-15 ms for `steward --help` either way).
void BindNow(char** argv) {
  constexpr const char* kMarker = "STEWARD_BIND_NOW";
  if (std::getenv(kMarker) != nullptr) {
    // The second run: the loader has read LD_BIND_NOW; etcd and the tools started from here
    // get the environment the operator gave.
    unsetenv(kMarker);
    unsetenv("LD_BIND_NOW");
    return;
  }
  if (const char* v = std::getenv("LD_BIND_NOW"); v != nullptr && *v != '\0') return;
  setenv("LD_BIND_NOW", "1", 1);
  setenv(kMarker, "1", 1);
  execv("/proc/self/exe", argv);
  // Not possible here (no /proc): run bound lazily.
  unsetenv(kMarker);
  unsetenv("LD_BIND_NOW");
}

}  // namespace

int main(int argc, char** argv) {
  BindNow(argv);
  // One malloc arena, not one per thread (glibc's default, up to 8 per core): an idle agent's
  // dozen threads each kept an arena of mostly free pages, ~2 MiB of its resident memory
  // (bench/idle). Its threads allocate little and seldom at once, so sharing costs nothing
  // measurable (bench/backup). Set before any thread starts.
  mallopt(M_ARENA_MAX, 1);
  return steward::AgentMain(argc, argv);
}
