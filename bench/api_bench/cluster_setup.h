#pragma once
// The benchmark's cluster: created through CreateCluster (or reused), InService.
#include <string>

#include "client.h"
#include "options.h"

namespace api_bench {

struct ClusterInfo {
  std::string name;
  int nodes = 0;
  double create_seconds = -1;  // -1: reused
  double create_server_cpu_s = -1;
  bool ok = false;
  std::string describe_body, page_body;  // samples for --profile
};

/// Creates cluster o.cluster_name of o.nodes ml.c5.xlarge nodes in groups of at most
/// kMaxGroupSize (or reuses it when it exists), waits until it is InService (at most
/// o.create_timeout_s) and reads one DescribeCluster and one ListClusterNodes page.
/// `ok` is false (and the reason logged) when any of that failed.
ClusterInfo SetUpCluster(const Options& o, const Target& target);

}  // namespace api_bench
