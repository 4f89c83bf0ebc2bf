#pragma once
// The product engine (issue 19): Hyperfleet's own strategy measured with Hyperfleet's own
// code in the loop. The real ClusterController (PlanCluster and its apply step) on the real
// store (SQLite in memory) runs under a simulated clock against SimProvider (machines drawn
// from a pool, completions as scheduled events) and SimAgents (liveness as state, lifecycle
// results recorded by the agent service's code, a Slurm controller that applies the planner's
// marks). One event queue in simulated time merges the simulator's events with the
// controller's own due times; passes that cannot change anything are skipped
// (pass_skipping.h). A training job of N nodes on top is fed by the FGUF-1 failure process and
// accounted by the JobLedger, so it reports the same RunResult as the parametric engine.
// Single-threaded; no sleeps, no threads.
#include <cstdint>
#include <memory>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/sim/failure_process.h"
#include "hyperfleet/sim/job_ledger.h"
#include "hyperfleet/sim/product/latencies.h"
#include "hyperfleet/sim/product/sim_agents.h"
#include "hyperfleet/sim/report.h"
#include "hyperfleet/sim/strategy.h"
#include "hyperfleet/store/store.h"

namespace hf::sim::product {

struct ProductOptions {
  ProductLatencies latencies;
  /// The application's share of a restart once Slurm started the job (init, checkpoint
  /// load): 30 s, the Hyperfleet strategy's assumption (strategy.cc), not a measurement.
  Dist app_restart{0.5, 0.0};
  /// False: run every pass the controller asks for (the reference driver of the tests).
  bool skip_passes = true;
};

/// What the engine did, for the benchmark.
struct ProductCounters {
  uint64_t events = 0;          ///< simulator events processed
  uint64_t passes_run = 0;      ///< controller passes (reconciles) run
  uint64_t passes_skipped = 0;  ///< passes the skip rule proved would change nothing
  uint64_t commits = 0;         ///< store commits (planner and agents)
  uint64_t decide_snapshots = 0;  ///< snapshots read to compute NextDecisionTime
  double pass_cpu_s = 0;        ///< thread CPU inside runOnce (load, plan, commit, calls)
  double commit_cpu_s = 0;      ///< thread CPU inside Store::commit
  double decide_cpu_s = 0;      ///< thread CPU reading snapshots for the skip rule
  int spare_exhaustions = 0;    ///< launches that found no free machine
};

/// One replication of Hyperfleet's strategy on the product engine.
class ProductEngine {
 public:
  /// `strategy` gives what the product does not do itself (assumed detection of hangs, SDC
  /// and job crashes, checkpoints, repair's deep check); `spares` idle worker nodes are kept
  /// in the cluster beyond the job's N (Slurm-level hot spares); the rest of the fleet is the
  /// provider's machine pool. Throws std::invalid_argument when job + spares > fleet.
  ProductEngine(const FgufParams& params, const Strategy& strategy, int spares, uint64_t seed,
                ProductOptions options = {});
  ~ProductEngine();

  /// Creates the cluster (controller + workers) and drives it until it is InService with
  /// every worker up in Slurm and the job running; that instant is the run's minute 0.
  /// Errors: the store's; DeadlineExceeded when it does not settle within an hour.
  Status bringUp();
  /// Plays the failure process to the horizon and returns the replication's result.
  RunResult run();

  // For tests.
  /// Handles failure-process event `e` now (its t_min is ignored).
  void inject(const FleetEvent& e);
  /// Drives the simulation (events and passes) for `d` of simulated time.
  void runFor(Duration d);
  SystemTime now() const;
  double nowMin() const;  ///< minutes since the job started
  store::Store& store();
  const std::string& clusterId() const;
  const JobLedger& ledger() const;
  const ProductCounters& counters() const;
  SimProvider& provider();
  SimAgents& agents();
  /// Machine (failure-process node) of the job's k-th node (0 ≤ k < N), by hostname order.
  int jobMachine(int k) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// EngineFn for RunGrid: bringUp() and run() of a ProductEngine with default options.
RunResult RunProduct(const FgufParams& params, const Strategy& strategy, int spares,
                     uint64_t seed);

}  // namespace hf::sim::product
