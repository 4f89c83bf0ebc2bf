// sim_bench: one replication of Hyperfleet's strategy on the product engine (issue 19): the
// real controller and store under simulated time. Prints the job's figures and the engine's
// own: events processed, controller passes run and skipped, the planner's CPU per pass and
// the store's per commit at that size, and the wall time of the run.
#include <chrono>
#include <cstdio>
#include <ctime>

#include <CLI/CLI.hpp>

#include "hyperfleet/sim/product/product_engine.h"

int main(int argc, char** argv) {
  CLI::App app{"sim_bench: one product-engine replication of Hyperfleet's strategy"};
  hf::sim::FgufParams params;
  int spares = 16;
  uint64_t seed = 1;
  bool every_pass = false;
  app.add_option("--fleet", params.fleet_nodes, "fleet nodes")->capture_default_str();
  app.add_option("--nodes", params.job_nodes, "job nodes N")->capture_default_str();
  app.add_option("--spares", spares, "hot spares kept in the cluster")->capture_default_str();
  app.add_option("--days", params.horizon_days, "horizon in days")->capture_default_str();
  app.add_option("--rate", params.rate_per_1000_node_days, "failures per 1,000 node-days")
      ->capture_default_str();
  app.add_option("--seed", seed, "seed")->capture_default_str();
  app.add_flag("--every-pass", every_pass, "run every controller pass (no skip rule)");
  CLI11_PARSE(app, argc, argv);

  hf::sim::product::ProductOptions options;
  options.skip_passes = !every_pass;
  const auto wall0 = std::chrono::steady_clock::now();
  hf::sim::product::ProductEngine engine(params, hf::sim::HyperfleetStrategy(), spares, seed,
                                         options);
  hf::Status up = engine.bringUp();
  if (!up.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", up.ToString().c_str());
    return 1;
  }
  const auto wall1 = std::chrono::steady_clock::now();
  const hf::sim::product::ProductCounters at_start = engine.counters();
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  hf::sim::RunResult r = engine.run();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  const double cpu_run = static_cast<double>(c1.tv_sec - c0.tv_sec) +
                         1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
  const auto wall2 = std::chrono::steady_clock::now();
  const hf::sim::product::ProductCounters& c = engine.counters();
  const double bring_s = std::chrono::duration<double>(wall1 - wall0).count();
  const double run_s = std::chrono::duration<double>(wall2 - wall1).count();
  const uint64_t passes = c.passes_run - at_start.passes_run;
  const uint64_t commits = c.commits - at_start.commits;
  std::printf("product engine: fleet %d, N %d, spares %d, %.0f days, rate %.2f/1000 node-days, seed %llu\n",
              params.fleet_nodes, params.job_nodes, spares, params.horizon_days,
              params.rate_per_1000_node_days, static_cast<unsigned long long>(seed));
  std::printf("  ETTR %.4f  fleet goodput %.4f  interruptions %d  MTTR mean %.2f min  p95 %.2f min  tau %.2f min\n",
              r.ettr, r.fleet_goodput, r.interruptions, r.mttr_mean_min, r.mttr_p95_min, r.tau_min);
  std::printf("  bring-up %.2f s wall; run %.2f s wall, %.2f s CPU (this thread)\n", bring_s,
              run_s, cpu_run);
  std::printf("  run: events %llu, passes run %llu, skipped %llu, snapshots for the skip rule %llu, commits %llu, launches without a free machine %d\n",
              static_cast<unsigned long long>(c.events - at_start.events),
              static_cast<unsigned long long>(passes),
              static_cast<unsigned long long>(c.passes_skipped - at_start.passes_skipped),
              static_cast<unsigned long long>(c.decide_snapshots - at_start.decide_snapshots),
              static_cast<unsigned long long>(commits), c.spare_exhaustions);
  const double pass_cpu = c.pass_cpu_s - at_start.pass_cpu_s;
  const double commit_cpu = c.commit_cpu_s - at_start.commit_cpu_s;
  std::printf("  CPU: passes %.2f s (%.2f ms per pass, of which store commits %.2f s, %.3f ms per commit); skip-rule snapshots %.2f s\n",
              pass_cpu, passes ? 1e3 * pass_cpu / static_cast<double>(passes) : 0.0, commit_cpu,
              commits ? 1e3 * commit_cpu / static_cast<double>(commits) : 0.0,
              c.decide_cpu_s - at_start.decide_cpu_s);
  return 0;
}
