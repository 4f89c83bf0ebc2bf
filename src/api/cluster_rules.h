#pragma once
// HyperPod's rules on the cluster specifications of CreateCluster and UpdateCluster that the
// service model cannot express (private to src/api). Pure: a request in, a Status or a value
// out. Errors are InvalidArgument (ValidationException) naming the group and its place
// ('instanceGroups.N.member', the model's validation wording).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/store/eks_record.h"

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

/// The Orchestrator rules: when given, exactly one of Eks and Slurm (a null member counts as
/// absent); else a ValidationException.
Status CheckOrchestrator(const nlohmann::json& request);

/// UpdateCluster's Orchestrator: HyperPod never changes a cluster's orchestrator, but clients
/// (infrastructure-as-code tools) send the one the cluster has. Orchestrator.Eks is accepted
/// only on a cluster attached to that same ClusterArn, Orchestrator.Slurm only on a cluster
/// without Orchestrator.Eks; otherwise a ValidationException naming the member. Pure.
Status CheckOrchestratorKept(const model::Cluster& cluster, const nlohmann::json& request);

/// The name of the EKS cluster in `cluster_arn` when it is an EKS cluster ARN of `region` and
/// `account` ("arn:aws:eks:<region>:<account>:cluster/<name>"); nullopt otherwise.
std::optional<std::string> EksClusterNameOf(std::string_view cluster_arn, std::string_view region,
                                            std::string_view account);

/// HyperPod's checks on Orchestrator.Eks.ClusterArn, given the EKS cluster it names as the
/// store has it (nullopt: none): the cluster exists in this account and region and is ACTIVE
/// (CREATING: not yet; DELETING or FAILED: refused), and its access configuration's
/// authenticationMode is API or API_AND_CONFIG_MAP (HyperPod reaches the cluster through access
/// entries; CONFIG_MAP-only clusters are refused, as in HyperPod's EKS prerequisites). Every
/// error is a ValidationException naming Orchestrator.Eks.ClusterArn. Pure.
Status CheckEksAttachment(std::string_view cluster_arn,
                          const std::optional<store::EksCluster>& found);

/// The ssh provider runs no EKS nodes (no kubelet or containerd on its machines): for an
/// Orchestrator.Eks cluster, a ValidationException naming the first group of `groups` that
/// would launch instances (a target count above `before`'s for that group name, or a group
/// `before` lacks) of a type `runs_on_ssh` says runs on ssh machines, and its place
/// ('instanceGroups.N.member.instanceType', N counted in `groups`; or `place` when given, for
/// a caller whose request names the group elsewhere, as BatchAddClusterNodes' NodesToAdd
/// entries). OK when `runs_on_ssh` is unset. Errors of `runs_on_ssh` are returned as they are.
Status CheckEksPlacement(const std::vector<model::InstanceGroup>& groups,
                         const std::vector<model::InstanceGroup>& before,
                         const std::function<StatusOr<bool>(std::string_view)>& runs_on_ssh,
                         std::string_view place = {});

/// The instances `groups` ask for in all (their target counts).
int TotalInstances(const std::vector<model::InstanceGroup>& groups);

}  // namespace hf::api
