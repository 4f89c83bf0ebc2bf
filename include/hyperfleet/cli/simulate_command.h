#pragma once
// `hyperfleet simulate`: the fleet simulator's what-ifs on the terminal (docs/simulator.md).
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `hyperfleet simulate [--engine parametric|product] [--strategy ID,...|all]
/// [--nodes N] [--fleet F] [--spares S,...] [--rate R,...] [--days D] [--replications K]
/// [--seed X] [--no-lemons] [--no-fail-slow] [--hard-mix] [--grid] [--json] [--svg FILE]`:
/// FGUF-1 replications of each configuration, printed as the table of docs/simulator.md
/// (ETTR with 95 % intervals, fleet goodput, losses, MTTR, spare exhaustion) with the
/// assumptions used under it, or as JSON on stdout (--json); --svg writes the charts of ETTR
/// against spares and against failure rate. Bad input: "hyperfleet simulate: <message naming
/// the flag>" on stderr, exit 2.
void AddSimulateCommand(CLI::App& app);

}  // namespace hf::cli
