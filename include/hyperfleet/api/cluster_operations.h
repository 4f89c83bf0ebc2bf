#pragma once
// The HyperPod cluster operations of the SageMaker API, on the store. Each operation takes a
// request body that already passed the service model's validation and returns the response
// body, or a Status that errors.h maps to the AWS error. Operations write the store
// synchronously (acknowledged = durable) and leave the rest to the controllers, which they
// notify through the change sink. The implementation is split by concern: src/api/
// cluster_crud.cc, cluster_update.cc (UpdateCluster's declarative replace), cluster_nodes.cc,
// node_recovery.cc, cluster_events.cc, and cluster_rules.cc (the rules on specifications).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/json_service.h"
#include "hyperfleet/api/tag_operations.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/store/store.h"

namespace hf::api {

/// Where the control plane lives and what it allows.
struct ApiConfig {
  std::string region = "us-west-2";
  std::string account_id = "123456789012";
  int max_clusters = 100;                 ///< ResourceLimitExceeded beyond this
  int max_instances_per_cluster = 10000;  ///< ResourceLimitExceeded beyond this (all groups)
  /// Whether new instances of an instance type would run on registered ssh machines
  /// (`--provider ssh`, or `local,ssh` with a machine of that type). The ssh provider runs
  /// no EKS nodes, so Orchestrator.Eks groups that would launch there are refused. Errors:
  /// the machine registry's. Unset: no type does (fake and local providers).
  std::function<StatusOr<bool>(std::string_view instance_type)> runs_on_ssh;
};

/// The cluster operations, an OperationSet of the SageMaker API. Thread-safe (state lives in
/// the store).
class ClusterOperations final : public OperationSet {
 public:
  /// Called with a cluster id after every accepted write to that cluster.
  using ChangeSink = std::function<void(const std::string& cluster_id)>;

  ClusterOperations(store::Store& store, const model::ServiceModel& model, const Clock& clock,
                    IdSource& ids, ApiConfig config, ChangeSink on_change);

  /// True for the operations implemented here (e.g. "CreateCluster").
  bool implements(std::string_view operation) const override;
  /// Runs `operation` on a validated request body. Errors: Unimplemented for operations not
  /// implemented here; otherwise those documented per operation in docs/compatibility.md.
  StatusOr<nlohmann::json> call(std::string_view operation,
                                const nlohmann::json& request) override;
  /// ListClusterNodes serialized without the JSON tree (its pages are the API's largest
  /// replies: listClusterNodesText); nullopt for every other operation.
  std::optional<StatusOr<std::string>> callSerialized(std::string_view operation,
                                                      const nlohmann::json& request) override;
  /// The model given to the constructor (validation, pruning and DescribeCluster's shapes).
  const model::ServiceModel& model() const override { return model_; }

 // The operations (public so that one dispatch table can name them; call() is the entry).
  using Json = nlohmann::json;
  StatusOr<Json> createCluster(const Json& in);
  StatusOr<Json> describeCluster(const Json& in);
  StatusOr<Json> listClusters(const Json& in);
  StatusOr<Json> updateCluster(const Json& in);
  StatusOr<Json> deleteCluster(const Json& in);
  StatusOr<Json> listClusterNodes(const Json& in);
  /// listClusterNodes' response as text, byte for byte its pruned tree dumped.
  StatusOr<std::string> listClusterNodesText(const Json& in);
  StatusOr<Json> describeClusterNode(const Json& in);
  StatusOr<Json> batchDeleteClusterNodes(const Json& in);
  StatusOr<Json> batchAddClusterNodes(const Json& in);
  StatusOr<Json> batchRebootClusterNodes(const Json& in);
  StatusOr<Json> batchReplaceClusterNodes(const Json& in);
  StatusOr<Json> listClusterEvents(const Json& in);
  StatusOr<Json> describeClusterEvent(const Json& in);
  StatusOr<Json> addTags(const Json& in);
  StatusOr<Json> listTags(const Json& in);
  StatusOr<Json> deleteTags(const Json& in);

 private:
  /// CreateCluster's Orchestrator.Eks (an EksOrchestratorConfig): HyperPod's checks on the EKS
  /// cluster its ClusterArn names (CheckEksAttachment, against the store's EKS clusters); then
  /// a ValidationException all the same, since EKS-orchestrated nodes do not run yet.
  Status checkEksOrchestrator(const nlohmann::json& eks) const;
  /// BatchRebootClusterNodes / BatchReplaceClusterNodes: records the node recovery
  /// (Node::recovery, `action` "Reboot" or "Replace") on each Running or Failure node of an
  /// InService or Updating cluster; the controller carries it out (a Failure node without
  /// a clean shutdown: killed, or power-cycled). Per-node errors (the model's
  /// BatchReboot/ReplaceClusterNodesErrorCode): InstanceIdNotFound, InvalidInstanceStatus
  /// (Pending or ShuttingDown: a change is under way), InstanceIdInUse (a recovery is
  /// already under way). Errors:
  /// ValidationException without NodeIds and NodeLogicalIds; ConflictException for a
  /// cluster in another status; ResourceNotFound.
  StatusOr<Json> requestRecovery(const Json& in, const std::string& action);

  /// Runs read-modify-write `fn` on a cluster, retrying when a controller wrote the cluster
  /// between the read and the commit (compare-and-swap lost).
  StatusOr<Json> mutateCluster(const std::string& name_or_arn,
                               const std::function<StatusOr<Json>(model::Cluster&,
                                                                  store::WriteBatch&)>& fn);
  Json clusterDetails(const model::Cluster& c,
                      const std::map<std::string, store::GroupCounts>& counts) const;
  /// The page of nodes a ListClusterNodes request asks for.
  StatusOr<store::Page<model::Node>> nodePage(const Json& in);
  Json nodeSummary(const model::Node& n) const;
  Json nodeDetails(const model::Node& n) const;
  Json eventSummary(const model::Cluster& c, const model::Event& e, bool details) const;
  /// Keeps the members of `value` that output shape `shape` defines.
  Json filterToShape(const Json& value, std::string_view shape) const;
  model::Event event(const model::Cluster& c, std::string resource_type, std::string level,
                     std::string description, std::string group = "") const;
  /// An Info event about node `n` of cluster `c` (resource type Instance, its group and id).
  model::Event instanceEvent(const model::Cluster& c, const model::Node& n,
                             std::string description) const;

  store::Store& store_;
  const model::ServiceModel& model_;
  const Clock& clock_;
  IdSource& ids_;
  const ApiConfig config_;
  ChangeSink on_change_;
  TagOperations tags_;  ///< AddTags/ListTags/DeleteTags on every taggable HyperPod ARN
};

}  // namespace hf::api
