#include "hyperfleet/sim/grid.h"

#include <algorithm>
#include <cmath>

#include "hyperfleet/sim/parametric_engine.h"

namespace hf::sim {

int GridFleetNodes(const GridSpec& spec, int job_nodes, int spares) {
  if (spec.fleet_nodes > 0) return spec.fleet_nodes;
  const int buffered = static_cast<int>(std::ceil(job_nodes * 2048.0 / 2000.0));
  return std::max(buffered, job_nodes + spares);
}

std::vector<Aggregate> RunGrid(const GridSpec& spec, const EngineFn& engine) {
  const EngineFn run = engine ? engine : EngineFn(RunParametric);
  std::vector<Aggregate> out;
  std::vector<RunResult> runs;
  for (const Strategy& strategy : spec.strategies) {
    for (int n : spec.job_nodes) {
      for (double rate : spec.rates) {
        for (int spares : spec.spares) {
          FgufParams p = spec.base;
          p.job_nodes = n;
          p.rate_per_1000_node_days = rate;
          p.fleet_nodes = GridFleetNodes(spec, n, spares);
          runs.clear();
          // Common random numbers: every strategy and spare level sees seeds first_seed...
          for (int i = 0; i < spec.seeds; ++i) {
            runs.push_back(run(p, strategy, spares, spec.first_seed + static_cast<uint64_t>(i)));
          }
          out.push_back(AggregateRuns(runs, strategy.label));
        }
      }
    }
  }
  return out;
}

}  // namespace hf::sim
