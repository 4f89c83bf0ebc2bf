// sim_parametric_bench: the fleet simulator's parametric engine (issue 19). Prints the CPU
// time of one 54-day FGUF-1 replication (2,000 of 2,048 nodes, every strategy, the full model)
// and of the full grid: 7 published strategies × 3 job sizes × 5 failure rates × 6 spare
// levels × --seeds seeds, on one core. Figures: bench/README.md.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "CLI/CLI.hpp"
#include "hyperfleet/sim/grid.h"
#include "hyperfleet/sim/parametric_engine.h"

using namespace hf::sim;

namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the fleet simulator's parametric engine (FGUF-1)"};
  int seeds = 20;
  int repeats = 50;
  app.add_option("--seeds", seeds, "replications per grid configuration")
      ->check(CLI::Range(1, 1000));
  app.add_option("--repeats", repeats, "single replications timed per strategy")
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);

  const FgufParams params;  // FGUF-1 defaults: lemons, fail-slow, correlated events, ...
  std::printf("one replication: 54 days, %d of %d nodes, r_f %.1f, 16 spares, full model\n",
              params.job_nodes, params.fleet_nodes, params.rate_per_1000_node_days);
  std::printf("%-28s %10s %10s %8s %8s\n", "strategy", "median us", "max us", "faults", "ETTR");
  for (const Strategy& s : AllStrategies()) {
    std::vector<double> us;
    RunResult last;
    for (int i = 0; i < repeats; ++i) {
      const double t0 = CpuSeconds();
      last = RunParametric(params, s, 16, static_cast<uint64_t>(i + 1));
      us.push_back((CpuSeconds() - t0) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::printf("%-28s %10.0f %10.0f %8d %8.4f\n", s.label.c_str(), us[us.size() / 2],
                us.back(), last.fault_events, last.ettr);
  }

  GridSpec grid;
  grid.strategies = PublishedStrategies();
  grid.job_nodes = {128, 512, 2000};
  grid.rates = {1.2, 2.34, 3.8, 6.5, 9.4};
  grid.spares = {0, 4, 8, 16, 32, 48};
  grid.seeds = seeds;
  const size_t runs = grid.strategies.size() * grid.job_nodes.size() * grid.rates.size() *
                      grid.spares.size() * static_cast<size_t>(seeds);
  const double t0 = CpuSeconds();
  const std::vector<Aggregate> rows = RunGrid(grid);
  const double cpu = CpuSeconds() - t0;
  std::printf("full grid: %zu configurations, %zu replications: %.2f s CPU (%.0f us each)\n",
              rows.size(), runs, cpu, cpu / static_cast<double>(runs) * 1e6);
  return 0;
}
