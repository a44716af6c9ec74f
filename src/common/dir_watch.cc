#include "common/dir_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstdint>

namespace steward {

DirWatch::DirWatch()
    : inotify_fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

DirWatch::~DirWatch() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void DirWatch::Watch(const std::vector<std::string>& dirs) {
  if (inotify_fd_ < 0) return;
  constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                             IN_MOVE_SELF | IN_ONLYDIR;
  // An existing watch on the same inode is updated in place, so calling this every pass costs
  // one syscall per directory and leaks nothing. A missing directory fails with ENOENT.
  for (const auto& d : dirs) (void)::inotify_add_watch(inotify_fd_, d.c_str(), kMask);
}

void DirWatch::Wait(std::chrono::milliseconds d) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};  // -1 fds are ignored
  if (::poll(fds, 2, static_cast<int>(d.count())) <= 0) return;
  alignas(inotify_event) char buf[4096];
  if (inotify_fd_ >= 0) {
    while (::read(inotify_fd_, buf, sizeof(buf)) > 0) {
    }
  }
  uint64_t n = 0;
  if (wake_fd_ >= 0) (void)!::read(wake_fd_, &n, sizeof(n));
}

void DirWatch::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

}  // namespace steward
