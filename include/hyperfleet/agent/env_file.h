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
/// HF_INSTANCE_ID and HF_AGENT_TOKEN (all required), HF_AGENT_CERT_SHA256 (with an https
/// URL; colons and upper case are accepted and dropped), the proxy variables into
/// script_environment (optional), HF_IMDS and its keys into imds (ImdsFromEnv; other keys
/// are ignored).
/// Errors: NotFound when the file cannot be read, InvalidArgument for a malformed file, a
/// missing key (named) or an endpoint CheckAgentEndpoint refuses.
Status LoadAgentEnv(const std::string& path, AgentOptions* options);

/// Whether the agent may send its token to options.url: http:// without a pin (the local
/// provider's bridge, which never leaves the host), or https:// with cert_sha256 as 64
/// lowercase hex digits. Errors: InvalidArgument naming the variable: an https URL without a
/// pin (no trust on first use), a pin with an http URL (the token would travel in clear
/// text), a malformed pin, another scheme.
Status CheckAgentEndpoint(const AgentOptions& options);

}  // namespace hf::agent
