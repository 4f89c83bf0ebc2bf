#pragma once
// The admission engine's configuration for one Slurm cluster (docs/governance.md "On
// Slurm"): from the stored ClusterSchedulerConfig and ComputeQuotas, the instance catalog
// and the nodes in Slurm's partitions. Pure: the caller reads the store.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hyperfleet/governance/engine.h"
#include "hyperfleet/governance/slurm/report.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::governance::slurm {

/// One cluster's governance in engine terms.
struct Config {
  SchedulerPolicy policy;
  std::vector<TeamQuota> quotas;              ///< one per live ComputeQuota with a team
  std::vector<InstanceTypeCapacity> capacity; ///< every catalogued type of a quota or a node
  std::map<std::string, int> class_weight;    ///< priority class name -> weight
  std::set<std::string, std::less<>> teams;   ///< governed accounts: the quotas' teams
  std::string key;  ///< changes whenever the policy, a quota or the capacity does
};

/// The configuration from `policies` (ClusterSchedulerConfigs: the first live one counts)
/// and `quotas` (ComputeQuotas; CreateFailed and Deleting ones, and those without a team,
/// are left out), as the API stored them, with `instances` (instance type -> nodes in
/// Slurm's partitions) of each type the catalog knows. Members missing from a stored body
/// take HyperPod's defaults (FairShare Enabled, IdleResourceSharing Disabled, Strategy
/// LendAndBorrow with BorrowLimit 50, PreemptTeamTasks LowerPriority, Enabled).
Config ConfigOf(const std::vector<model::SchedulerResource>& policies,
                const std::vector<model::SchedulerResource>& quotas,
                const model::InstanceCatalog& catalog,
                const std::map<std::string, int64_t>& instances);

/// Which instance type each partition of the cluster holds.
struct PartitionMap {
  std::map<std::string, std::string> type;     ///< partition -> its nodes' instance type
  std::map<std::string, std::string> problem;  ///< partition -> why it has no one type
  std::map<std::string, int64_t> instances;    ///< instance type -> nodes in any partition
  bool operator==(const PartitionMap&) const = default;
};

/// Slurm node name (the hostname up to its first '.') -> instance type, of the cluster's
/// nodes that have a hostname.
std::map<std::string, std::string> SlurmNodeTypes(const std::vector<model::Node>& nodes);

/// The partition map of Slurm's `partitions` whose nodes have the types `node_types`
/// (SlurmNodeTypes); nodes of no known type are not counted. A partition with no known node,
/// or with nodes of several types (quotas count one type), has a problem instead of a type.
PartitionMap PartitionsOf(const std::vector<ReportedPartition>& partitions,
                          const std::map<std::string, std::string>& node_types);

}  // namespace hf::governance::slurm
