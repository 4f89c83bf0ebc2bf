#pragma once
// `hyperfleet logs`: a thin client of the CloudWatch Logs subset (see logs/log_operations.h).
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `hyperfleet logs tail <group> [--log-stream-name-prefix P] [--since 10m|ISO8601]
/// [--follow] [--format short|detailed]` (prints as `aws logs tail`) and `hyperfleet logs
/// streams <group>` (one line per stream: name, last event time), with the client flags of
/// client_config.h.
void AddLogsCommand(CLI::App& app);

}  // namespace hf::cli
