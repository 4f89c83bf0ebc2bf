#pragma once
// The server side of shell sessions: takes WebSocket upgrades of GET /hyperfleet/v1/session
// off the HTTP server (HttpServerOptions::wants_upgrade / on_upgrade), authenticates them
// with SigV4, resolves the target to a node and runs a shell inside it. Protocol:
// hyperfleet/session/protocol.h.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/session/protocol.h"

namespace hf::session {

/// Finds the node behind a session target. Implemented by the control plane (store +
/// Provider::nodeInitPid()); tests return a process of their own. Must be thread-safe.
class SessionTargets {
 public:
  virtual ~SessionTargets() = default;
  /// The host pid of the init of the node `target` names (its namespaces and cgroups are
  /// the node's). Errors: NotFound when the cluster, group or instance does not exist or the
  /// instance is not in that group; FailedPrecondition when the node exists but has no
  /// running init. Both become 400 TargetNotConnected with this status's message.
  virtual StatusOr<int> resolve(const SessionTarget& target) = 0;
};

/// How sessions run.
struct SessionServiceOptions {
  /// Accepted SigV4 scope: the server's region; services should be {"ssm"}.
  auth::SigV4Policy policy;
  /// Enters the node: `<nsenter> --target <pid> --all -- <shell...>`.
  std::string nsenter_path = "/usr/bin/nsenter";
  /// The shell inside the node, run as `<shell> -l` or `<shell> -lc <command>`.
  std::string shell = "/bin/bash";
  /// After a hangup (the client went away), how long the session's processes get before
  /// SIGKILL, in milliseconds.
  int hangup_grace_ms = 2000;
  /// Output queued for a slow client beyond this many bytes pauses reading the process.
  std::size_t max_queued_output = 1u << 20;
  /// Largest accepted client message, in bytes.
  std::size_t max_message_bytes = 1u << 20;
  /// Sessions open at once; further upgrades get 400 ThrottlingException.
  int max_sessions = 256;
  /// Join the node's cgroups (every hierarchy in /proc/<pid>/cgroup); off in tests that
  /// cannot write cgroups.
  bool join_cgroups = true;
};

/// Runs sessions, each on its own thread (its WebSocket, its process's pty or pipes and its
/// pidfd on a private io_context), so HTTP I/O threads never block on them.
class SessionService {
 public:
  /// `targets`, `secrets` and `clock` must outlive the service.
  SessionService(SessionTargets& targets, auth::SecretLookup secrets, const Clock& clock,
                 SessionServiceOptions options);
  /// Calls stop().
  ~SessionService();
  SessionService(const SessionService&) = delete;
  SessionService& operator=(const SessionService&) = delete;

  /// Sets `options.wants_upgrade` (path == kSessionPath) and `options.on_upgrade` to this
  /// service. The service must outlive the server, or be stopped first.
  void install(http::HttpServerOptions& options);

  /// Whether `request` is for the session endpoint (any method: non-upgrades get 400).
  bool wants(const http::HttpRequest& request) const;
  /// Takes over a connection (see HttpServerOptions::on_upgrade): returns at once; a thread
  /// answers errors or upgrades and runs the session.
  void accept(http::HttpRequest&& request, int fd, std::string buffered);

  /// Ends every session (hangs up their processes, closes their connections) and joins their
  /// threads; later accept() calls close their connection at once. Idempotent.
  void stop();

  /// Sessions running now (upgraded or being checked).
  int active() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hf::session
