#pragma once
// The version 0 agent's messages (fixtures/agent_messages_v0.json: captured from the agent
// before the typed protocol) and the member paths of a message, for the compatibility
// tests of both sides. Targets that include this define HF_AGENT_MESSAGES_V0 (the file).
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#ifndef HF_AGENT_MESSAGES_V0
#error "define HF_AGENT_MESSAGES_V0 (tests/unit/agentapi/fixtures/agent_messages_v0.json)"
#endif

namespace hf::agentapi::fixtures {

/// {"register", "heartbeat", "heartbeat_slurm_controller", "lifecycle_started",
/// "lifecycle_succeeded", "lifecycle_failed", "logs"}: each a request body as sent.
inline const nlohmann::json& V0Messages() {
  static const nlohmann::json messages = [] {
    std::ifstream in(HF_AGENT_MESSAGES_V0);
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (!j.is_object()) throw std::runtime_error("cannot read " HF_AGENT_MESSAGES_V0);
    return j;
  }();
  return messages;
}

/// Every member path of `j`: "health", "health.findings[].check", ... (arrays: the union
/// over their entries; a partitions-like object's keys are data, so objects under
/// "partitions" count as one path).
inline void AddKeyPaths(const nlohmann::json& j, const std::string& prefix,
                        std::set<std::string>& out) {
  if (j.is_array()) {
    for (const auto& e : j) AddKeyPaths(e, prefix + "[]", out);
    return;
  }
  if (!j.is_object() || prefix.ends_with("partitions")) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    out.insert(path);
    AddKeyPaths(it.value(), path, out);
  }
}

inline std::set<std::string> KeyPaths(const nlohmann::json& j) {
  std::set<std::string> out;
  AddKeyPaths(j, "", out);
  return out;
}

}  // namespace hf::agentapi::fixtures
