#include "hyperfleet/cli/node_supervisor_command.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "hyperfleet/provider/local_provider.h"

namespace hf::cli {

void AddNodeSupervisorCommand(CLI::App& app) {
  auto node_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("node-supervisor", "");  // empty description: hidden
  cmd->group("");
  cmd->add_option("node-dir", *node_dir, "<data-dir>/local/nodes/<instance-id>")->required();
  cmd->callback([node_dir] { std::exit(hf::provider::RunNodeSupervisor(*node_dir)); });
}

}  // namespace hf::cli
