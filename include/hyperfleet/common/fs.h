#pragma once
// Whole-file reads and writes and directory creation, with modes that do not depend on the
// caller's umask. The one copy of each for the project.
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf {

/// Replaces `path` with `data` atomically: a temporary file in the same directory, written
/// and fsync'ed, fchmod'ed to exactly `mode` (whatever the umask), renamed over `path`, then
/// the directory fsync'ed (best effort). A reader sees the old file or the new one, never a
/// part of it, and concurrent writers of one path do not collide. Errors: Internal naming
/// the path and errno text; no temporary file is left behind.
Status WriteFileAtomically(const std::string& path, std::string_view data, unsigned mode = 0644);

/// The whole content of `path` (a regular file or a /proc file of unknown size). Errors:
/// NotFound when it does not exist, Internal naming the path and errno text otherwise.
StatusOr<std::string> ReadFile(const std::string& path);

/// Creates directory `path` and its missing parents (mkdir -p); those it creates get exactly
/// `mode`, whatever the umask; existing ones are left as they are. Errors: InvalidArgument
/// for an empty path; Internal naming the path and errno text, or "<path> is not a
/// directory" when something else is in the way.
Status MakeDirs(const std::string& path, unsigned mode = 0700);

}  // namespace hf
