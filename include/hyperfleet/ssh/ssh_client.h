#pragma once
// The one way Hyperfleet reaches a registered machine: OpenSSH's `ssh` client (Debian's
// openssh-client), started through the common process launcher, with the machine's host key
// pinned (StrictHostKeyChecking=yes against a one-line known_hosts file), BatchMode (never a
// prompt), the registered identity file only (IdentitiesOnly) and no agent or forwarding.
// A wrong or unknown host key fails before any remote command runs (ssh exits 255).
#include <cstdint>
#include <string>
#include <string_view>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::ssh {

/// How to reach one machine.
struct SshTarget {
  std::string address;           ///< IPv4 address or host name
  uint16_t port = 22;
  std::string user = "root";     ///< root, or a user with passwordless sudo
  std::string identity_file;     ///< private key (owner-only file)
  std::string known_hosts_file;  ///< the pinned host key, one line (KnownHostsLine)
  int connect_timeout_seconds = 10;
};

/// What a remote command did.
struct SshResult {
  int exit_code = 0;  ///< the remote command's exit status (never 255 from ssh itself)
  std::string out;    ///< its standard output
  std::string err;    ///< its standard error (ssh's own warnings removed)
};

/// The known_hosts line pinning `host_public_key` ("ssh-ed25519 AAAA…", comment dropped) for
/// `address`:`port` ("[a]:p" when the port is not 22). InvalidArgument when the key is not
/// "<type> <base64>".
StatusOr<std::string> KnownHostsLine(std::string_view address, uint16_t port,
                                     std::string_view host_public_key);

/// Runs `command` (one remote shell command line, run by the login shell of target.user;
/// prefixed with `sudo -n` by the caller when the user is not root) with `input` on its
/// standard input, waiting at most `timeout`. Errors: Unavailable when ssh itself failed
/// (exit 255: unreachable, refused, authentication, host key mismatch), with ssh's message;
/// DeadlineExceeded when `timeout` passed (the ssh process group is killed); Internal when
/// ssh cannot be started. A remote command that fails is not an error: see exit_code.
StatusOr<SshResult> Run(const SshTarget& target, std::string_view command,
                        std::string_view input, Duration timeout);

/// Starts `command` on the machine and returns the ssh process, its standard streams as
/// given (e.g. pipes joined to a local program: sshfs's passive mode). The caller owns it.
StatusOr<Subprocess> Start(const SshTarget& target, std::string_view command, Stdio in,
                           Stdio out, Stdio err);

}  // namespace hf::ssh
