#pragma once
// `hyperfleet agent`: the node agent (include/hyperfleet/agent/agent.h), run inside every
// node by hyperfleet-agent.service.
namespace CLI {
class App;
}

namespace hf::cli {

/// Registers `agent [--env-file PATH] [--root DIR] [--once] [--log-level L]` on `app`.
/// It reads HF_AGENT_URL, HF_INSTANCE_ID, HF_AGENT_TOKEN from the env file (default
/// <root>/etc/hyperfleet/agent.env), logs to stderr (journald), runs until SIGTERM/SIGINT
/// (or, with --once, until the lifecycle scripts' result is reported) and exits 0; exit 1
/// with a message for a bad env file.
void AddAgentCommand(CLI::App& app);

}  // namespace hf::cli
