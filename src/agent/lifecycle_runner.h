#pragma once
// The lifecycle scripts of one node, run as HyperPod runs them (docs/hyperpod-contract.md
// "Bring-up", "Results"): the bundle downloaded into "/tmp/<bucket>/<prefix>/", OnCreate then
// OnInitComplete executed there with their output streamed to the control plane (and kept
// in /var/log/provision/hyperfleet-lifecycle.log), one result reported. The result is
// recorded in /var/lib/hyperfleet-agent/lifecycle.json before it is reported, so that a
// restarted agent or a rebooted node never runs the scripts again (HyperPod: reboot, no
// re-run) and reports a result that was not acknowledged.
#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>

#include "control_plane_client.h"
#include "hyperfleet/agent/agent_options.h"
#include "hyperfleet/agent/script_runner.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"

namespace hf::agent {

class LogShipper;

/// The report of a script that ended as `outcome`: nullopt when it exited 0, else a Failed
/// report with reason "exit" (a status, a signal, or a spawn failure: 127 for ENOENT, else
/// 126) or "timeout" (after `timeout_seconds`). Pure; kStopped gives nullopt (nothing to
/// report).
std::optional<agentapi::LifecycleReport> ScriptFailure(const std::string& script,
                                                       const ScriptOutcome& outcome,
                                                       int64_t timeout_seconds);

class LifecycleRunner {
 public:
  /// `stop` ends a running script; `sleep` waits between report retries (false: stopped).
  LifecycleRunner(const AgentOptions& options, const Clock& clock, const std::atomic<bool>& stop,
                  ControlPlaneClient::Sleep sleep);
  ~LifecycleRunner();

  /// Does what `spec` asks (nothing when it does not ask to run): false when stopped before
  /// the result was acknowledged.
  bool Run(const agentapi::LifecycleSpec& spec);
  /// After Run(): whether the scripts have succeeded, in that run or (as recorded in the
  /// state file) in an earlier one. False when they failed, were stopped, or did not run.
  bool Succeeded() const { return succeeded_; }
  /// Appends `line` to the node's own log of the lifecycle.
  void AppendNodeLog(const std::string& line);
  /// Drops the output not sent yet, so that a stop does not wait for the control plane.
  /// Thread-safe; call after `stop` became true.
  void Abandon();

 private:
  /// Lists and downloads the bundle into `dir`: a Failed report on failure, nullopt on
  /// success or when stopped.
  std::optional<agentapi::LifecycleReport> DownloadBundle(const agentapi::LifecycleSpec& spec,
                                                          const std::string& dir);
  /// Runs `script` of the bundle in `dir`: nullopt on success, else a Failed report;
  /// `stopped` is set when the agent was stopped meanwhile.
  std::optional<agentapi::LifecycleReport> RunOne(const agentapi::LifecycleSpec& spec,
                                                  const std::string& dir,
                                                  const std::string& script, bool* stopped);
  /// Records the final result, reports it until acknowledged, and records the
  /// acknowledgement; false when stopped first.
  bool Finish(const agentapi::LifecycleReport& report);
  /// A recorded result to report again (or to stop at), when the agent ran before.
  std::optional<bool> Resume(const agentapi::LifecycleSpec& spec);
  void WriteRecord(const nlohmann::json& record);

  const AgentOptions& options_;
  const Clock& clock_;
  const std::atomic<bool>& stop_;
  ControlPlaneClient client_;
  std::ofstream node_log_;
  std::mutex mu_;
  LogShipper* shipper_ = nullptr;  ///< the running script's (guarded by mu_)
  bool succeeded_ = false;         ///< see Succeeded()
};

}  // namespace hf::agent
