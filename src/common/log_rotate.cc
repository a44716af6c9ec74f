#include "common/log_rotate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/log_format.h"
#include "common/status.h"

namespace steward {
namespace {

constexpr size_t kChunk = 64 << 10;
// Passes that copy what the writer appended while the copy ran. One is nearly always enough;
// the bound only keeps a writer faster than the disk from holding the rotation forever.
constexpr int kCatchUpPasses = 4;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Numbered(const std::string& path, int i) { return absl::StrCat(path, ".", i); }

absl::Status WriteAll(int fd, const char* p, size_t len, const std::string& what) {
  while (len > 0) {
    const ssize_t w = ::write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing " + what);
    }
    p += w;
    len -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Appends bytes [*from, to) of `in` to `out` and advances *from past what it copied (less
// than `to` if the file shrank meanwhile). With `skip_partial_line`, the bytes up to and
// including the first newline of the first chunk are not copied: the copy starts at a line.
absl::Status CopyRange(int in, uint64_t* from, uint64_t to, int out, bool skip_partial_line,
                       const std::string& in_name, const std::string& out_name) {
  std::vector<char> buf(kChunk);
  while (*from < to) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, to - *from));
    const ssize_t n = ::pread(in, buf.data(), want, static_cast<off_t>(*from));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "reading " + in_name);
    }
    if (n == 0) break;  // truncated under us
    *from += static_cast<uint64_t>(n);
    const char* p = buf.data();
    size_t len = static_cast<size_t>(n);
    if (skip_partial_line) {
      skip_partial_line = false;
      if (const void* nl = std::memchr(p, '\n', len); nl != nullptr) {
        len -= static_cast<const char*>(nl) + 1 - p;
        p = static_cast<const char*>(nl) + 1;
      }
    }
    if (absl::Status s = WriteAll(out, p, len, out_name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Removes <path>.<from>, <path>.<from+1>, … up to the first that does not exist: the copies
// beyond `keep` after keep was lowered.
void RemoveCopiesFrom(const std::string& path, int from) {
  for (int i = from; ::unlink(Numbered(path, i).c_str()) == 0; ++i) {
  }
}

// Shifts the older copies up and writes the live file's content (`fd`, `size` bytes at the
// last look) to <path>.1. The copy first goes to a dot-file, renamed into place, then catches
// up with what the writer appended since. On error the dot-file is removed.
absl::Status KeepCopy(int fd, const std::string& path, uint64_t size, const LogRotation& r) {
  RemoveCopiesFrom(path, r.keep + 1);
  for (int i = r.keep - 1; i >= 1; --i) {
    if (::rename(Numbered(path, i).c_str(), Numbered(path, i + 1).c_str()) != 0 &&
        errno != ENOENT) {
      return ErrnoStatus(errno, absl::StrCat("renaming ", Numbered(path, i)));
    }
  }
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  const std::string first = Numbered(path, 1);
  const std::string tmp =
      (p.parent_path() / absl::StrCat(".", p.filename().string(), ".1.tmp")).string();
  Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640));
  if (out.get() < 0) return ErrnoStatus(errno, "creating " + tmp);
  auto fail = [&](const absl::Status& s) {
    ::unlink(tmp.c_str());
    return s;
  };
  uint64_t from = 0;
  if (size - r.max_bytes > r.max_bytes) {  // size > 2 × max_bytes, without overflow
    from = size - r.max_bytes;
    const std::string note = absl::StrCat(
        "=== steward: ", FormatUtcTimestamp(std::chrono::system_clock::now()), ": the first ", from,
        " bytes of ", name, " were dropped (it outgrew twice its cap between checks)\n");
    if (absl::Status s = WriteAll(out.get(), note.data(), note.size(), tmp); !s.ok()) {
      return fail(s);
    }
  }
  if (absl::Status s = CopyRange(fd, &from, size, out.get(), from > 0, path, tmp); !s.ok()) {
    return fail(s);
  }
  if (::rename(tmp.c_str(), first.c_str()) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("renaming ", tmp, " to ", first)));
  }
  // The descriptor follows the renamed file: what the writer appended meanwhile goes after.
  for (int pass = 0; pass < kCatchUpPasses; ++pass) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat " + path);
    const uint64_t now = static_cast<uint64_t>(st.st_size);
    if (now <= from) break;
    if (absl::Status s = CopyRange(fd, &from, now, out.get(), false, path, first); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> RotateLogIfOver(const std::string& path, const LogRotation& r) {
  if (r.max_bytes == 0) return false;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    return ErrnoStatus(errno, "stat " + path);
  }
  if (static_cast<uint64_t>(st.st_size) <= r.max_bytes) return false;
  // O_RDWR to read the content and truncate it; O_APPEND for the line added after.
  Fd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return ErrnoStatus(errno, "opening " + path);
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= r.max_bytes) return false;

  absl::Status kept = absl::OkStatus();
  if (r.keep > 0) {
    kept = KeepCopy(fd.get(), path, size, r);
  } else {
    RemoveCopiesFrom(path, 1);
  }
  if (::ftruncate(fd.get(), 0) != 0) {
    absl::Status s = ErrnoStatus(errno, "truncating " + path);
    if (kept.ok()) return s;
    return absl::Status(s.code(),
                        absl::StrCat("keeping a copy: ", kept.message(), "; ", s.message()));
  }
  // The note names files of its own directory.
  const std::string name = std::filesystem::path(path).filename().string();
  std::string where = "; its earlier lines were dropped (no copies are kept)";
  if (r.keep > 0) {
    where = kept.ok() ? absl::StrCat("; its earlier lines are in ", name, ".1")
                      : "; its earlier lines could not all be kept (see the agent's log)";
  }
  const std::string line =
      absl::StrCat("=== steward: ", FormatUtcTimestamp(std::chrono::system_clock::now()), ": ",
                   name, " passed ", FormatByteSize(r.max_bytes), where, "\n");
  const absl::Status noted = WriteAll(fd.get(), line.data(), line.size(), path);
  if (!kept.ok()) {
    return absl::Status(kept.code(), absl::StrCat("keeping a copy: ", kept.message(), "; ", path,
                                                  " was truncated all the same"));
  }
  // The rotation is done; only its note is missing.
  if (!noted.ok()) return Annotate(noted, absl::StrCat("rotated ", path, " but its note"));
  return true;
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text_in) {
  const std::string text(text_in);
  const std::string t(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < t.size() && absl::ascii_isdigit(static_cast<unsigned char>(t[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size such as 64MiB (digits, then a unit)"));
  }
  const std::string unit = t.substr(digits);
  static const std::pair<std::string_view, uint64_t> kUnits[] = {{"", 1},
                                                                 {"B", 1},
                                                                 {"KiB", 1 << 10},
                                                                 {"Ki", 1 << 10},
                                                                 {"MiB", 1 << 20},
                                                                 {"Mi", 1 << 20},
                                                                 {"GiB", 1 << 30},
                                                                 {"Gi", 1 << 30},
                                                                 {"KB", 1000},
                                                                 {"MB", 1000 * 1000},
                                                                 {"GB", 1000 * 1000 * 1000}};
  uint64_t scale = 0;
  for (const auto& [name, value] : kUnits) {
    if (unit == name) scale = value;
  }
  if (scale == 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": unknown unit \"", unit,
                                                   "\" (B, KiB, MiB, GiB, or KB, MB, GB)"));
  }
  const absl::Status too_large =
      absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
  uint64_t n = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(t[i] - '0');
    if (n > (kMax - d) / 10) return too_large;
    n = n * 10 + d;
  }
  if (n > kMax / scale) return too_large;
  return n * scale;
}

std::string FormatByteSize(uint64_t bytes) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}};
  for (const auto& [name, value] : kUnits) {
    if (bytes != 0 && bytes % value == 0) return absl::StrCat(bytes / value, name);
  }
  return absl::StrCat(bytes, "B");
}

}  // namespace steward
