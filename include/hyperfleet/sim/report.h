#pragma once
// What a run of the simulator reports (FGUF-1's outputs): one replication's RunResult, the
// Aggregate over replications (mean and 95 % Student-t interval), JSON and a terminal table.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/sim/job_ledger.h"
#include "hyperfleet/sim/strategy.h"

namespace hf::sim {

/// One replication (strategy, parameters, spares, seed).
struct RunResult {
  std::string strategy_id;
  int fleet_nodes = 0;
  int job_nodes = 0;
  int spares = 0;
  double rate_per_1000_node_days = 0;
  uint64_t seed = 0;
  double horizon_min = 0;
  double tau_min = 0;  ///< checkpoint interval used (work minutes)

  double ettr = 0;             ///< productive work / wall time of the job
  double fleet_goodput = 0;    ///< productive node-minutes / (fleet × horizon)
  double min_window_ettr = 0;  ///< minimum 1-hour sliding-window ETTR
  /// Loss breakdown, % of wall time, indexed by Loss; ettr·100 + Σ = 100.
  std::array<double, kLossCount> loss_pct{};

  int interruptions = 0;       ///< stops of the job (unexpected and planned)
  int job_faults = 0;          ///< unexpected faults that stopped or corrupted the job
  int planned = 0;             ///< planned interruptions
  double mttr_mean_min = 0;    ///< mean downtime per interruption
  double mttr_p95_min = 0;     ///< 95th percentile of downtime per interruption
  std::array<double, kStopClassCount> mttr_by_class_min{};  ///< mean per StopClass (0: none)
  std::array<int, kStopClassCount> interruptions_by_class{};
  int spare_exhaustions = 0;     ///< a node was needed and no hot spare was left
  int human_interventions = 0;
  /// Healthy nodes evicted with a hang's suspects (over-eviction). JSON "hang_overevicted";
  /// the member keeps its old name because the product engine sets it.
  int false_positive_evictions = 0;
  int healthy_quarantined = 0;   ///< quarantines of nodes that are not lemons (bad luck)
  int lemons_quarantined = 0;    ///< quarantines of real lemons (a lemon may be caught again)
  int straggler_evictions = 0;   ///< persistently slow nodes swapped out of the job
  int bad_returns = 0;           ///< repaired nodes that came back still faulty into service
  int correlated_events = 0;
  int fault_events = 0;  ///< unexpected faults in the fleet, bad returns aside (CRN check)
  double fault_history_hash = 0;  ///< Σ time × (node + 1) × (1 + cause) over those (CRN check)
  std::vector<std::string> assumptions;  ///< the strategy's assumed fields
};

/// Fills the job's figures of `r` (ETTR, fleet goodput, window minimum, losses, interruptions,
/// MTTR) from a finished ledger; `r`'s fleet_nodes, job_nodes and horizon_min must be set.
void FillFromLedger(const JobLedger& ledger, RunResult* r);
/// Fills what identifies a run in `r`: the strategy's id and assumptions, the fleet, job,
/// spares, rate, seed, horizon (minutes) and τ (Strategy::CheckpointFor). Both engines.
void FillRunIdentity(const FgufParams& params, const Strategy& strategy, int spares,
                     uint64_t seed, RunResult* r);

/// Mean with a 95 % confidence interval (Student t, n − 1 degrees of freedom).
struct Interval {
  double mean = 0;
  double lo = 0;
  double hi = 0;
};
/// Mean and 95 % interval of `values` (lo = hi = mean when fewer than 2).
Interval MeanInterval(const std::vector<double>& values);
/// Two-sided 95 % Student t quantile for `dof` degrees of freedom (≥ 1).
double StudentT95(int dof);

/// Replications of one configuration, summarised.
struct Aggregate {
  std::string strategy_id;
  std::string label;
  int fleet_nodes = 0;
  int job_nodes = 0;
  int spares = 0;
  double rate_per_1000_node_days = 0;
  int replications = 0;
  double tau_min = 0;
  Interval ettr, fleet_goodput, min_window_ettr, mttr_mean_min, mttr_p95_min, interruptions;
  std::array<Interval, kLossCount> loss_pct{};
  std::array<double, kStopClassCount> mttr_by_class_min{};  ///< mean over runs having that class
  double spare_exhaustions = 0;        ///< means per run
  double human_interventions = 0;
  double hang_overevicted = 0;     ///< RunResult::false_positive_evictions
  double healthy_quarantined = 0;
  double lemons_quarantined = 0;
  double bad_returns = 0;
  std::vector<std::string> assumptions;
};

/// Aggregates runs of one configuration (the first run's keys; `label` from the caller).
Aggregate AggregateRuns(const std::vector<RunResult>& runs, const std::string& label);

nlohmann::json ToJson(const RunResult& r);
nlohmann::json ToJson(const Aggregate& a);
/// A fixed-width terminal table, one row per aggregate: strategy, N, spares, rate, ETTR ± CI,
/// fleet goodput, min window ETTR, MTTR, the largest losses; assumptions listed under it.
std::string FormatTable(const std::vector<Aggregate>& rows);

}  // namespace hf::sim
