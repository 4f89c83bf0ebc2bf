#pragma once
// The node agent (`hyperfleet agent`, hyperfleet-agent.service inside every node). It
// registers with the control plane's agent endpoint, lays out the node contract files,
// downloads and runs the lifecycle scripts as HyperPod does, streams their output, reports
// the result and then heartbeats. Protocol: docs/nodes.md "Agent protocol"; behaviour:
// docs/hyperpod-contract.md ("Bring-up", "Results").
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "hyperfleet/agent/agent_options.h"
#include "hyperfleet/agent/env_file.h"
#include "hyperfleet/agent/node_files.h"
#include "hyperfleet/agent/slurm_controller.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::agent {

class LifecycleRunner;

/// The agent. Run() blocks; Stop() may be called from any thread (e.g. a signal thread).
class Agent {
 public:
  explicit Agent(AgentOptions options, const Clock* clock = nullptr);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Registers (retrying until it succeeds or Stop()), writes the node files, creates
  /// /opt/sagemaker_cluster, starts heartbeating, waits while the control plane holds the
  /// scripts back (controller first), runs the lifecycle scripts when the control plane asks
  /// and no result is recorded in /var/lib/hyperfleet-agent/lifecycle.json, reports the
  /// result (retrying until acknowledged), starts the register response's start_units (after
  /// scripts that succeeded, or when none were to run; see AgentOptions::start_units), then
  /// heartbeats until Stop() (or returns, with `once`). A node file that cannot be written is logged, not fatal (the scripts then
  /// fail visibly). Errors: Cancelled when stopped before registering, or (with `once`)
  /// before the lifecycle result was acknowledged.
  Status Run();
  /// Asks Run() to return soon; a running script is killed (its result is not reported,
  /// and the next agent reports it as interrupted).
  void Stop();

 private:
  struct Context;  // what one Run() learns, step by step
  // Run()'s steps, in order (agent.cc).
  Status StartImds(Context& ctx);
  Status Register(Context& ctx);
  Status WriteFiles(Context& ctx);
  Status StartHeartbeat(Context& ctx);
  Status WaitForTurn(Context& ctx);
  Status RunLifecycle(Context& ctx);
  Status StartUnits(Context& ctx);
  bool SleepFor(std::chrono::milliseconds d);  // false when stopped

  AgentOptions options_;
  const Clock* clock_;
  std::atomic<bool> stop_{false};
  /// The lifecycle scripts are over (or never ran): the health checks may restart units,
  /// and the Slurm controller reports and applies.
  std::atomic<bool> lifecycle_done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<LifecycleRunner> lifecycle_;  ///< Stop() abandons its output
};

}  // namespace hf::agent
