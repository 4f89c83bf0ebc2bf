#pragma once
// How a `hyperfleet` subcommand gives up.
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::cli {

/// Prints "hyperfleet <command>: <status message>" to stderr and exits with status 1.
/// `command` names the subcommand as typed, e.g. "logs tail".
[[noreturn]] void ExitWithError(std::string_view command, const Status& status);

}  // namespace hf::cli
