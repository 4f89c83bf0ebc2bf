#pragma once
// Runs a node image recipe script (data/node-image/) as the image build does: `bash <script>
// <args...>` with a fixed environment and umask, so that what it creates does not depend on
// the caller's umask, locale, PATH or current directory. Internal to hf_provider.
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::provider::internal {

/// Lines kept in RecipeRun::tail.
inline constexpr size_t kRecipeTailLines = 40;

/// umask every recipe runs under: files 0644, directories 0755 unless it says otherwise.
inline constexpr unsigned kRecipeUmask = 022;

/// A finished run.
struct RecipeRun {
  int exit_status = -1;          ///< exit code, or 128 + signal
  std::string last_step;         ///< the last "@@step NAME" line's NAME
  std::deque<std::string> tail;  ///< the last kRecipeTailLines lines
};

/// Runs /bin/bash `script` `args...` in `/` with stdin from /dev/null, umask kRecipeUmask and
/// only this environment: PATH (the sbin and bin dirs), HOME=/root, LC_ALL=C,
/// DEBIAN_FRONTEND=noninteractive, then `extra_env` ("NAME=value"). stdout and stderr, merged,
/// go line by line to `log` (may be empty) and to the file `log_path` (truncated first).
/// Errors: Internal when it cannot be started or waited for.
StatusOr<RecipeRun> RunRecipeScript(const std::string& script, const std::vector<std::string>& args,
                                    const std::vector<std::string>& extra_env,
                                    const std::string& log_path,
                                    const std::function<void(std::string_view)>& log);

}  // namespace hf::provider::internal
