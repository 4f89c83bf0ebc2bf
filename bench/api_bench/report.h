#pragma once
// The benchmark's output: the table (or one JSON document) and the targets next to it.
#include <optional>
#include <string>
#include <vector>

#include "closed_loop.h"
#include "cluster_setup.h"
#include "micro_profile.h"
#include "options.h"
#include "proc.h"

namespace api_bench {

/// One target next to its figure.
struct Check {
  std::string what, value;
  std::optional<bool> pass;  // nullopt: not measured
};

/// The targets at kReferenceClients clients, and the server's RSS (largest after a cell,
/// and the peak); `max_rss` < 0: unknown.
std::vector<Check> Checks(const std::vector<CellResult>& cells, double max_rss, double max_hwm);

/// Everything measured, as the table on stdout.
void PrintTable(const Options& o, const ClusterInfo& cluster, const std::vector<CellResult>& cells,
                const std::vector<Check>& checks, const std::vector<MicroResult>& micro,
                const CpuShare& idle, const Memory& after_create);

/// Everything measured, as one JSON document (--json).
Json ToJson(const Options& o, const ClusterInfo& cluster, const std::vector<CellResult>& cells,
            const std::vector<Check>& checks, const std::vector<MicroResult>& micro,
            const CpuShare& idle, const Memory& after_create);

}  // namespace api_bench
