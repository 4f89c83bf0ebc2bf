// CreateCluster, DescribeCluster, ListClusters and DeleteCluster.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "cluster_request.h"
#include "cluster_rules.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/api/tag_operations.h"

namespace hf::api {

using Json = nlohmann::json;
using cluster_request::CreatedQuery;
using cluster_request::RuleViolation;
using cluster_request::Str;
using cluster_request::WithNextToken;
namespace cs = model::cluster_status;

// ---- CreateCluster ---------------------------------------------------------------------

Status ClusterOperations::checkEksOrchestrator(const Json& eks) const {
  const std::string arn = Str(eks, "ClusterArn");
  std::optional<store::EksCluster> found;
  if (auto name = EksClusterNameOf(arn, config_.region, config_.account_id)) {
    auto cluster = store_.eksCluster(*name);
    if (cluster.ok()) {
      found = std::move(*cluster);
    } else if (!absl::IsNotFound(cluster.status())) {
      return cluster.status();
    }
  }
  return CheckEksAttachment(arn, found);
}

StatusOr<nlohmann::json> ClusterOperations::createCluster(const Json& in) {
  const Json groups = in.value("InstanceGroups", Json::array());
  if (groups.empty() && !in.contains("RestrictedInstanceGroups")) {
    return RuleViolation("InstanceGroups must list at least one instance group.");
  }
  HF_RETURN_IF_ERROR(CheckGroupSpecs(groups));
  HF_RETURN_IF_ERROR(CheckOrchestrator(in));
  if (const auto eks = in.find("Orchestrator"); eks != in.end() && eks->contains("Eks")) {
    HF_RETURN_IF_ERROR(checkEksOrchestrator((*eks)["Eks"]));
  }
  HF_RETURN_IF_ERROR(CheckTagList(in.value("Tags", Json::array())));
  const auto tags = TagsFrom(in.value("Tags", Json::array()));

  model::Cluster c;
  c.id = ids_.clusterId();
  c.name = Str(in, "ClusterName");
  c.arn = absl::StrCat("arn:aws:sagemaker:", config_.region, ":", config_.account_id,
                       ":cluster/", c.id);
  c.status = cs::kCreating;
  c.creation_time = clock_.now();
  for (const char* key : kSpecMembers) {
    if (in.contains(key)) c.spec[key] = in[key];
  }
  for (const auto& g : groups) c.groups.push_back(GroupFromSpec(g));
  if (!c.eksClusterName().empty()) {
    HF_RETURN_IF_ERROR(CheckEksPlacement(c.groups, {}, config_.runs_on_ssh));
  }
  if (TotalInstances(c.groups) > config_.max_instances_per_cluster) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "The cluster would have ", TotalInstances(c.groups), " instances; the limit is ",
        config_.max_instances_per_cluster, " instances per cluster."));
  }
  // A taken name is reported by the commit below (ResourceInUse), atomically.
  HF_ASSIGN_OR_RETURN(auto existing, store_.allClusters());
  if (static_cast<int>(existing.size()) >= config_.max_clusters) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "The account-level service limit 'Maximum number of clusters' is ",
        config_.max_clusters, " clusters, with current utilization of ", existing.size(),
        " clusters."));
  }

  store::WriteBatch batch;
  batch.clusters.push_back({c, store::kMustNotExist, false});
  batch.events.push_back(event(c, "Cluster", "Info",
                               absl::StrCat("Cluster ", c.name, " creation started")));
  for (const auto& g : c.groups) {
    auto e = event(c, "InstanceGroup", "Info",
                   absl::StrCat("Instance group ", g.name, " created with target count ",
                                g.target_count),
                   g.name);
    e.metadata = {{"InstanceGroupScaling", {{"InstanceCount", 0}, {"TargetCount", g.target_count}}}};
    batch.events.push_back(std::move(e));
  }
  if (!tags.empty()) batch.tags.push_back({c.arn, tags, {}});
  auto committed = store_.commit(batch);
  if (!committed.ok()) {
    if (absl::IsAlreadyExists(committed.status())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "Resource Already Exists: Cluster with name ", c.name,
          " already exists. Choose a different name."));
    }
    return committed.status();
  }
  on_change_(c.id);
  return Json{{"ClusterArn", c.arn}};
}

// ---- DescribeCluster / ListClusters ---------------------------------------------------------

nlohmann::json ClusterOperations::filterToShape(const Json& value, std::string_view shape) const {
  const Json* s = model_.shape(shape);
  if (!s || !value.is_object()) return Json::object();
  Json out = Json::object();
  const Json& members = (*s)["members"];
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (members.contains(it.key())) out[it.key()] = it.value();
  }
  return out;
}

nlohmann::json ClusterOperations::clusterDetails(
    const model::Cluster& c, const std::map<std::string, store::GroupCounts>& counts) const {
  Json out = filterToShape(c.spec, "DescribeClusterResponse");
  // Shapes that differ between input and output are rebuilt below.
  out.erase("AutoScaling");
  out.erase("RestrictedInstanceGroups");
  out.erase("RestrictedInstanceGroupsConfig");
  if (c.spec.contains("AutoScaling")) {
    Json as = filterToShape(c.spec["AutoScaling"], "ClusterAutoScalingConfigOutput");
    as["Status"] = "InService";
    out["AutoScaling"] = as;
  }
  out["ClusterArn"] = c.arn;
  out["ClusterName"] = c.name;
  out["ClusterStatus"] = c.status;
  out["CreationTime"] = ToEpochSeconds(c.creation_time);
  if (!c.failure_message.empty()) out["FailureMessage"] = c.failure_message;
  Json groups = Json::array();
  auto describe_group = [&](const Json& spec, const std::string& name, int target,
                            bool deleting) {
    Json g = filterToShape(spec, "ClusterInstanceGroupDetails");
    g["InstanceGroupName"] = name;
    if (spec.contains("ImageId")) g["DesiredImageId"] = spec["ImageId"];
    if (spec.contains("MinInstanceCount")) g["MinCount"] = spec["MinInstanceCount"];
    store::GroupCounts n;
    if (auto it = counts.find(name); it != counts.end()) n = it->second;
    g["CurrentCount"] = n.running;
    g["TargetCount"] = target;
    std::string status = "InService";
    if (deleting) {
      status = "Deleting";
    } else if (c.status == cs::kCreating) {
      status = n.running == target ? "InService" : "Creating";
    } else if (n.failed > 0) {
      status = c.status == cs::kFailed ? "Failed" : "Degraded";
    } else if (n.running != target || n.pending > 0 || n.shutting_down > 0) {
      status = "Updating";
    }
    if (c.status == cs::kDeleting) status = "Deleting";
    g["Status"] = status;
    groups.push_back(std::move(g));
  };
  for (const auto& g : c.groups) describe_group(g.spec, g.name, g.target_count, false);
  for (const auto& name : c.groups_deleting) {
    describe_group(Json{{"InstanceGroupName", name}}, name, 0, true);
  }
  out["InstanceGroups"] = std::move(groups);
  return out;
}

StatusOr<nlohmann::json> ClusterOperations::describeCluster(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  HF_ASSIGN_OR_RETURN(auto counts, store_.groupCounts(c.id));
  return clusterDetails(c, counts);
}

StatusOr<nlohmann::json> ClusterOperations::listClusters(const Json& in) {
  auto q = CreatedQuery<store::ClusterQuery>(in);
  q.name_contains = Str(in, "NameContains");
  HF_ASSIGN_OR_RETURN(auto page, store_.listClusters(q));
  Json summaries = Json::array();
  const std::string plan = Str(in, "TrainingPlanArn");
  for (const auto& c : page.items) {
    Json s = {{"ClusterArn", c.arn},
              {"ClusterName", c.name},
              {"CreationTime", ToEpochSeconds(c.creation_time)},
              {"ClusterStatus", c.status}};
    Json plans = Json::array();
    for (const auto& g : c.groups) {
      if (g.spec.contains("TrainingPlanArn")) plans.push_back(g.spec["TrainingPlanArn"]);
    }
    if (!plan.empty() && std::find(plans.begin(), plans.end(), Json(plan)) == plans.end()) {
      continue;
    }
    if (!plans.empty()) s["TrainingPlanArns"] = plans;
    summaries.push_back(std::move(s));
  }
  return WithNextToken({{"ClusterSummaries", std::move(summaries)}}, page.next_token);
}

// ---- DeleteCluster ------------------------------------------------------------------------

StatusOr<nlohmann::json> ClusterOperations::deleteCluster(const Json& in) {
  return mutateCluster(Str(in, "ClusterName"),
                       [&](model::Cluster& c, store::WriteBatch& batch) -> StatusOr<Json> {
                         if (c.status == cs::kDeleting) return Json{{"ClusterArn", c.arn}};
                         c.status = cs::kDeleting;
                         batch.events.push_back(event(
                             c, "Cluster", "Info",
                             absl::StrCat("Cluster ", c.name, " deletion started")));
                         batch.clusters.push_back({c, c.revision, false});
                         return Json{{"ClusterArn", c.arn}};
                       });
}

}  // namespace hf::api
