#pragma once
// Files on the node: where the agent's paths live under its root, the files the control plane
// sends (docs/hyperpod-contract.md "Node files"), and which bundle keys are safe to write.
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/status.h"

namespace hf::agent {

/// `path` (absolute, as on the node) under `root`: NodePath("/tmp/x", "/opt/ml") is
/// "/tmp/x/opt/ml"; with root "/" it is `path` itself.
std::string NodePath(const std::string& root, std::string_view path);

/// Writes each file under `root` with exactly its mode (whatever the umask), creating parent
/// directories (0755), by write-to-temp and rename. Errors: InvalidArgument for a path that
/// is not absolute or has a ".." segment (nothing written for it), Internal naming the path
/// and errno text. Every file is attempted; the first error is returned.
Status WriteNodeFiles(const std::string& root, const std::vector<agentapi::NodeFile>& files);

/// Replaces `path` with `content` at exactly `mode` (write-to-temp and rename), creating its
/// missing parent directories with 0755. Errors: Internal naming the path and errno text.
Status WriteFileWithParents(const std::string& path, std::string_view content, unsigned mode);

/// Whether a bundle key may be written below the bundle directory: relative, non-empty,
/// no ".." segment, no NUL (the path-traversal rule).
bool IsSafeBundleKey(std::string_view key);

}  // namespace hf::agent
