#include "hyperfleet/common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hf {

StatusOr<FileLock> FileLock::Acquire(const std::string& path, mode_t mode,
                                     const std::function<void()>& on_wait) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::InternalError("open " + path + ": " + std::strerror(errno));
  }
  ::fchmod(fd, mode);  // whatever the umask made of it
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(fd);
  if (errno == EWOULDBLOCK && on_wait) on_wait();
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return absl::InternalError("flock " + path + ": " + std::strerror(err));
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace hf
