#pragma once
// `hyperfleet simulate`'s output beyond hf_sim's summary table: the model's assumptions, the
// parameters as JSON, the loss and recovery tables, and the charts (docs/simulator.md).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/sim/grid.h"
#include "hyperfleet/sim/report.h"

namespace hf::cli {

// FGUF-1's sweeps (docs/simulator.md "The grid"): job sizes of 1k, 4k and 16k GPUs, the
// published failure rates per 1,000 node-days, spare pools up to the 48 nodes F - N leaves.
inline const std::vector<int> kGridNodes = {128, 512, 2000};
inline const std::vector<double> kGridRates = {1.2, 2.34, 3.8, 6.5, 9.4};
inline const std::vector<int> kGridSpares = {0, 4, 8, 16, 32, 48};

/// A validated `hyperfleet simulate`: the grid to run and how it was asked for.
struct SimulateRun {
  std::string engine;    ///< "parametric" or "product"
  sim::EngineFn run_one;  ///< empty: RunGrid's default (the parametric engine)
  sim::GridSpec spec;
  bool spares_given = false;  ///< --spares on the command line (not a default, not --grid)
  bool rates_given = false;   ///< --rate likewise
  bool lemons = true, fail_slow = true, hard_mix = false;
  bool json = false;
  std::string svg;  ///< chart file; empty: none
};

/// "2,048".
std::string Thousands(long long v);

/// One line saying what was run: engine, replications, horizon, seeds, fleet rule.
std::string RunHeadline(const SimulateRun& r);

/// The model's assumptions as used (one line each, with its source); the strategies' own
/// assumed values are listed by sim::FormatTable.
std::vector<std::string> ModelAssumptions(const sim::FgufParams& p, bool hard_mix);

/// The run's parameters (grid, seeds, failure process) as JSON.
nlohmann::json ParamsJson(const SimulateRun& r);

/// FGUF-1 §5.5's outputs the summary table leaves out, one row per aggregate: the whole loss
/// breakdown (% of wall time) and recovery (interruptions, MTTR mean/p95 and per class,
/// spare-pool exhaustion, human interventions, false evictions, lemons, bad returns).
std::string DetailTables(const std::vector<sim::Aggregate>& rows);

/// The SVG of the two report charts: ETTR against spares (at the first --rate, else 3.8) and
/// against failure rate (at the first --spares, else 16), at the largest N. Sweeps not given
/// (a single value) are FGUF-1's; configurations missing from `rows` are run (parametric
/// engine only: the product engine's charts show what ran). Throws as sim::RunGrid.
std::string ChartsSvg(const SimulateRun& r, const std::vector<sim::Aggregate>& rows);

}  // namespace hf::cli
