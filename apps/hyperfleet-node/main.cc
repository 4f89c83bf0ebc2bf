// hyperfleet-node: the node-side subcommands only (`agent`, `auto-resume`), linked static
// except glibc so that it runs on machines whose libraries are not the build host's
// (docs/architecture.md "The node binary"). The full `hyperfleet` binary has the same ones.
#include <CLI/CLI.hpp>

#include "hyperfleet/cli/agent_command.h"
#include "hyperfleet/cli/auto_resume_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Hyperfleet node binary: the node agent and srun's auto-resume supervisor"};
  app.set_version_flag("--version", "hyperfleet-node " HF_VERSION);
  app.require_subcommand(1);
  hf::cli::AddAgentCommand(app);
  hf::cli::AddAutoResumeCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
