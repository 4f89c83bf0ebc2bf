#pragma once
// /etc/hyperfleet/agent.env, which the local provider writes into every node: where the
// control plane is, who the node is, and the proxy variables for lifecycle scripts.
#include <map>
#include <string>
#include <string_view>

#include "hyperfleet/agent/agent_options.h"
#include "hyperfleet/common/status.h"

namespace hf::agent {

/// Parses an env file: KEY=VALUE lines; blank lines and lines starting with '#' are
/// skipped; a value in matching single or double quotes loses them; "export " before a key
/// is allowed. Errors: InvalidArgument naming the first line without '='.
StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text);

/// Reads `path` (e.g. /etc/hyperfleet/agent.env) into `options`: HF_AGENT_URL,
/// HF_INSTANCE_ID and HF_AGENT_TOKEN (all required), the proxy variables into
/// script_environment (optional; other keys are ignored).
/// Errors: NotFound when the file cannot be read, InvalidArgument for a malformed file or
/// a missing key (named).
Status LoadAgentEnv(const std::string& path, AgentOptions* options);

}  // namespace hf::agent
