#include <malloc.h>

#include "agent/agent.h"

int main(int argc, char** argv) {
  // One malloc arena, not one per thread (glibc's default, up to 8 per core): an idle agent's
  // dozen threads each kept an arena of mostly free pages, ~2 MiB of its resident memory
  // (bench/idle). Its threads allocate little and seldom at once, so sharing costs nothing
  // measurable (bench/backup). Set before any thread starts.
  mallopt(M_ARENA_MAX, 1);
  return steward::AgentMain(argc, argv);
}
