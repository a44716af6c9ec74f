// Size-capped rotation of a log file that another process keeps appending to: etcd's
// <data_dir>/etcd.log, which would otherwise grow until the disk is full.
//
// Why copy-then-truncate. etcd writes its stdout and stderr straight into the file, through a
// descriptor the runner opened O_APPEND before fork, and etcd outlives its agent (a crash, an
// upgrade or a restart of the agent adopts the running etcd). So nothing may stand between
// etcd and the file, and etcd cannot be told to reopen it:
//   - a pipe read by the agent breaks when the agent goes: etcd's next write gets EPIPE, and a
//     Go program writing to fd 1 or 2 then dies of SIGPIPE. The next agent could not take the
//     pipe over either;
//   - rename-and-reopen (logrotate's default) needs the writer to reopen the file: etcd keeps
//     writing to the renamed one;
//   - etcd's own --log-outputs=<file> does not rotate.
// Here the file keeps its inode: its content is copied to <path>.1 and the file is truncated
// in place. etcd's descriptor is O_APPEND, so its next write lands at the new end (offset 0),
// never after a hole.
//
// What that costs: the lines etcd writes between the copy's last read and the truncate are
// lost (the copy first catches up with what was appended while it ran, so this window is a
// few system calls long). Copies are not fsynced: after a power loss the newest may be short.
//
// Bounds, with the runner checking every 30 s: the live file passes max_bytes by at most what
// etcd writes between two checks; a copy holds the whole file, or, when the file grew past
// twice the cap between checks (the agent was stopped for long), its last max_bytes from a
// line start, with a first line saying how much was dropped. So the files take at most
// (2 × keep + 1) × max_bytes, and about (keep + 1) × max_bytes in practice.
//
// Thread-safety: no state; two calls on the same path at once are not supported (the runner's
// supervisor thread is the only caller).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace steward {

struct LogRotation {
  uint64_t max_bytes = 64ULL << 20;  // rotate once the file is larger; 0: never rotate
  int keep = 3;  // copies kept: <path>.1 (newest) to <path>.<keep>; 0: only truncate
};

// If `path` is larger than rotation.max_bytes: <path>.<i> becomes <path>.<i+1> (the oldest is
// replaced, copies past `keep` are removed), the content goes to <path>.1 (through a dot-file
// renamed into place), then `path` is truncated in place and one line saying so is appended.
// `path` itself is never removed or replaced: its writer keeps its descriptor.
//
// Returns false when `path` is missing or within the cap (one stat, nothing written), true
// when it rotated. Errors: when the copy cannot be kept (a full disk), `path` is truncated
// all the same (the cap wins over the content) and the error, from ErrnoStatus, says so and
// keeps its code (ResourceExhausted for a full disk); when `path` cannot be opened or
// truncated, its content is as it was; when only the note after the truncate cannot be written,
// the error says the file was rotated.
absl::StatusOr<bool> RotateLogIfOver(const std::string& path, const LogRotation& rotation);

// A byte count as written in the config: digits, then optionally a unit: B, KiB, MiB, GiB
// (powers of 1024; Ki, Mi, Gi too) or KB, MB, GB (powers of 1000). "64MiB" -> 67108864.
// InvalidArgument naming the problem (no digits, an unknown unit, too large).
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// The shortest exact form: 67108864 -> "64MiB", 1500 -> "1500B".
std::string FormatByteSize(uint64_t bytes);

}  // namespace steward
