#include "hyperfleet/agentapi/node_records.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/agentapi/agent_service.h"
#include "hyperfleet/agentapi/protocol.h"

namespace hf::agentapi {
namespace {

namespace ls = model::lifecycle_state;

std::string LifecycleFailureMessage(const model::Cluster& c, const model::Node& n,
                                    const std::string& reason, const std::string& detail) {
  // HyperPod's wording, with what went wrong and where the output is.
  std::string head = reason == "timeout" ? "Lifecycle scripts execution timed out"
                                         : "Lifecycle scripts did not run successfully";
  return absl::StrCat(head, ": ", detail.empty() ? "no detail reported" : detail,
                      ". Ensure the scripts exist in the provided S3 path, are accessible, and "
                      "run without errors. See CloudWatch logs (log group ",
                      ClusterLogGroup(c), ", log stream ", LifecycleLogStream(n),
                      ") for lifecycle script execution details.");
}

}  // namespace

StatusOr<bool> UpdateNodeRecord(store::Store& store, const Clock& clock, IdSource& ids,
                                const std::string& cluster_id, const std::string& instance_id,
                                const NodeChange& change) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    HF_ASSIGN_OR_RETURN(model::Node node, store.node(cluster_id, instance_id));
    const int64_t revision = node.revision;
    std::vector<model::EventText> events;
    if (!change(node, events)) return false;
    store::WriteBatch batch;
    batch.nodes.push_back({node, revision, false});
    for (auto& e : events) {
      batch.events.push_back(model::MakeEvent(ids.eventId(), cluster_id, clock.now(), std::move(e)));
    }
    auto committed = store.commit(batch);
    if (committed.ok()) return true;
    if (!absl::IsFailedPrecondition(committed.status())) return committed.status();
  }
  return absl::UnavailableError("the node record kept changing; retry");
}

StatusOr<bool> RecordLifecycleResult(store::Store& store, const Clock& clock, IdSource& ids,
                                     const model::Cluster& cluster,
                                     const std::string& instance_id, const std::string& state,
                                     const std::string& reason, const std::string& detail) {
  return UpdateNodeRecord(
      store, clock, ids, cluster.id, instance_id,
      [&](model::Node& n, std::vector<model::EventText>& events) {
        if (n.lifecycle_state == state || n.lifecycle_state == ls::kSucceeded ||
            n.lifecycle_state == ls::kFailed) {
          return false;
        }
        n.lifecycle_state = state;
        if (state == kFailed) n.lifecycle_message = LifecycleFailureMessage(cluster, n, reason, detail);
        std::string description = absl::StrCat(
            "Instance lifecycle script execution for EC2InstanceId ", n.instance_id, " has ", state);
        if (state == kFailed && !detail.empty()) absl::StrAppend(&description, ": ", detail);
        events.push_back({"Instance", state == kFailed ? "Error" : "Info", std::move(description),
                          n.group, n.instance_id,
                          nlohmann::json{{"Instance",
                                          {{"LcsExecutionState", state},
                                           {"NodeLogicalId", n.logical_id}}}}});
        return true;
      });
}

}  // namespace hf::agentapi
