#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace steward {
namespace fs = std::filesystem;

namespace {
absl::Status ErrnoError(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}
}  // namespace

absl::Status WriteFileAtomic(const std::string& path, const std::string& content, int mode) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::path tmp = dir / absl::StrCat(".", target.filename().string(), ".tmp.", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError(absl::StrCat("creating ", tmp.string()), errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError(absl::StrCat("writing ", tmp.string()), err);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("fsync ", tmp.string()), err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("renaming to ", path), err);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return ErrnoError(absl::StrCat("opening ", path), errno);
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
      return ErrnoError(absl::StrCat("creating directory ", cur.string()), errno);
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
