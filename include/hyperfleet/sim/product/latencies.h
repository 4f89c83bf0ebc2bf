#pragma once
// What the product engine's simulated provider, agents and Slurm take, as inputs (never
// constants in the code). Defaults are fitted to what bench/resiliency_bench.py measured on
// real local nodes (bench/README.md "resiliency_bench.py", 2026-11-30: dead node detected
// 0.6 s, replacement idle 5.4-6.6 s, job running again 9.6-10.7 s after detection, medians)
// and docs/resiliency.md (controller reboot 9-12 s). Each default says how it was split out of
// those totals. Durations are hf_sim Dists: minutes, lognormal of the given mean and cv.
#include "hyperfleet/sim/fguf.h"

namespace hf::sim::product {

/// Seconds as minutes, for the defaults below.
constexpr double Sec(double s) { return s / 60.0; }

/// Latencies of the simulated world around the real controller.
struct ProductLatencies {
  /// A stopped machine until the provider reports its instance failed. Detection measured
  /// 0.6 s median = this + the wait for the controller's next 1 s liveness pass (0.5 s mean).
  Dist dead_visible{Sec(0.1), 0.5};
  /// A fault until the agent's health verdict reaches the control plane: one check round per
  /// heartbeat interval (1 s; docs/nodes.md "Health checks"), so about one interval. Derived,
  /// not measured.
  Dist health_report{Sec(1.0), 0.5};
  /// terminateNow() (kill, no clean shutdown) until the provider no longer lists the instance.
  Dist kill{Sec(0.5), 0.3};
  /// terminate() (clean shutdown) until it is gone.
  Dist terminate{Sec(3.0), 0.3};
  /// launch() on a free machine until the instance runs (booted). With agent_start and
  /// lifecycle, the "replacement idle" total of 5.6 s (kill 0.5 + boot 2.5 + agent 0.5 +
  /// scripts 2.0 + passes 0.1).
  Dist boot{Sec(2.5), 0.2};
  /// Booted until the agent reports the lifecycle scripts Started (slurmd runs from here).
  Dist agent_start{Sec(0.5), 0.3};
  /// Started until Succeeded (the example scripts end once Slurm sees the node idle).
  Dist lifecycle{Sec(2.0), 0.2};
  /// reboot()/powerCycle() until the instance has booted again: 9-12 s measured for a
  /// controller reboot (docs/resiliency.md).
  Dist reboot{Sec(10.0), 0.15};
  /// Marks published until the controller node's agent applied them: the next heartbeat
  /// (1 s period, 0.5 s mean) plus scontrol.
  Dist slurm_mark{Sec(0.6), 0.5};
  /// Slurm has the job's nodes up until the requeued job starts (StartTime): job running
  /// again 10.0 s after detection - mark 0.6 s - replacement idle 5.6 s ≈ 3.8 s.
  Dist slurm_start{Sec(3.8), 0.3};
};

}  // namespace hf::sim::product
