// ClusterOperations' entry points (the dispatch table, implements(), call()) and what its
// operations share: events and the compare-and-swap retry of mutateCluster(). The operations
// live by concern in cluster_crud.cc, cluster_update.cc, cluster_nodes.cc, node_recovery.cc
// and cluster_events.cc; the rules on specifications in cluster_rules.cc.
#include "hyperfleet/api/cluster_operations.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace hf::api {

using Json = nlohmann::json;

ClusterOperations::ClusterOperations(store::Store& store, const model::ServiceModel& model,
                                     const Clock& clock, IdSource& ids, ApiConfig config,
                                     ChangeSink on_change)
    : store_(store), model_(model), clock_(clock), ids_(ids), config_(std::move(config)),
      on_change_(std::move(on_change)), tags_(store) {}

namespace {

/// The operations implemented here: one table serves implements() and call().
using Handler = StatusOr<nlohmann::json> (ClusterOperations::*)(const nlohmann::json&);
const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const std::map<std::string, Handler, std::less<>> kHandlers = {
      {"CreateCluster", &ClusterOperations::createCluster},
      {"DescribeCluster", &ClusterOperations::describeCluster},
      {"ListClusters", &ClusterOperations::listClusters},
      {"UpdateCluster", &ClusterOperations::updateCluster},
      {"DeleteCluster", &ClusterOperations::deleteCluster},
      {"ListClusterNodes", &ClusterOperations::listClusterNodes},
      {"DescribeClusterNode", &ClusterOperations::describeClusterNode},
      {"BatchDeleteClusterNodes", &ClusterOperations::batchDeleteClusterNodes},
      {"BatchAddClusterNodes", &ClusterOperations::batchAddClusterNodes},
      {"BatchRebootClusterNodes", &ClusterOperations::batchRebootClusterNodes},
      {"BatchReplaceClusterNodes", &ClusterOperations::batchReplaceClusterNodes},
      {"ListClusterEvents", &ClusterOperations::listClusterEvents},
      {"DescribeClusterEvent", &ClusterOperations::describeClusterEvent},
      {"AddTags", &ClusterOperations::addTags},
      {"ListTags", &ClusterOperations::listTags},
      {"DeleteTags", &ClusterOperations::deleteTags},
  };
  return kHandlers;
}

}  // namespace

bool ClusterOperations::implements(std::string_view op) const {
  return Handlers().count(op) > 0;
}

StatusOr<nlohmann::json> ClusterOperations::call(std::string_view op, const Json& in) {
  auto it = Handlers().find(op);
  if (it == Handlers().end()) {
    return absl::UnimplementedError(
        absl::StrCat("Hyperfleet does not implement SageMaker.", std::string(op), " yet."));
  }
  return (this->*(it->second))(in);
}

std::optional<StatusOr<std::string>> ClusterOperations::callSerialized(std::string_view op,
                                                                       const Json& in) {
  if (op == "ListClusterNodes") return listClusterNodesText(in);
  return std::nullopt;
}

model::Event ClusterOperations::event(const model::Cluster& c, std::string resource_type,
                                      std::string level, std::string description,
                                      std::string group) const {
  return model::MakeEvent(ids_.eventId(), c.id, clock_.now(),
                          {std::move(resource_type), std::move(level), std::move(description),
                           std::move(group), "", nullptr});
}

model::Event ClusterOperations::instanceEvent(const model::Cluster& c, const model::Node& n,
                                              std::string description) const {
  return model::MakeEvent(ids_.eventId(), c.id, clock_.now(),
                          {"Instance", "Info", std::move(description), n.group, n.instance_id,
                           nullptr});
}

// ---- Read-modify-write ---------------------------------------------------------------------

StatusOr<nlohmann::json> ClusterOperations::mutateCluster(
    const std::string& name_or_arn,
    const std::function<StatusOr<Json>(model::Cluster&, store::WriteBatch&)>& fn) {
  // A controller may commit between our read and our write; the CAS catches it and we
  // re-run the mutation on fresh state. Bounded: controllers write a cluster rarely.
  for (int attempt = 0;; ++attempt) {
    HF_ASSIGN_OR_RETURN(auto c, store_.cluster(name_or_arn));
    const int64_t read_revision = c.revision;
    store::WriteBatch batch;
    HF_ASSIGN_OR_RETURN(Json out, fn(c, batch));
    if (batch.empty()) return out;
    for (auto& w : batch.clusters) {
      if (w.cluster.id == c.id) w.expected_revision = read_revision;
    }
    auto committed = store_.commit(batch);
    if (committed.ok()) {
      on_change_(c.id);
      return out;
    }
    if (!absl::IsFailedPrecondition(committed.status()) || attempt >= 20) {
      return committed.status();
    }
  }
}

// ---- Tags (every taggable ARN: tag_operations.cc) ---------------------------------------

StatusOr<nlohmann::json> ClusterOperations::addTags(const Json& in) { return tags_.addTags(in); }

StatusOr<nlohmann::json> ClusterOperations::listTags(const Json& in) {
  return tags_.listTags(in);
}

StatusOr<nlohmann::json> ClusterOperations::deleteTags(const Json& in) {
  return tags_.deleteTags(in);
}

}  // namespace hf::api
