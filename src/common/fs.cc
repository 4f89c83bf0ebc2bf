#include "hyperfleet/common/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hf {
namespace {

Status ErrnoError(std::string_view what, std::string_view path, int err) {
  return absl::InternalError(absl::StrCat(std::string(what), " ", std::string(path), ": ",
                                          std::strerror(err)));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view data, unsigned mode) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);  // unique name: writers do not collide
  if (fd < 0) return ErrnoError("cannot create", tmp, errno);
  Status status = WriteAll(fd, data, tmp);
  // fchmod, not the create mode: the umask must neither widen nor narrow `mode`.
  if (status.ok() && ::fchmod(fd, static_cast<mode_t>(mode)) != 0) {
    status = ErrnoError("cannot chmod", tmp, errno);
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("cannot sync", tmp, errno);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("cannot close", tmp, errno);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("cannot rename to", path, errno);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // The rename is durable once the directory is; failing to sync it is not worth an error.
  const int dir_fd = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return ErrnoError("cannot open", path, errno);
  }
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) text.reserve(static_cast<size_t>(st.st_size));
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("cannot read", path, err);
    }
  }
  ::close(fd);
  return text;
}

Status MakeDirs(const std::string& path, unsigned mode) {
  if (path.empty()) return absl::InvalidArgumentError("MakeDirs: empty directory name");
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), static_cast<mode_t>(mode)) == 0) {
      // The umask narrowed what mkdir made.
      if (::chmod(prefix.c_str(), static_cast<mode_t>(mode)) != 0) {
        return ErrnoError("cannot chmod", prefix, errno);
      }
    } else if (errno != EEXIST) {
      return ErrnoError("cannot create directory", prefix, errno);
    }
    if (end == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("cannot stat", path, errno);
  if (!S_ISDIR(st.st_mode)) return absl::InternalError(absl::StrCat(path, " is not a directory"));
  return absl::OkStatus();
}

}  // namespace hf
