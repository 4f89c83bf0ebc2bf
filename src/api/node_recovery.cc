// Node recovery on request: BatchRebootClusterNodes and BatchReplaceClusterNodes record a
// recovery on each node; the controller carries it out.
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster_request.h"
#include "hyperfleet/api/cluster_operations.h"

namespace hf::api {

using Json = nlohmann::json;
using cluster_request::BatchNodesResult;
using cluster_request::RuleViolation;
using cluster_request::Str;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
using Action = model::NodeRecoveryRequest::Action;

StatusOr<nlohmann::json> ClusterOperations::batchRebootClusterNodes(const Json& in) {
  return requestRecovery(in, "Reboot");
}

StatusOr<nlohmann::json> ClusterOperations::batchReplaceClusterNodes(const Json& in) {
  return requestRecovery(in, "Replace");
}

StatusOr<nlohmann::json> ClusterOperations::requestRecovery(const Json& in,
                                                            const std::string& action) {
  const auto ids = in.value("NodeIds", std::vector<std::string>{});
  const auto logical = in.value("NodeLogicalIds", std::vector<std::string>{});
  if (ids.empty() && logical.empty()) {
    return RuleViolation("Specify NodeIds or NodeLogicalIds (or both).");
  }
  const std::string verb = action == "Reboot" ? "reboot" : "replacement";
  const std::string api = absl::StrCat("Batch", action, "ClusterNodes");
  return mutateCluster(Str(in, "ClusterName"), [&](model::Cluster& c,
                                                   store::WriteBatch& batch) -> StatusOr<Json> {
    if (c.status != cs::kInService && c.status != cs::kUpdating) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Cluster ", c.name, " is ", c.status, "; nodes can be ",
          action == "Reboot" ? "rebooted" : "replaced", " while it is InService or Updating."));
    }
    Json ok_ids = Json::array(), failed = Json::array();
    Json ok_logical = Json::array(), failed_logical = Json::array();
    std::set<std::string> done;
    auto request = [&](const std::string& key, bool is_logical) {
      Json& fail_list = is_logical ? failed_logical : failed;
      const char* key_name = is_logical ? "NodeLogicalId" : "NodeId";
      auto fail = [&](const char* code, std::string message) {
        fail_list.push_back({{key_name, key}, {"ErrorCode", code}, {"Message", std::move(message)}});
      };
      auto n = store_.node(c.id, key);
      if (!n.ok() || (is_logical ? n->logical_id != key : n->instance_id != key)) {
        fail("InstanceIdNotFound",
             absl::StrCat("Node ", key, " not found in cluster ", c.name));
        return;
      }
      if (n->recovery || done.count(n->instance_id)) {
        const bool reboot = n->recovery ? n->recovery->action == Action::kReboot
                                        : action == "Reboot";
        fail("InstanceIdInUse", absl::StrCat("Node ", key, " already has a ",
                                             reboot ? "reboot" : "replacement", " in progress"));
        return;
      }
      // As on HyperPod, a failed node is what these operations are for; only nodes in the
      // middle of a change (Pending, ShuttingDown) must wait.
      const bool failed_node = n->status == is::kFailure;
      if (n->status != is::kRunning && !failed_node) {
        fail("InvalidInstanceStatus",
             absl::StrCat("Node ", key, " is ", model::ToString(n->status),
                          "; only Running or Failure nodes can be ",
                          action == "Reboot" ? "rebooted" : "replaced",
                          ". Wait for the change to finish."));
        return;
      }
      done.insert(n->instance_id);
      model::Node updated = *n;
      // A failed node cannot be asked to shut down or reboot: power-cycle or kill it.
      updated.recovery = model::NodeRecoveryRequest{
          action == "Reboot" ? Action::kReboot : Action::kReplace,
          absl::StrCat("requested by ", api), clock_.now(), /*hard=*/failed_node};
      // A reported fault (NodeRecovery None, a failed replacement waiting for its retry) is
      // answered by this request.
      updated.fault.reset();
      updated.status = is::kPending;
      updated.message = absl::StrCat(action == "Reboot" ? "Reboot" : "Replacement",
                                     " requested by ", api);
      batch.nodes.push_back({updated, n->revision, false});
      batch.events.push_back(instanceEvent(
          c, *n, absl::StrCat("Instance ", n->instance_id, " ", verb, " requested (", api, ")")));
      (is_logical ? ok_logical : ok_ids).push_back(key);
    };
    for (const auto& id : ids) request(id, false);
    for (const auto& id : logical) request(id, true);
    if (!batch.nodes.empty()) batch.clusters.push_back({c, c.revision, false});
    return BatchNodesResult(ok_ids, failed, ok_logical, failed_logical);
  });
}

}  // namespace hf::api
