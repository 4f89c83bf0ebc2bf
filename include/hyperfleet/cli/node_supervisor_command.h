#pragma once
// The hidden `hyperfleet node-supervisor <node-dir>` subcommand (started by the local
// provider, one per node; see docs/nodes.md "A node's life").
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `node-supervisor` on `app` (hidden from --help: not for people to run).
void AddNodeSupervisorCommand(CLI::App& app);

}  // namespace hf::cli
