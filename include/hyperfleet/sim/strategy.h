#pragma once
// FGUF-1's recovery strategies as data (docs/simulator.md "Strategies"): what each stage of the recovery pipeline costs
// (minutes), how checkpoints are taken, and how lemons and stragglers are handled.
#include <array>
#include <string>
#include <vector>

#include "hyperfleet/sim/fguf.h"
#include "hyperfleet/sim/job_ledger.h"

namespace hf::sim {

/// How the checkpoint interval τ is chosen.
enum class IntervalRule {
  kFixed,  ///< Strategy::checkpoint_interval_min
  kYoung,  ///< Young's τ* for the job's MTBF (N · fleet-average rate)
  kDaly,   ///< Daly's higher-order τ* for the job's MTBF
};

/// One recovery strategy. Latencies are Dists in minutes; `detect` is indexed by DetectClass.
struct Strategy {
  std::string id;     ///< short, ASCII: "A0", "A0t", "A1", "B1", "B1b", "B2", "C", "HF0", "HF"
  std::string label;  ///< for tables: "A0 manual ops", "B2 HyperPod checkpointless", ...

  std::array<Dist, kDetectClassCount> detect{};  ///< fault → job stopped and noticed
  Dist localize;          ///< find the node(s) at fault (not for D3: no node is at fault)
  int hang_evict_nodes = 1;  ///< D4: nodes evicted to clear a hang (over-eviction: a PP group)
  Dist swap;              ///< take a hot spare into the job
  Dist provision;         ///< no hot spare: bring an idle, not reserved fleet node
  /// Deep health check of a provisioned or repaired node before it serves (0: none). Runs
  /// on provisioning (lengthens the wait) and at the end of repair (a pipeline stage).
  double deep_check_min = 0;
  double deep_check_catch = 0;  ///< P(the deep check catches a bad return)
  Dist restart;           ///< scheduling + init + checkpoint load + first step
  double human_fix_min = 60;   ///< a person's fix when the cause needs one (assumption)

  double checkpoint_cost_min = 0;        ///< δ: blocking stall per checkpoint
  IntervalRule interval_rule = IntervalRule::kFixed;
  double checkpoint_interval_min = 60;   ///< τ when kFixed (work minutes between checkpoints)
  /// Async checkpoints: the checkpoint becomes durable only `persist_window_min` after its
  /// stall; a failure within that window loses the previous interval as well.
  double persist_window_min = 0;

  /// Lemon quarantine: a node with `quarantine_failures` failures within
  /// `quarantine_window_days` is taken out of service for the quarantine repair
  /// (FgufParams::quarantine_diagnosis, then a parts repair and the deep check).
  bool quarantine_lemons = false;
  int quarantine_failures = 2;
  double quarantine_window_days = 7;
  /// Straggler eviction: a persistently slow node in the job is swapped out this many
  /// minutes after it joins (when a node is available); < 0: never.
  double straggler_evict_min = -1;

  /// Fields that describe what the product does not do yet (or values not measured), so
  /// reports label them assumptions: e.g. "detect.D4", "quarantine_lemons".
  std::vector<std::string> assumptions;

  /// τ for a job of MTBF `mtbf_min` (minutes) under this strategy's rule.
  double IntervalFor(double mtbf_min) const;
  /// The job's checkpoints under `params`: τ (minutes) by IntervalFor at the job's MTBF
  /// (N · r_f; no failures: an MTBF of 10^12 min), at least 1e-3 min; δ and the persist
  /// window from this strategy. Both engines use it.
  CheckpointPolicy CheckpointFor(const FgufParams& params) const;
  /// Mean downtime of a D1 node replacement with a hot spare (detect + localize + swap +
  /// restart), minutes: the R of the closed forms.
  double MeanReplaceDowntime() const;
};

/// The published strategies, in this order: A0 manual ops (Slurm + NHC),
/// A0t manual tuned, A1 Llama-3-like automation, B1 HyperPod classic, B1b HyperPod per the
/// AWS cost blog, B2 HyperPod checkpointless, C the target. Totals per failure are calibrated
/// to about 210, 120, 10, 25, 40, 2 and 1 min; each value's source is beside it in strategy.cc.
std::vector<Strategy> PublishedStrategies();

/// Hyperfleet with its planned features ("HF", targets): as measured on real local nodes
/// (bench/resiliency_bench.py, bench/README.md):
/// dead node detected in 0.6 s, replacement idle 5.6 s, job running again 10 s after
/// detection. What Hyperfleet does not do yet (hang and SDC detection, network fault
/// detection, lemon quarantine, straggler eviction, deep health checks) and the application's
/// checkpointing are taken from C / B1 and listed in `assumptions`.
Strategy HyperfleetStrategy();

/// Hyperfleet as it is today ("HF0"): the measured figures above, and where Hyperfleet does
/// nothing yet, what happens without it: no lemon quarantine, straggler eviction or deep
/// checks; a hang or a fabric fault that leaves the node's agent talking ends only when the
/// application's collective timeout kills the job (NCCL's 10-min watchdog, then Slurm's
/// requeue); silent data corruption found as with HyperPod classic (4 h).
Strategy HyperfleetTodayStrategy();

/// PublishedStrategies() followed by HyperfleetTodayStrategy() and HyperfleetStrategy().
std::vector<Strategy> AllStrategies();

/// The strategy with this id from AllStrategies(); nullptr if none.
const Strategy* FindStrategy(const std::vector<Strategy>& strategies, const std::string& id);

}  // namespace hf::sim
