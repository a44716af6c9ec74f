#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace steward {
namespace fs = std::filesystem;

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

namespace {

fs::path DirOf(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

}  // namespace

absl::Status SyncDir(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("opening directory ", d));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, absl::StrCat("syncing directory ", d));
  return absl::OkStatus();
}

// The process umask, read without changing it (umask(2) can only be read by setting it, which
// would race with other threads creating files). 022 if /proc does not say.
static mode_t ProcessUmask() {
  static const mode_t mask = [] {
    auto status = ReadFile("/proc/self/status");
    if (status.ok()) {
      size_t at = status->find("Umask:");
      if (at != std::string::npos) {
        return static_cast<mode_t>(std::strtoul(status->c_str() + at + 6, nullptr, 8));
      }
    }
    return static_cast<mode_t>(022);
  }();
  return mask;
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& target, int mode,
                                              bool exact_mode) {
  const fs::path t(target);
  std::string tmpl = (DirOf(t) / absl::StrCat(".", t.filename().string(), ".tmp.XXXXXX")).string();
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("creating a temp file for ", target));
  AtomicFile file(target, tmpl, fd);  // from here on the temp file is removed on failure
  const mode_t m =
      exact_mode ? static_cast<mode_t>(mode) : static_cast<mode_t>(mode) & ~ProcessUmask();
  if (::fchmod(fd, m) != 0) {
    return ErrnoStatus(errno, absl::StrCat("chmod ", tmpl));
  }
  return file;
}

absl::StatusOr<AtomicFile> AtomicFile::Adopt(const std::string& written,
                                             const std::string& target) {
  const int fd = ::open(written.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("opening ", written));
  return AtomicFile(target, written, fd);
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : target_(std::move(o.target_)),
      tmp_(std::exchange(o.tmp_, std::string())),
      fd_(std::exchange(o.fd_, -1)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

absl::Status AtomicFile::Write(std::string_view chunk) {
  size_t off = 0;
  while (off < chunk.size()) {
    ssize_t n = ::write(fd_, chunk.data() + off, chunk.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("writing ", tmp_));
    }
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Preallocate(uint64_t size) {
  const auto len = static_cast<off_t>(size);
  int err = ::fallocate(fd_, 0, 0, len) == 0 ? 0 : errno;
  if (err == EOPNOTSUPP || err == ENOSYS) err = ::ftruncate(fd_, len) == 0 ? 0 : errno;
  if (err != 0) return ErrnoStatus(err, absl::StrCat("preallocating ", size, " bytes for ", tmp_));
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit(bool replace, bool sync_dir) {
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fsync ", tmp_));
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return ErrnoStatus(errno, absl::StrCat("closing ", tmp_));
  if (replace) {
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("renaming ", tmp_, " to ", target_));
    }
  } else if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) !=
             0) {
    int err = errno;
    // Some filesystems lack RENAME_NOREPLACE; link() has the same no-replace semantics.
    if (err == EINVAL || err == ENOSYS || err == ENOTSUP) {
      if (::link(tmp_.c_str(), target_.c_str()) == 0) {
        ::unlink(tmp_.c_str());
        tmp_.clear();
        return sync_dir ? SyncDir(DirOf(target_).string()) : absl::OkStatus();
      }
      err = errno;
    }
    if (err == EEXIST) return absl::AlreadyExistsError(absl::StrCat(target_, " already exists"));
    return ErrnoStatus(err, absl::StrCat("renaming ", tmp_, " to ", target_));
  }
  tmp_.clear();
  return sync_dir ? SyncDir(DirOf(target_).string()) : absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& content, int mode) {
  auto file = AtomicFile::Create(path, mode);
  if (!file.ok()) return file.status();
  if (absl::Status s = file->Write(content); !s.ok()) return s;
  return file->Commit();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return ErrnoStatus(errno, absl::StrCat("opening ", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status MakeDirs(const std::string& path, int mode) {
  std::error_code ec;
  fs::path p(path);
  fs::path cur;
  for (const auto& part : p) {
    cur /= part;
    if (cur.empty() || fs::exists(cur, ec)) continue;
    if (::mkdir(cur.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("creating directory ", cur.string()));
    }
  }
  if (!fs::is_directory(p, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

bool DirHasEntries(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  return fs::directory_iterator(path, ec) != fs::directory_iterator();
}

}  // namespace steward
