#pragma once
// HyperPod's rules on the cluster specifications of CreateCluster and UpdateCluster that the
// service model cannot express (private to src/api). Pure: a request in, a Status or a value
// out. Errors are InvalidArgument (ValidationException) naming the group and its place
// ('instanceGroups.N.member', the model's validation wording).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"

namespace hf::api {

/// Members of the CreateCluster request kept as the cluster's spec (the rest is typed).
inline constexpr const char* kSpecMembers[] = {
    "VpcConfig",          "Orchestrator",   "NodeRecovery",  "TieredStorageConfig",
    "NodeProvisioningMode", "ClusterRole",  "AutoScaling",   "RestrictedInstanceGroups",
    "RestrictedInstanceGroupsConfig"};
/// Members UpdateCluster may change in place.
inline constexpr const char* kUpdatableMembers[] = {
    "NodeRecovery", "TieredStorageConfig", "NodeProvisioningMode", "ClusterRole",
    "AutoScaling",  "Orchestrator",        "RestrictedInstanceGroups",
    "RestrictedInstanceGroupsConfig"};

/// The internal group of a (validated) ClusterInstanceGroupSpecification. With
/// InstanceRequirements (flexible instance types) the group runs the first type listed, and
/// its spec records it as InstanceType.
model::InstanceGroup GroupFromSpec(const nlohmann::json& spec);

/// The rules on a list of ClusterInstanceGroupSpecification: unique InstanceGroupNames,
/// exactly one of InstanceType and InstanceRequirements (which lists at least one type), a
/// LifeCycleConfig with SourceS3Uri and OnCreate, MinInstanceCount <= InstanceCount.
Status CheckGroupSpecs(const nlohmann::json& groups);

/// The Orchestrator rules: at most one of Eks and Slurm, and Slurm (or none) only: EKS waits
/// for Kubernetes support.
Status CheckOrchestrator(const nlohmann::json& request);

/// The instances `groups` ask for in all (their target counts).
int TotalInstances(const std::vector<model::InstanceGroup>& groups);

}  // namespace hf::api
