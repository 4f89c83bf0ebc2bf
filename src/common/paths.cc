#include "hyperfleet/common/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace hf {

std::string ResolveDataDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("HYPERFLEET_DATA_DIR"); env && *env) return env;
  if (geteuid() == 0) return "/var/lib/hyperfleet";
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : ".", "/.hyperfleet");
}

}  // namespace hf
