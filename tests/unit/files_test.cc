// The one atomic-write helper and the one errno mapping (common/files.h).
#include "common/files.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "gtest/gtest.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("files_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t Entries() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST_F(FilesTest, AnUncommittedFileLeavesNothingBehind) {
  {
    auto f = AtomicFile::Create((dir_ / "x").string(), 0644);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->Write("half").ok());
  }
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(FilesTest, CommitPlacesTheWholeFileWithItsMode) {
  auto f = AtomicFile::Create((dir_ / "key").string(), 0600);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->Write("secret ").ok());
  ASSERT_TRUE(f->Write("bytes").ok());
  ASSERT_TRUE(f->Commit().ok());
  auto text = ReadFile((dir_ / "key").string());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "secret bytes");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(), 1u) << "no temp file left";
}

TEST_F(FilesTest, NoReplaceNeverOverwrites) {
  ASSERT_TRUE(WriteFileAtomic((dir_ / "f").string(), "first").ok());
  auto f = AtomicFile::Create((dir_ / "f").string(), 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Write("second").ok());
  EXPECT_TRUE(absl::IsAlreadyExists(f->Commit(/*replace=*/false)));
  EXPECT_EQ(*ReadFile((dir_ / "f").string()), "first");
  ASSERT_TRUE(WriteFileAtomic((dir_ / "f").string(), "third").ok());
  EXPECT_EQ(*ReadFile((dir_ / "f").string()), "third");
}

TEST_F(FilesTest, ErrnoIsMappedByWhatTheCallerDoesNext) {
  EXPECT_TRUE(absl::IsNotFound(ErrnoStatus(ENOENT, "x")));
  EXPECT_TRUE(absl::IsPermissionDenied(ErrnoStatus(EACCES, "x")));
  EXPECT_TRUE(absl::IsPermissionDenied(ErrnoStatus(EROFS, "x")));
  EXPECT_TRUE(absl::IsAlreadyExists(ErrnoStatus(EEXIST, "x")));
  EXPECT_TRUE(absl::IsResourceExhausted(ErrnoStatus(ENOSPC, "x")));
  EXPECT_TRUE(absl::IsUnavailable(ErrnoStatus(EIO, "x")));
  EXPECT_EQ(ErrnoStatus(ENOENT, "opening f").message(), "opening f: No such file or directory");
  EXPECT_TRUE(absl::IsNotFound(AtomicFile::Create((dir_ / "no" / "dir").string(), 0644).status()));
}

TEST_F(FilesTest, AnAdoptedFileIsPublishedWholeOrRemoved) {
  const std::string part = (dir_ / "snap.part").string();
  ASSERT_TRUE(WriteFileAtomic(part, "snapshot", 0600).ok());
  {
    auto f = AtomicFile::Adopt(part, (dir_ / "snap").string());
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->Commit(/*replace=*/false).ok());
  }
  EXPECT_EQ(*ReadFile((dir_ / "snap").string()), "snapshot");
  EXPECT_FALSE(fs::exists(part));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "snap").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the written file's mode is kept";

  ASSERT_TRUE(WriteFileAtomic(part, "newer", 0600).ok());
  {
    auto f = AtomicFile::Adopt(part, (dir_ / "snap").string());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(absl::IsAlreadyExists(f->Commit(/*replace=*/false)));
  }
  EXPECT_EQ(*ReadFile((dir_ / "snap").string()), "snapshot");
  EXPECT_FALSE(fs::exists(part)) << "not committed: removed";
  EXPECT_TRUE(absl::IsNotFound(AtomicFile::Adopt(part, (dir_ / "snap").string()).status()));
}

TEST_F(FilesTest, SyncDirSyncsADirectoryAndNamesOneItCannotOpen) {
  EXPECT_TRUE(SyncDir(dir_.string()).ok());
  EXPECT_TRUE(SyncDir("").ok()) << "the working directory";
  absl::Status s = SyncDir((dir_ / "missing").string());
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find((dir_ / "missing").string()), std::string::npos) << s;
}

// files.h promises that Commit makes the rename durable: a directory that cannot be synced is
// an error, not a silent success. The directory here can be written but not opened for reading
// (mode 0300); root may open it anyway, so as root the check runs in a child as nobody.
TEST_F(FilesTest, CommitReportsADirectoryItCannotSync) {
  const fs::path locked = dir_ / "locked";
  fs::create_directories(locked);
  auto commit = [&locked]() -> absl::Status {
    auto f = AtomicFile::Create((locked / "f").string(), 0644);
    if (!f.ok())
      return absl::InternalError(std::string("create: ") + std::string(f.status().message()));
    if (absl::Status s = f->Write("x"); !s.ok()) return absl::InternalError("write");
    return f->Commit();
  };
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(locked.c_str(), 0300), 0);
    absl::Status s = commit();
    ::chmod(locked.c_str(), 0700);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_TRUE(fs::exists(locked / "f")) << "the rename itself happened";
    return;
  }
  constexpr uid_t kNobody = 65534;
  ASSERT_EQ(::chown(locked.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0300), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(3);
    absl::Status s = commit();
    ::_exit(s.ok() ? 0 : absl::IsPermissionDenied(s) ? 1 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "0: the failed directory sync was ignored; 2: another "
                                       "error; 3: could not become nobody";
  EXPECT_TRUE(fs::exists(locked / "f")) << "the rename itself happened";
}

}  // namespace
}  // namespace steward
