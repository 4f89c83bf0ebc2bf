#pragma once
// The agent's heartbeat (docs/nodes.md "Agent protocol"): every interval it tells the control
// plane it is alive and which node files it has applied, and takes new files back. What else
// a heartbeat carries comes from hooks, Nomad's task-runner hooks in small: the health checks
// (health_hook.h) and the Slurm controller's duties (slurm_controller_hook.h), each added by
// configuration (agent.cc).
//
// Silence is how the control plane finds hung nodes: a heartbeat late by more than its
// unresponsive threshold gets a healthy node replaced. So hooks never block the heartbeat
// thread; their slow work (systemctl, sinfo, scontrol, reloads) runs on threads of their own.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "control_plane_client.h"
#include "hyperfleet/agent/agent_options.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// One part of the agent that takes part in heartbeats. Called on the heartbeat thread only.
class HeartbeatHook {
 public:
  virtual ~HeartbeatHook() = default;
  /// For logs.
  virtual std::string_view Name() const = 0;
  /// Adds this hook's members to the next heartbeat.
  virtual void Fill(agentapi::HeartbeatRequest& request) {}
  /// Takes a heartbeat's answer.
  virtual void Take(const agentapi::HeartbeatResponse& response) {}
  /// New node files arrived: false leaves them for a later answer (the hook is still busy
  /// with earlier ones; the control plane sends them until they are confirmed). Called
  /// before they are written.
  virtual bool ReadyForFiles() { return true; }
  /// The files of `revision` were written: true when they may be confirmed at once, false
  /// when the hook first has work to do and confirms them later (TakeConfirmed).
  virtual bool FilesWritten(int64_t revision, const std::vector<agentapi::NodeFile>& files) {
    return true;
  }
  /// A revision whose work finished since the last call, to confirm; nullopt when none.
  virtual std::optional<int64_t> TakeConfirmed() { return std::nullopt; }
};

/// The heartbeat loop.
class Heartbeat {
 public:
  /// Waits `interval` between heartbeats; false when the agent stopped meanwhile.
  using Sleep = std::function<bool(std::chrono::milliseconds)>;

  Heartbeat(const AgentOptions& options, const std::atomic<bool>& stop, Sleep sleep,
            std::vector<std::unique_ptr<HeartbeatHook>> hooks);

  /// Heartbeats every `heartbeat_seconds` (at least 1) until stopped, starting from files
  /// revision `files_revision` (the register response's). New files are written under
  /// options.root and confirmed in the next heartbeat, at once (not after an interval) so
  /// that the control plane sees them applied soon, but never twice in a row.
  void Run(int heartbeat_seconds, int64_t files_revision);

 private:
  /// Writes the answer's files; the revision to confirm now, if any.
  std::optional<int64_t> ApplyFiles(const agentapi::HeartbeatResponse& response,
                                    int64_t files_revision);

  const AgentOptions& options_;
  const std::atomic<bool>& stop_;
  const Sleep sleep_;
  std::vector<std::unique_ptr<HeartbeatHook>> hooks_;
  ControlPlaneClient client_;
};

}  // namespace hf::agent
