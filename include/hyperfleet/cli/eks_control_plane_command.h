#pragma once
// `hyperfleet eks-control-plane ensure|status|remove|list|nodes|node-*`: one host's EKS
// control planes and their Nodes driven by hand (tests, debugging), and the hidden `eks-control-plane-supervisor <dir>`
// that eks::ProcessControlPlanes starts, one per control plane.
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers both subcommands on `app` (the supervisor hidden from --help).
void AddEksControlPlaneCommands(CLI::App& app);

}  // namespace hf::cli
