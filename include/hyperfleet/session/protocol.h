#pragma once
// Shell sessions into nodes (`hyperfleet ssm start-session`): the target syntax and the
// wire protocol shared by the server (session_server.h) and the client (session_client.h).
//
// Transport: a WebSocket on the API port.
//
//   GET /hyperfleet/v1/session?target=<target>[&command=<cmd>][&pty=1][&cols=N&rows=N]
//       [&term=<TERM>]
//   Upgrade: websocket, signed with SigV4 (signing name "ssm", the server's region) over the
//   upgrade request exactly as over any GET (empty payload).
//
//   Query parameters (percent-encoded):
//     target   sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id> (required)
//     command  run `/bin/bash -lc <command>`; absent: a login shell `/bin/bash -l`
//     pty      1: run under a pseudo-terminal (stdout and stderr then arrive merged as
//              stdout); otherwise pipes (stdout and stderr apart, stdin until stdin-EOF)
//     cols, rows  initial window size of the pty (1..65535; default 80x24)
//     term     TERM inside the session (default xterm-256color; [A-Za-z0-9._+-], <= 64)
//
//   Errors before the upgrade are ordinary HTTP responses in AWS JSON form
//   ({"__type": ..., "message": ...}): 400 InvalidParameterException (malformed target or
//   parameters, not a WebSocket upgrade), 400 TargetNotConnected (no such node, or not
//   running), 403 for authentication failures (the SigV4 error type), 404 for other paths.
//
// Frames: every WebSocket message is binary; its first byte is the type, the rest the payload.
//
//   type  name     direction         payload
//   0x01  stdin    client -> server  bytes for the process's stdin
//   0x02  stdout   server -> client  bytes the process wrote to stdout (or the pty)
//   0x03  stderr   server -> client  bytes the process wrote to stderr (pipes only)
//   0x04  resize   client -> server  cols, rows: 16-bit big-endian each (4 bytes)
//   0x05  exit     server -> client  int32 big-endian status: the exit code, or 128 + signal
//                                    number when a signal killed it; the last frame
//   0x06  error    server -> client  UTF-8 text; the session failed (no exit frame follows)
//   0x07  stdin-eof client -> server (none): close the process's stdin (pipes; on a pty it
//                                    is ignored: type ^D)
//
// After exit or error the server closes the WebSocket (normal closure). When the client goes
// away first, the server hangs up the session (SIGHUP to its process group, SIGKILL after a
// grace period).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::session {

/// The request path of the session endpoint.
inline constexpr std::string_view kSessionPath = "/hyperfleet/v1/session";
/// SigV4 signing name of session requests (SSM's).
inline constexpr std::string_view kSigningName = "ssm";
/// The target syntax, for messages.
inline constexpr std::string_view kTargetForm =
    "sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>";

/// A parsed session target: one node of a cluster.
struct SessionTarget {
  std::string cluster_id;   ///< 12 of [a-z0-9] (the last segment of the cluster ARN)
  std::string group;        ///< instance group name: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
  std::string instance_id;  ///< i- + 8 or 17 of [a-f0-9]

  /// The target text, `sagemaker-cluster:<cluster_id>_<group>-<instance_id>`.
  std::string str() const;
};

/// Parses `sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>` (HyperPod's
/// SSM target form: cluster id, not name). Patterns from the SageMaker service model
/// (ClusterArn's id part, ClusterInstanceGroupName, ClusterNodeId). The instance id is the
/// suffix after the last "-i-", so group names may contain "-i-".
/// Errors: InvalidArgument (AWS type InvalidParameterException) naming the target, what is
/// wrong and the expected form.
StatusOr<SessionTarget> ParseTarget(std::string_view text);

/// Frame types (first byte of each WebSocket message).
enum class FrameType : uint8_t {
  kStdin = 0x01,
  kStdout = 0x02,
  kStderr = 0x03,
  kResize = 0x04,
  kExit = 0x05,
  kError = 0x06,
  kStdinEof = 0x07,
};

/// A decoded frame. `data` holds the bytes of stdin/stdout/stderr and the text of error;
/// `cols`/`rows` are set for resize, `exit_status` for exit.
struct Frame {
  FrameType type = FrameType::kStdout;
  std::string data;
  uint16_t cols = 0;
  uint16_t rows = 0;
  int32_t exit_status = 0;
};

/// Encodes a data-carrying frame (stdin, stdout, stderr, error) or stdin-eof (no payload).
std::string EncodeData(FrameType type, std::string_view data);
/// Encodes a resize frame: 0x04, cols and rows as 16-bit big endian.
std::string EncodeResize(uint16_t cols, uint16_t rows);
/// Encodes an exit frame: 0x05, `status` as 32-bit big endian two's complement.
std::string EncodeExit(int32_t status);

/// Decodes one message. Errors: InvalidArgument for an empty message, an unknown type, a
/// resize that is not 4 payload bytes (or has a zero dimension), an exit that is not 4,
/// a stdin-eof with payload.
StatusOr<Frame> DecodeFrame(std::string_view message);

/// The value of query parameter `name` in `query` (the part after '?'), decoded by
/// hf::ParseQuery (clients encode with hf::UriEncode, as SigV4 signs); nullopt when absent.
/// Errors: InvalidArgument for a malformed escape anywhere in `query` or a repeated `name`.
StatusOr<std::optional<std::string>> QueryParam(std::string_view query, std::string_view name);

}  // namespace hf::session
