#pragma once
// UpdateCluster's declarative replace of a cluster's instance groups, decided without effects
// (private to src/api): the cluster as read and the request in, the groups it has afterwards
// and the events that tell it out. ClusterOperations::updateCluster draws the events' ids and
// times and commits.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"

namespace hf::api {

/// What an UpdateCluster request asks of the instance groups (validated, CheckGroupSpecs
/// passed).
struct GroupUpdateRequest {
  bool has_groups = false;                         ///< InstanceGroups given: the list is replaced
  nlohmann::json groups = nlohmann::json::array();  ///< InstanceGroups (specifications)
  std::vector<std::string> to_delete;              ///< InstanceGroupsToDelete
};

/// The instance groups after an UpdateCluster.
struct GroupUpdate {
  /// The cluster's groups afterwards: the kept ones in their order, then the added ones.
  std::vector<model::InstanceGroup> next;
  /// The groups whose deletion starts, sorted by name.
  std::vector<std::string> deleting;
  /// One InstanceGroup event per group whose target count changes and per added group, in
  /// that order, with its InstanceGroupScaling metadata.
  std::vector<model::EventText> events;
  /// Whether any group changes (count, spec, added, deleted): the cluster then goes Updating;
  /// otherwise only its settings change.
  bool groups_changed = false;
};

/// Applies `request` to the groups of `cluster` (InService). Rules, in this order (HyperPod's
/// UpdateCluster): each name in InstanceGroupsToDelete is a group of the cluster and not also
/// in InstanceGroups; with InstanceGroups given, every group is listed or named for deletion
/// (the list is replaced, not merged); a group's InstanceType never changes; a group still
/// being deleted cannot be added again yet; at most `max_instances` in all; some group (or
/// RestrictedInstanceGroups) is left. Errors: ValidationException (InvalidArgument) naming the
/// group, ConflictException (FailedPrecondition) for a group still being deleted,
/// ResourceLimitExceeded (ResourceExhausted) beyond `max_instances`.
StatusOr<GroupUpdate> PlanGroupUpdate(const model::Cluster& cluster,
                                      const GroupUpdateRequest& request, int max_instances);

}  // namespace hf::api
