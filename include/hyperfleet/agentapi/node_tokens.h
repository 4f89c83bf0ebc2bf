#pragma once
// Per-node agent tokens. A node's token is HMAC-SHA256(fleet secret, instance id), so the
// control plane stores nothing per node, a token survives restarts, and a node that knows
// its own token cannot derive another node's.
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::agentapi {

/// Issues and checks node agent tokens. Immutable after creation; thread-safe.
class NodeTokens {
 public:
  /// Loads the 32-byte secret from `path`, creating it (random, mode 0600, parent
  /// directories 0700) when missing. Errors: Internal naming the path when it cannot be read
  /// or written; InvalidArgument when the file is not 32 bytes.
  static StatusOr<NodeTokens> LoadOrCreate(const std::string& path);
  /// A token source over a given secret (tests).
  explicit NodeTokens(std::string secret) : secret_(std::move(secret)) {}

  /// The token of `instance_id`: 64 lowercase hex characters.
  std::string tokenFor(std::string_view instance_id) const;
  /// Whether `token` is `instance_id`'s token (constant-time comparison).
  bool verify(std::string_view instance_id, std::string_view token) const;

 private:
  std::string secret_;
};

}  // namespace hf::agentapi
