#pragma once
// Where Hyperfleet keeps its state. Every subcommand resolves the data directory the same way.
#include <string>

#include "hyperfleet/common/status.h"

namespace hf {

/// The data directory: `flag` when non-empty, else $HYPERFLEET_DATA_DIR, else
/// /var/lib/hyperfleet for root, else ~/.hyperfleet.
std::string ResolveDataDir(const std::string& flag);

/// Creates `dir` and its parents (mode 0700 for the ones created). Errors: Internal naming
/// the path and errno text.
Status EnsureDirectory(const std::string& dir);

}  // namespace hf
