#include "hyperfleet/common/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hf {

std::string ResolveDataDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("HYPERFLEET_DATA_DIR"); env && *env) return env;
  if (geteuid() == 0) return "/var/lib/hyperfleet";
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : ".", "/.hyperfleet");
}

Status EnsureDirectory(const std::string& dir, unsigned mode) {
  if (dir.empty()) return absl::InvalidArgumentError("empty directory name");
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty()) continue;
    if (mkdir(path.c_str(), mode) == 0) {
      chmod(path.c_str(), mode);  // the umask narrowed what mkdir made
    } else if (errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
    }
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InternalError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace hf
