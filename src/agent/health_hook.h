#pragma once
// The health checks' part of the heartbeat (docs/nodes.md "Health checks"): a thread runs a
// round of checks (health.h) every interval, and every heartbeat carries the latest report
// as its "health"; the control plane's clock ("time") comes back for the clock check. Added
// when AgentOptions::health_checks is on; the NVML checks are part of the monitor.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "heartbeat.h"
#include "hyperfleet/agent/health.h"

namespace hf::agent {

class HealthHook final : public HeartbeatHook {
 public:
  /// Starts the checks' thread. `lifecycle_done`: units are neither checked nor restarted
  /// while the lifecycle scripts run (they start slurmd themselves).
  HealthHook(HealthMonitorOptions options, Duration interval,
             const std::atomic<bool>& lifecycle_done);
  ~HealthHook() override;

  std::string_view Name() const override { return "health"; }
  /// The latest report, waiting up to 2 s for the first one.
  void Fill(agentapi::HeartbeatRequest& request) override;
  /// Keeps the control plane's clock for the next round's clock check.
  void Take(const agentapi::HeartbeatResponse& response) override;

 private:
  void Loop();

  HealthMonitor monitor_;
  const Duration interval_;
  const std::atomic<bool>& lifecycle_done_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  CheckInputs inputs_;  ///< of the next round
  std::optional<TimeSample> control_plane_time_;  ///< heartbeat thread only
  std::optional<agentapi::HealthReport> report_;
  Severity last_verdict_ = Severity::kOk;  ///< checks' thread only
  std::thread thread_;
};

}  // namespace hf::agent
