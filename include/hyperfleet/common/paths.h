#pragma once
// Where Hyperfleet keeps its state. Every subcommand resolves the data directory the same way.
#include <string>

#include "hyperfleet/common/status.h"

namespace hf {

/// The data directory: `flag` when non-empty, else $HYPERFLEET_DATA_DIR, else
/// /var/lib/hyperfleet for root, else ~/.hyperfleet.
std::string ResolveDataDir(const std::string& flag);

/// MakeDirs (common/fs.h) under its older name; callers move to MakeDirs.
Status EnsureDirectory(const std::string& dir, unsigned mode = 0700);

}  // namespace hf
