#pragma once
// The parametric engine: one FGUF-1 replication of a strategy, the recovery pipeline
// (detect, localize, decide, acquire a node from hot spares / idle fleet / repaired queue,
// restart, rework; faults during recovery extend it; repairs with bad returns), closed form
// between events (JobLedger). A 54-day 2,000-node run is about a thousand events.
#include <cstdint>

#include "hyperfleet/sim/fguf.h"
#include "hyperfleet/sim/report.h"
#include "hyperfleet/sim/strategy.h"

namespace hf::sim {

/// Runs one replication. `spares`: hot spares reserved for the job. The rest of the fleet
/// beyond job + spares is an idle buffer: a replacement comes from it (provision + deep check)
/// when no hot spare is left, and a spare taken into the job is replaced from it in the
/// background. Repaired nodes serve a waiting recovery, then the spares, then the buffer. Throws
/// std::invalid_argument when job_nodes + spares > fleet_nodes or a parameter is out of range.
RunResult RunParametric(const FgufParams& params, const Strategy& strategy, int spares,
                        uint64_t seed);

}  // namespace hf::sim
