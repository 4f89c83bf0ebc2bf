#pragma once
// The one way Hyperfleet holds a lock across processes: flock(2) on a lock file.
#include <sys/types.h>

#include <functional>
#include <string>

#include "hyperfleet/common/status.h"

namespace hf {

/// Holds an exclusive flock(2) on a file while it lives. The lock belongs to the open file
/// description, so threads of one process exclude each other too; closing it (destruction)
/// releases it, and so does the death of the holder.
class FileLock {
 public:
  /// Waits until the lock on `path` is ours, creating the file with `mode` when missing (the
  /// directory must exist). `on_wait` (may be empty) is called once, before waiting, when
  /// another holder has it. Errors: Internal naming the path (open or flock failed).
  static StatusOr<FileLock> Acquire(const std::string& path, mode_t mode,
                                    const std::function<void()>& on_wait = {});
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace hf
