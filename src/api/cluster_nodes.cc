// The nodes of a cluster: ListClusterNodes, DescribeClusterNode, BatchDeleteClusterNodes
// and BatchAddClusterNodes.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster_request.h"
#include "cluster_rules.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/common/json_text.h"

namespace hf::api {

using Json = nlohmann::json;
using cluster_request::BatchNodesResult;
using cluster_request::CreatedQuery;
using cluster_request::RuleViolation;
using cluster_request::Str;
using cluster_request::WithNextToken;
namespace cs = model::cluster_status;
namespace is = model::instance_status;

// ---- Nodes --------------------------------------------------------------------------------

nlohmann::json ClusterOperations::nodeSummary(const model::Node& n) const {
  Json status = {{"Status", model::ToString(n.status)}};
  if (!n.message.empty()) status["Message"] = n.message;
  Json s = {{"InstanceGroupName", n.group},
            {"InstanceId", n.instance_id},
            {"NodeLogicalId", n.logical_id},
            {"InstanceType", n.instance_type},
            {"LaunchTime", ToEpochSeconds(n.launch_time)},
            {"InstanceStatus", status}};
  if (!n.hostname.empty()) s["PrivateDnsHostname"] = n.hostname;
  return s;
}

nlohmann::json ClusterOperations::nodeDetails(const model::Node& n) const {
  Json d = nodeSummary(n);
  if (n.lifecycle.is_object()) d["LifeCycleConfig"] = n.lifecycle;
  for (auto it = n.spec_extras.begin(); it != n.spec_extras.end(); ++it) d[it.key()] = it.value();
  if (!n.private_ip.empty()) d["PrivatePrimaryIp"] = n.private_ip;
  d["Placement"] = {{"AvailabilityZone", config_.region + "a"}};
  return d;
}

StatusOr<store::Page<model::Node>> ClusterOperations::nodePage(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  auto q = CreatedQuery<store::NodeQuery>(in);
  q.group_contains = Str(in, "InstanceGroupNameContains");
  return store_.listNodes(c.id, q);
}

StatusOr<nlohmann::json> ClusterOperations::listClusterNodes(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto page, nodePage(in));
  Json summaries = Json::array();
  for (const auto& n : page.items) summaries.push_back(nodeSummary(n));
  return WithNextToken({{"ClusterNodeSummaries", std::move(summaries)}}, page.next_token);
}

namespace {

/// nodeSummary(n) as JSON text: the same members, keys in the tree's (bytewise) order. The
/// keys are our own ASCII names, written as they are.
void AppendNodeSummary(std::string& out, const model::Node& n) {
  namespace jt = json_text;
  out += R"({"InstanceGroupName":)";
  jt::AppendString(out, n.group);
  out += R"(,"InstanceId":)";
  jt::AppendString(out, n.instance_id);
  out += R"(,"InstanceStatus":{)";
  if (!n.message.empty()) {
    out += R"("Message":)";
    jt::AppendString(out, n.message);
    out += ',';
  }
  out += R"("Status":)";
  jt::AppendString(out, model::ToString(n.status));
  out += R"(},"InstanceType":)";
  jt::AppendString(out, n.instance_type);
  out += R"(,"LaunchTime":)";
  jt::AppendNumber(out, ToEpochSeconds(n.launch_time));
  out += R"(,"NodeLogicalId":)";
  jt::AppendString(out, n.logical_id);
  if (!n.hostname.empty()) {
    out += R"(,"PrivateDnsHostname":)";
    jt::AppendString(out, n.hostname);
  }
  out += '}';
}

}  // namespace

// A 100-node page as a tree costs several times the rest of the request (building ~1,000
// small objects and maps, pruning, dumping, freeing); written directly it is one string.
StatusOr<std::string> ClusterOperations::listClusterNodesText(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto page, nodePage(in));
  std::string out;
  out.reserve(64 + 256 * page.items.size());
  out += R"({"ClusterNodeSummaries":[)";
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (i > 0) out += ',';
    AppendNodeSummary(out, page.items[i]);
  }
  out += ']';
  if (!page.next_token.empty()) {
    out += R"(,"NextToken":)";
    json_text::AppendString(out, page.next_token);
  }
  out += '}';
  return out;
}

StatusOr<nlohmann::json> ClusterOperations::describeClusterNode(const Json& in) {
  const std::string id = Str(in, "NodeId"), logical = Str(in, "NodeLogicalId");
  if (id.empty() == logical.empty()) {
    return RuleViolation("Specify exactly one of NodeId and NodeLogicalId.");
  }
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  auto n = store_.node(c.id, id.empty() ? logical : id);
  if (!n.ok()) {
    if (absl::IsNotFound(n.status())) {
      return absl::NotFoundError(absl::StrCat("Node ", id.empty() ? logical : id,
                                              " not found in cluster ", c.name));
    }
    return n.status();
  }
  return Json{{"NodeDetails", nodeDetails(*n)}};
}

StatusOr<nlohmann::json> ClusterOperations::batchDeleteClusterNodes(const Json& in) {
  const auto ids = in.value("NodeIds", std::vector<std::string>{});
  const auto logical = in.value("NodeLogicalIds", std::vector<std::string>{});
  if (ids.empty() && logical.empty()) {
    return RuleViolation("Specify NodeIds or NodeLogicalIds (or both).");
  }
  if (ids.size() + logical.size() > 99) {
    return RuleViolation(absl::StrCat("At most 99 nodes can be deleted per request; got ",
                                      ids.size() + logical.size(), "."));
  }
  return mutateCluster(Str(in, "ClusterName"), [&](model::Cluster& c,
                                                   store::WriteBatch& batch) -> StatusOr<Json> {
    if (c.status == cs::kCreating || c.status == cs::kDeleting) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Cluster ", c.name, " is ", c.status, "; nodes can be deleted once it is InService."));
    }
    Json ok_ids = Json::array(), failed = Json::array();
    Json ok_logical = Json::array(), failed_logical = Json::array();
    std::set<std::string> done;
    std::map<std::string, int> removed_per_group;
    auto remove = [&](const std::string& key, bool is_logical) {
      auto n = store_.node(c.id, key);
      Json& fail_list = is_logical ? failed_logical : failed;
      const char* key_name = is_logical ? "NodeLogicalId" : "NodeId";
      if (!n.ok() || (is_logical ? n->logical_id != key : n->instance_id != key)) {
        fail_list.push_back({{"Code", "NodeIdNotFound"},
                             {"Message", absl::StrCat("Node ", key, " not found in cluster ",
                                                      c.name)},
                             {key_name, key}});
        return;
      }
      if (n->status == is::kShuttingDown || done.count(n->instance_id)) {
        fail_list.push_back({{"Code", "InvalidNodeStatus"},
                             {"Message", absl::StrCat("Node ", key, " is already ShuttingDown")},
                             {key_name, key}});
        return;
      }
      done.insert(n->instance_id);
      model::Node updated = *n;
      updated.status = is::kShuttingDown;
      batch.nodes.push_back({updated, n->revision, false});
      removed_per_group[n->group]++;
      batch.events.push_back(
          instanceEvent(c, *n, absl::StrCat("Instance ", n->instance_id, " deletion requested")));
      (is_logical ? ok_logical : ok_ids).push_back(key);
    };
    for (const auto& id : ids) remove(id, false);
    for (const auto& id : logical) remove(id, true);
    // Deleted nodes are not replaced: each group's target count drops by what it lost.
    for (auto& g : c.groups) {
      auto it = removed_per_group.find(g.name);
      if (it == removed_per_group.end()) continue;
      g.target_count = std::max(0, g.target_count - it->second);
      g.spec["InstanceCount"] = g.target_count;
    }
    if (!batch.nodes.empty()) batch.clusters.push_back({c, c.revision, false});
    return BatchNodesResult(ok_ids, failed, ok_logical, failed_logical);
  });
}

// BatchAddClusterNodes: raises groups' target counts and records the new nodes at once (so
// their NodeLogicalIds can be returned); the controller launches them. HyperPod offers it only
// with NodeProvisioningMode Continuous.
StatusOr<nlohmann::json> ClusterOperations::batchAddClusterNodes(const Json& in) {
  const Json specs = in.value("NodesToAdd", Json::array());
  return mutateCluster(Str(in, "ClusterName"), [&](model::Cluster& c,
                                                   store::WriteBatch& batch) -> StatusOr<Json> {
    if (!c.continuous()) {
      return RuleViolation(absl::StrCat(
          "BatchAddClusterNodes requires NodeProvisioningMode Continuous; cluster ", c.name,
          " uses the default provisioning mode. Use UpdateCluster to change InstanceCount."));
    }
    Json ok = Json::array(), failed = Json::array();
    int added_total = 0;
    for (size_t index = 0; index < specs.size(); ++index) {
      const Json& spec = specs[index];
      const std::string name = Str(spec, "InstanceGroupName");
      const int increment = spec.value("IncrementTargetCountBy", 0);
      model::InstanceGroup* g = nullptr;
      for (auto& candidate : c.groups) {
        if (candidate.name == name) g = &candidate;
      }
      auto fail = [&](const char* code, std::string message) {
        failed.push_back({{"InstanceGroupName", name}, {"ErrorCode", code},
                          {"FailedCount", increment}, {"Message", std::move(message)}});
      };
      if (!g || std::count(c.groups_deleting.begin(), c.groups_deleting.end(), name)) {
        fail("InstanceGroupNotFound",
             absl::StrCat("Instance group ", name, " not found in cluster ", c.name, "."));
        continue;
      }
      if (c.status == cs::kDeleting || c.status == cs::kFailed) {
        fail("InvalidInstanceGroupStatus",
             absl::StrCat("Cluster ", c.name, " is ", c.status, "; nodes cannot be added."));
        continue;
      }
      if (TotalInstances(c.groups) + increment > config_.max_instances_per_cluster) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "Adding ", increment, " instances to ", c.name, " would exceed the limit of ",
            config_.max_instances_per_cluster, " instances per cluster."));
      }
      if (increment > 0 && !c.eksClusterName().empty()) {
        const std::string place =
            absl::StrCat("nodesToAdd.", index + 1, ".member.instanceGroupName");
        if (Status placed = CheckEksPlacement({*g}, {}, config_.runs_on_ssh, place);
            !placed.ok()) {
          if (!absl::IsInvalidArgument(placed)) return placed;
          fail("IncompatibleInstanceTypes", std::string(placed.message()));
          continue;
        }
      }
      const int before = g->target_count;
      g->target_count += increment;
      g->spec["InstanceCount"] = g->target_count;
      for (int k = 0; k < increment; ++k) {
        model::Node n;
        n.cluster_id = c.id;
        n.instance_id = ids_.instanceId();
        n.logical_id = absl::StrCat(g->name, "-", ids_.logicalIdSuffix());
        n.group = g->name;
        n.instance_type = g->instance_type;
        n.status = is::kPending;
        n.launch_time = clock_.now();
        n.lifecycle = g->spec.value("LifeCycleConfig", Json());
        n.spec_extras = model::NodeSpecMembers(*g);
        ok.push_back({{"NodeLogicalId", n.logical_id}, {"InstanceGroupName", g->name},
                      {"Status", model::ToString(is::kPending)}});
        batch.nodes.push_back({std::move(n), store::kMustNotExist, false});
      }
      added_total += increment;
      auto e = event(c, "InstanceGroup", "Info",
                     absl::StrCat("Adding ", increment, " nodes to instance group ", g->name,
                                  " (", before, " to ", g->target_count, ")"),
                     g->name);
      e.metadata = {{"InstanceGroupScaling",
                     {{"InstanceCount", before}, {"TargetCount", g->target_count}}}};
      batch.events.push_back(std::move(e));
    }
    if (added_total > 0) batch.clusters.push_back({c, c.revision, false});
    return Json{{"Successful", ok}, {"Failed", failed}};
  });
}

}  // namespace hf::api
