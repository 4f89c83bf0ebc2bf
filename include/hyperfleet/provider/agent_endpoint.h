#pragma once
// Where agents on machines (the ssh provider's nodes) reach the control plane: the TLS agent
// endpoint that `hyperfleet server --agent-listen` serves, as a provider writes it into a
// node's /etc/hyperfleet/agent.env (docs/nodes.md "The agent endpoint over TLS").
#include <string>

namespace hf::provider {

/// The TLS agent endpoint as machines are told it. Both empty when the server has no
/// --agent-listen (then there is no endpoint for machines).
struct AgentEndpoint {
  /// HF_AGENT_URL: "https://HOST:PORT", HOST the advertised address (--agent-address, else
  /// the listen address); an IPv6 address is bracketed.
  std::string url;
  /// HF_AGENT_CERT_SHA256: lowercase hex SHA-256 of the endpoint certificate's DER (64
  /// characters), which the agent pins (no CA, no trust on first use).
  std::string cert_sha256;
};

}  // namespace hf::provider
