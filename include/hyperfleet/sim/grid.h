#pragma once
// The grid runner: strategies × job sizes × failure rates × spare levels × seeds, with common
// random numbers (every strategy sees the same seeds), aggregated per configuration.
#include <cstdint>
#include <functional>
#include <vector>

#include "hyperfleet/sim/fguf.h"
#include "hyperfleet/sim/report.h"
#include "hyperfleet/sim/strategy.h"

namespace hf::sim {

/// Runs one replication; RunParametric by default, the product engine can plug in.
using EngineFn = std::function<RunResult(const FgufParams&, const Strategy&, int spares,
                                         uint64_t seed)>;

struct GridSpec {
  FgufParams base;                  ///< everything not swept
  std::vector<Strategy> strategies;
  std::vector<int> job_nodes{2000};
  std::vector<double> rates{3.8};   ///< per 1,000 node-days
  std::vector<int> spares{16};
  int seeds = 20;                   ///< replications per configuration: seeds first_seed ...
  uint64_t first_seed = 1;
  /// Fleet size; 0: max(⌈N · 2048 / 2000⌉, N + spares) (FGUF-1's 2.4 % buffer).
  int fleet_nodes = 0;
};

/// Fleet size for a job of `job_nodes` with `spares` under `spec` (see GridSpec::fleet_nodes).
int GridFleetNodes(const GridSpec& spec, int job_nodes, int spares);

/// Every configuration, in the order strategies × job_nodes × rates × spares.
std::vector<Aggregate> RunGrid(const GridSpec& spec, const EngineFn& engine = {});

}  // namespace hf::sim
