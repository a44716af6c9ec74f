// FileStore: a BackupStore on a local or NFS directory. Objects are files under the root; a
// writer streams to a dot-file and renames it on Commit, after fsync, so a half-written object
// is never visible under its key.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "backup/store.h"
#include "common/files.h"

namespace steward {
namespace {
namespace fs = std::filesystem;

absl::Status Errno(const std::string& what) { return ErrnoStatus(errno, what); }

// An object being written: an AtomicFile, renamed into place on Commit().
class FileWriter : public ObjectWriter {
 public:
  explicit FileWriter(AtomicFile file) : file_(std::move(file)) {}
  absl::Status Write(std::string_view chunk) override { return file_.Write(chunk); }
  absl::Status Commit() override { return file_.Commit(); }

 private:
  AtomicFile file_;
};

class FileStore : public BackupStore {
 public:
  explicit FileStore(std::string root) : root_(std::move(root)) {}

  std::string Describe() const override { return "file://" + root_; }

  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    if (absl::Status s = CheckRoot(); !s.ok()) return s;
    fs::path target = Path(key);
    if (absl::Status s = MakeDirs(target.parent_path().string(), 0755); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("backup store ", Describe(), ": ", s.message()));
    }
    // A unique temp name (AtomicFile): concurrent writers of one key (agents and stewardctl on
    // a shared NFS store) must not interleave their bytes; the last rename wins whole.
    auto file = AtomicFile::Create(target.string(), 0640);
    if (!file.ok()) return file.status();
    return std::unique_ptr<ObjectWriter>(new FileWriter(std::move(*file)));
  }

  absl::Status Put(const std::string& key, const std::string& content) override {
    auto w = Create(key);
    if (!w.ok()) return w.status();
    if (absl::Status s = (*w)->Write(content); !s.ok()) return s;
    return (*w)->Commit();
  }

  absl::StatusOr<std::string> Get(const std::string& key) override {
    std::string out;
    absl::Status s = Read(key, [&](std::string_view c) {
      out.append(c.data(), c.size());
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return out;
  }

  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    // A missing root is not a missing object: "no restore intent, no backup" read off an
    // unmounted share would look like a cluster that never existed.
    if (absl::Status s = CheckRoot(); !s.ok()) return s;
    fs::path p = Path(key);
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno(absl::StrCat("reading ", p.string()));
    std::string buf(1 << 20, '\0');
    absl::Status result;
    while (true) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        result = Errno(absl::StrCat("reading ", p.string()));
        break;
      }
      if (n == 0) break;
      result = sink(std::string_view(buf.data(), static_cast<size_t>(n)));
      if (!result.ok()) break;
    }
    ::close(fd);
    return result;
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    std::vector<ObjectInfo> out;
    std::error_code ec;
    if (absl::Status s = CheckRoot(); !s.ok()) return s;
    // Walk only below the deepest directory the prefix names.
    std::string dir_part =
        prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/') + 1);
    fs::path start = Path(dir_part);
    if (!fs::exists(start, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(start, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      if (it->path().filename().string().rfind(".", 0) == 0) continue;  // in-flight temp files
      std::string key = fs::relative(it->path(), root_, ec).string();
      if (key.rfind(prefix, 0) != 0) continue;
      out.push_back({key, static_cast<uint64_t>(it->file_size(ec))});
    }
    if (ec)
      return absl::UnavailableError(absl::StrCat("listing ", start.string(), ": ", ec.message()));
    std::sort(out.begin(), out.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  absl::Status Delete(const std::string& key) override {
    if (absl::Status s = CheckRoot(); !s.ok()) return s;
    fs::path p = Path(key);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      return Errno(absl::StrCat("deleting ", p.string()));
    // Remove directories left empty, up to the root.
    std::error_code ec;
    for (fs::path d = p.parent_path(); d.string().size() > root_.size(); d = d.parent_path()) {
      if (!fs::is_empty(d, ec) || ec) break;
      fs::remove(d, ec);
    }
    return absl::OkStatus();
  }

 private:
  // The root is the store's identity: it is never created here (an agent that created it would
  // turn an unmounted NFS share into an empty store). FailedPrecondition: an operator must
  // mount or create it.
  absl::Status CheckRoot() const {
    std::error_code ec;
    if (fs::is_directory(root_, ec)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("backup store ", Describe(),
                     ": the directory does not exist (not mounted?); "
                     "agents never create it: create it once, or mount the share"));
  }
  fs::path Path(const std::string& key) const { return fs::path(root_) / key; }
  std::string root_;
};

}  // namespace

std::unique_ptr<BackupStore> NewFileStore(const std::string& root) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return std::make_unique<FileStore>(r);
}

}  // namespace steward
