#pragma once
// Where Hyperfleet keeps its state. Every subcommand resolves the data directory the same way.
#include <string>

namespace hf {

/// The data directory: `flag` when non-empty, else $HYPERFLEET_DATA_DIR, else
/// /var/lib/hyperfleet for root, else ~/.hyperfleet.
std::string ResolveDataDir(const std::string& flag);

}  // namespace hf
