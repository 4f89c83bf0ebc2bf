#pragma once
// The closed loop: C keep-alive connections, each sending a freshly signed request and
// waiting for the reply before sending the next, for one operation at one concurrency.
#include <cstdint>
#include <string>

#include "client.h"
#include "options.h"
#include "proc.h"

namespace api_bench {

enum class Op { kDescribeCluster, kListClusterNodes };

const char* OpName(Op op);

/// One cell of the table: an operation at a concurrency level.
struct CellResult {
  std::string op;
  int clients = 0;
  uint64_t requests = 0;
  double seconds = 0;
  double throughput = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  uint64_t errors = 0;
  uint64_t walks = 0;
  std::string first_error;
  Memory memory;
  CpuShare cpu;
};

/// Runs `op` with `clients` connections for o.warmup + o.seconds on cluster `cluster`
/// (ListClusterNodes walks must each see `expected_nodes`), measuring the last o.seconds.
CellResult RunCell(const Options& o, const Target& target, Op op, int clients,
                   const std::string& cluster, int expected_nodes, int server_pid);

}  // namespace api_bench
