#pragma once
// The ssh client's argument vector and environment, apart from running it, so that the
// unit tests can read exactly what is started (include/hyperfleet/ssh/ssh_client.h).
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/ssh/ssh_client.h"

namespace hf::ssh::internal {

/// The ssh program this tree runs (Debian's openssh-client).
inline constexpr std::string_view kSshProgram = "/usr/bin/ssh";

/// `ssh <options> -- <user>@<address> <command>` for `target`: pinned host key, BatchMode,
/// only target.identity_file, no agent, forwarding or configuration file. InvalidArgument
/// (naming the field) for an empty or option-like address, a user with '@' or blanks, an
/// empty identity or known_hosts path, or a non-positive connect timeout.
StatusOr<std::vector<std::string>> SshArgv(const SshTarget& target, std::string_view command);

/// The fixed environment ssh runs with: none of the caller's (no SSH_AUTH_SOCK, PATH,
/// locale or SSH_ASKPASS).
std::vector<std::string> SshEnvironment();

}  // namespace hf::ssh::internal
