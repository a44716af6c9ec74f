// Sleeps until a directory changes: the agent's control loop waits on this rather than polling
// the data dir, so an idle agent does not wake up four times a second, and a data dir removed
// under etcd is still noticed at once.
//
// Watched: entries created, deleted or moved in each directory, and the directory's own removal
// (file contents are not watched). Directories that do not exist yet are skipped; calling
// Watch() again picks them up. Thread-safe: Wake() may be called from any thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace steward {

class DirWatch {
 public:
  DirWatch();
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Adds (or refreshes) watches on `dirs`.
  void Watch(const std::vector<std::string>& dirs);
  // Waits up to `d` for a change in a watched directory or a Wake(); drains what woke it.
  // Without inotify (it failed to initialize) it just sleeps, unless woken.
  void Wait(std::chrono::milliseconds d);
  void Wake();

 private:
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
};

}  // namespace steward
