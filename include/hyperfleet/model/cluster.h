#pragma once
// Plain value types of the cluster domain. Status strings are the service model's enum
// values (ClusterStatus, InstanceGroupStatus, ClusterEventLevel, ClusterEventResourceType)
// so that they go to the wire unchanged; a node's status and state are typed
// (node_state.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/model/node_state.h"

namespace hf::model {

/// ClusterStatus values (service model enum).
namespace cluster_status {
inline constexpr const char* kCreating = "Creating";
inline constexpr const char* kInService = "InService";
inline constexpr const char* kUpdating = "Updating";
inline constexpr const char* kDeleting = "Deleting";
inline constexpr const char* kFailed = "Failed";
inline constexpr const char* kRollingBack = "RollingBack";
inline constexpr const char* kSystemUpdating = "SystemUpdating";
}  // namespace cluster_status

/// Where a node's lifecycle scripts are (LcsExecutionState values of the service model's
/// InstanceMetadata, plus "" for "not started").
namespace lifecycle_state {
inline constexpr const char* kNone = "";
/// Internal, never on the wire: the agent registered and the scripts wait their turn
/// (controller first).
inline constexpr const char* kWaiting = "Waiting";
inline constexpr const char* kStarted = "Started";
inline constexpr const char* kSucceeded = "Succeeded";
inline constexpr const char* kFailed = "Failed";
}  // namespace lifecycle_state

/// One instance group as the user declared it (a ClusterInstanceGroupSpecification).
struct InstanceGroup {
  std::string name;           ///< InstanceGroupName
  std::string instance_type;  ///< InstanceType, e.g. "ml.c5.xlarge" (may be empty)
  int target_count = 0;       ///< InstanceCount
  nlohmann::json spec;        ///< the specification exactly as accepted (validated)
};

/// A cluster: the user's declaration plus the status the controllers maintain.
/// `revision` is the store revision of the last write (compare-and-swap token).
struct Cluster {
  std::string id;    ///< 12 lowercase alphanumerics
  std::string name;  ///< ClusterName
  std::string arn;   ///< arn:aws:sagemaker:<region>:<account>:cluster/<id>
  std::string status = cluster_status::kCreating;
  std::string failure_message;
  SystemTime creation_time{};
  /// Top-level members of the create request other than ClusterName, InstanceGroups and
  /// Tags (Orchestrator, NodeRecovery, VpcConfig, ...), as accepted and later updated.
  nlohmann::json spec = nlohmann::json::object();
  std::vector<InstanceGroup> groups;
  /// Groups named in InstanceGroupsToDelete whose nodes are still being removed.
  std::vector<std::string> groups_deleting;
  int64_t revision = 0;

  /// The group named `name`, or nullptr.
  const InstanceGroup* group(const std::string& name) const;
  /// True for NodeProvisioningMode=Continuous (failed instances are retried, the cluster
  /// stays InService).
  bool continuous() const;
  /// With Orchestrator.Eks: the EKS cluster's name (the end of Orchestrator.Eks.ClusterArn
  /// "arn:aws:eks:<region>:<account>:cluster/<name>", checked by CreateCluster); "" for a
  /// Slurm cluster.
  std::string eksClusterName() const;
};

/// HyperPod's health label on the Nodes of EKS-orchestrated clusters, and its values
/// (HyperPod's EKS resiliency docs, "node labels").
namespace node_health {
inline constexpr const char* kLabel = "sagemaker.amazonaws.com/node-health-status";
inline constexpr const char* kSchedulable = "Schedulable";
/// Under deep health checks (and, since they do not run here yet, after joining with
/// OnStartDeepHealthChecks).
inline constexpr const char* kUnschedulable = "Unschedulable";
inline constexpr const char* kPendingReplacement = "UnschedulablePendingReplacement";
inline constexpr const char* kPendingReboot = "UnschedulablePendingReboot";
}  // namespace node_health

/// One instance of a cluster (a ClusterNodeSummary/Details on the wire).
struct Node {
  std::string cluster_id;
  std::string instance_id;  ///< i- + 17 hex
  std::string logical_id;   ///< NodeLogicalId, stable for the node's life
  std::string group;        ///< InstanceGroupName
  std::string instance_type;
  InstanceStatus status = InstanceStatus::kPending;
  std::string message;  ///< InstanceStatus.Message
  SystemTime launch_time{};
  std::string private_ip;        ///< PrivatePrimaryIp, empty until known
  std::string hostname;          ///< PrivateDnsHostname, empty until known
  nlohmann::json lifecycle;      ///< LifeCycleConfig the node was launched with
  /// Members of ClusterNodeDetails the node took from its group's spec at launch
  /// (NodeSpecMembers: ThreadsPerCore, InstanceStorageConfigs, OverrideVpcConfig), as the
  /// model's JSON; DescribeClusterNode returns them.
  nlohmann::json spec_extras = nlohmann::json::object();
  /// Lifecycle scripts as the node's agent reported them (lifecycle_state::*), and the
  /// failure's explanation; only providers that run agents fill these.
  std::string lifecycle_state;
  std::string lifecycle_message;
  /// On a Slurm controller node: the NodeName= names of the slurm.conf its agent has applied
  /// (written and reloaded), which other nodes wait to find their own in (controller first,
  /// agentapi/lifecycle_gate.h); empty elsewhere and until the agent registered.
  std::vector<std::string> slurm_conf_nodes;
  /// A node recovery asked for and not finished; none when none.
  std::optional<NodeRecoveryRequest> recovery;
  /// The planner's progress on `recovery` (empty while none).
  RecoveryProgress recovery_progress;
  /// A fault the control plane detected and is not recovering from; none when none.
  std::optional<NodeFault> fault;
  /// The planner's bookkeeping (replacements, retries, Slurm marks).
  PlannerMarks marks;
  /// When this instance's last node recovery (reboot) was requested; zero when never. Health
  /// reports and Slurm marks older than this are about the node before its recovery.
  SystemTime recovered_at{};
  int64_t revision = 0;
};

/// Whether `node`'s instance group asks for deep health checks when its nodes start (a
/// non-empty OnStartDeepHealthChecks in the group's spec).
bool HasOnStartDeepHealthChecks(const Cluster& cluster, const Node& node);

/// The Kubernetes Node name of a HyperPod instance on an EKS-orchestrated cluster:
/// "hyperpod-" + the instance id, e.g. "hyperpod-i-0123456789abcdef0" (as HyperPod names them).
std::string KubernetesNodeName(std::string_view instance_id);

/// The members of ClusterNodeDetails a node of group `g` takes from the group's spec
/// (ThreadsPerCore, InstanceStorageConfigs, OverrideVpcConfig), for Node::spec_extras.
nlohmann::json NodeSpecMembers(const InstanceGroup& g);

/// One cluster event (ClusterEventDetail on the wire).
struct Event {
  std::string id;
  std::string cluster_id;
  std::string group;        ///< empty for cluster-level events
  std::string instance_id;  ///< empty unless ResourceType is Instance
  std::string resource_type = "Cluster";  ///< Cluster | InstanceGroup | Instance
  std::string level = "Info";             ///< Info | Warn | Error
  SystemTime time{};
  std::string description;
  nlohmann::json metadata;  ///< EventDetails.EventMetadata (one member), or null
  int64_t seq = 0;          ///< store order (assigned on commit)
};

/// What an event says; MakeEvent() adds who, when and its id.
struct EventText {
  std::string resource_type = "Cluster";  ///< Cluster | InstanceGroup | Instance
  std::string level = "Info";             ///< Info | Warn | Error
  std::string description;
  std::string group;        ///< empty for cluster-level events
  std::string instance_id;  ///< empty unless about one instance
  nlohmann::json metadata;  ///< EventDetails.EventMetadata, or null
};

/// An event of cluster `cluster_id` at `time` with id `id` (a UUID, the model's EventId).
Event MakeEvent(std::string id, std::string cluster_id, SystemTime time, EventText text);

/// A resource tag.
struct Tag {
  std::string key;
  std::string value;
};

}  // namespace hf::model
