#pragma once
// --profile: per-call costs, in this process, of the pieces a request goes through.
#include <string>
#include <vector>

#include "client.h"
#include "cluster_setup.h"

namespace api_bench {

struct MicroResult {
  std::string what;
  double us = 0;
};

/// SigV4 signing and verification, and JSON parse/dump of a request, a DescribeCluster
/// reply and a 100-node page (`cluster`'s samples), each in microseconds per call.
std::vector<MicroResult> MicroProfile(const Target& target, const ClusterInfo& cluster);

}  // namespace api_bench
