#pragma once
// Where Hyperfleet keeps its state. Every subcommand resolves the data directory the same way.
#include <string>

#include "hyperfleet/common/status.h"

namespace hf {

/// The data directory: `flag` when non-empty, else $HYPERFLEET_DATA_DIR, else
/// /var/lib/hyperfleet for root, else ~/.hyperfleet.
std::string ResolveDataDir(const std::string& flag);

/// Creates `dir` and its parents; the ones it creates get exactly `mode` (0700 by default),
/// whatever the umask; existing ones are left as they are. Errors: Internal naming the path
/// and errno text.
Status EnsureDirectory(const std::string& dir, unsigned mode = 0700);

}  // namespace hf
