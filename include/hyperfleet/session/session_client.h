#pragma once
// The client side of shell sessions (`hyperfleet ssm start-session`): opens the WebSocket
// (protocol.h), forwards stdin, window sizes and writes the session's output.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::session {

/// One session to run.
struct SessionClientOptions {
  std::string endpoint_url;  ///< http://host[:port] of the control plane (https: not supported)
  /// Signs the upgrade request in place (SigV4, signing name "ssm"): gets method GET, the
  /// target (path + query) and no body; must set Host and the signature headers.
  std::function<void(http::HttpRequest&)> sign;
  std::string target;                  ///< sagemaker-cluster:<cluster-id>_<group>-<instance-id>
  std::optional<std::string> command;  ///< run this instead of a login shell
  /// Run under a pty: the local terminal is put in raw mode (restored on return and on
  /// SIGTERM/SIGHUP/SIGINT), SIGWINCH is sent as resize. Requires stdin_fd to be a terminal.
  bool pty = false;
  int stdin_fd = 0;   ///< read until EOF (then stdin-eof is sent)
  int stdout_fd = 1;  ///< stdout frames (and the pty's output)
  int stderr_fd = 2;  ///< stderr frames and the session's error text
  std::string term;   ///< TERM for the remote shell (pty); empty: the local $TERM or xterm
  int connect_timeout_seconds = 30;
};

/// Runs a session to its end and returns the remote exit status (0..255; 128 + signal).
/// Errors: InvalidArgument for a bad endpoint URL; Unavailable when the endpoint cannot be
/// reached or the connection drops before the exit frame; for a refused upgrade, a Status
/// carrying the server's AWS error type (AwsErrorTypeOf) and message, with code
/// Unauthenticated for 403, FailedPrecondition for TargetNotConnected, InvalidArgument for
/// other 4xx, Internal for 5xx; Internal when the server sends an error frame (its text).
StatusOr<int> RunSession(const SessionClientOptions& options);

}  // namespace hf::session
