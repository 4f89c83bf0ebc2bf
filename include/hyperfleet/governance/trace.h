#pragma once
// Seeded trace generator and virtual-time discrete-event driver for the governance engine
// (tiers S, M, L: bench/README.md). Deterministic: the same TraceConfig gives the
// same trace, and the same trace the same decisions.
#include <cstdint>
#include <string>
#include <vector>

#include "hyperfleet/governance/engine.h"

namespace hf::governance {

/// Sizes of a generated trace (see the tiers below).
struct TraceConfig {
  uint64_t seed = 1;
  int teams = 20;
  int64_t nodes = 200;               ///< split 40/30/20/10 % over p5, p4d, trn1, c5
  int64_t workloads = 10'000;        ///< submitted over the trace (after the preload)
  int64_t preload_pending = 0;       ///< submitted at t = 0 (tier L)
  double offered_load = 1.3;         ///< node-seconds offered / node-seconds available
  bool fair_share = true;
  bool idle_resource_sharing = true;
  bool churn = true;                 ///< cancels, hourly quota/weight/activation changes
};
/// Tiers: S (CI: 20 teams, 200 nodes, 10k workloads), M (1,000 teams, 10k nodes, 100k
/// workloads), L (M plus 1,000,000 pending at t = 0).
TraceConfig TierS();
TraceConfig TierM();
TraceConfig TierL();

/// One event of a trace.
struct TraceEvent {
  enum Kind { kSubmit, kCancel, kUpsertQuota, kRemoveQuota };
  Kind kind = kSubmit;
  int64_t time_ms = 0;
  WorkloadSpec spec;        ///< kSubmit
  int64_t runtime_ms = 0;   ///< kSubmit: run time once admitted (restarts from 0 if preempted)
  uint64_t id = 0;          ///< kCancel (cancels only if still pending)
  TeamQuota quota;          ///< kUpsertQuota; kRemoveQuota uses quota.team
};

/// A generated trace: the cluster, the initial configuration and the events in time order.
struct Trace {
  std::vector<InstanceTypeCapacity> types;
  SchedulerPolicy policy;
  std::vector<TeamQuota> quotas;
  std::vector<TraceEvent> events;
};

/// Generates a trace (Zipf(1.1) quotas summing to 90% of each type, strategy, weight
/// and preemption mixes, gang sizes, 25% sub-instance jobs, 1% never-fit, log-normal run
/// times, Poisson arrivals at `offered_load`, churn).
Trace GenerateTrace(const TraceConfig& cfg);

/// Options of a simulation run.
struct SimOptions {
  int64_t cycle_period_ms = 1000;  ///< a cycle runs on each tick with at least one event
  bool check = true;               ///< run the invariant checker after every cycle
  int full_check_every = 1;        ///< the checker's whole-queue checks every N cycles
  bool keep_log = false;           ///< keep the decision log text (determinism tests)
};

/// Figures of a simulation run (what bench/README.md reports).
struct SimReport {
  int64_t cycles = 0;
  int64_t admissions = 0;
  int64_t preemptions = 0;
  int64_t preemptions_by_reason[3] = {0, 0, 0};  ///< by PreemptionReason
  int64_t never_fits = 0;
  int64_t decisions = 0;             ///< admissions + preemptions + never-fit
  int64_t considered = 0;            ///< pending workloads examined by the engine
  double engine_cpu_s = 0;           ///< CPU time inside RunCycle
  double submit_cpu_s = 0;           ///< CPU time inside Submit / Remove / quota calls
  std::vector<double> cycle_us;      ///< CPU µs of each cycle
  int64_t max_pending = 0;
  int64_t violations = 0;
  std::vector<std::string> violation_messages;
  double fairness_cv = 0;            ///< mean CV of weighted shares among borrowing teams
                                     ///< with pending demand, sampled every 10 min
  std::vector<double> reclaim_latency_s;  ///< submit→admit of jobs fitting unused nominal
  uint64_t log_hash = 0;             ///< FNV-1a of the decision log
  std::string log;                   ///< the decision log, when keep_log
  int64_t end_time_ms = 0;
};

/// Runs `trace` through a fresh engine in virtual time.
SimReport Simulate(const Trace& trace, const SimOptions& opt);

/// The `q`-quantile (0..1) of `v` (sorted copy); 0 when empty.
double Quantile(std::vector<double> v, double q);

}  // namespace hf::governance
