#include "hyperfleet/api/cluster_operations.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "request_time.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
using Action = model::NodeRecoveryRequest::Action;

/// A ValidationException for a HyperPod rule that the model cannot express.
Status RuleViolation(std::string message) { return absl::InvalidArgumentError(message); }

std::string Str(const Json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}


int Limit(const Json& in, const char* key, int fallback) {
  auto it = in.find(key);
  return it != in.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

/// Builds the internal group from its (validated) specification.
model::InstanceGroup GroupFromSpec(const Json& spec) {
  model::InstanceGroup g;
  g.spec = spec;
  g.name = Str(spec, "InstanceGroupName");
  g.instance_type = Str(spec, "InstanceType");
  if (g.instance_type.empty() && spec.contains("InstanceRequirements")) {
    // Flexible instance types: run the first one listed.
    const Json& types = spec["InstanceRequirements"].value("InstanceTypes", Json::array());
    if (!types.empty() && types[0].is_string()) g.instance_type = types[0];
    g.spec["InstanceType"] = g.instance_type;
  }
  g.target_count = spec.value("InstanceCount", 0);
  return g;
}

/// HyperPod's rules on a list of ClusterInstanceGroupSpecification, beyond the model's.
Status CheckGroupSpecs(const Json& groups) {
  std::set<std::string> names;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Json& g = groups[i];
    const std::string where = absl::StrCat("instanceGroups.", i + 1, ".member");
    const std::string name = Str(g, "InstanceGroupName");
    if (!names.insert(name).second) {
      return RuleViolation(absl::StrCat("Instance group names must be unique: '", name,
                                        "' appears more than once in InstanceGroups."));
    }
    const bool has_type = g.contains("InstanceType");
    const bool has_reqs = g.contains("InstanceRequirements");
    if (has_type == has_reqs) {
      return RuleViolation(absl::StrCat(
          "Instance group '", name, "' at '", where,
          "' must specify exactly one of InstanceType and InstanceRequirements."));
    }
    if (has_reqs && g["InstanceRequirements"].value("InstanceTypes", Json::array()).empty()) {
      return RuleViolation(absl::StrCat("Instance group '", name, "' at '", where,
                                        ".instanceRequirements' lists no InstanceTypes."));
    }
    const Json lc = g.value("LifeCycleConfig", Json());
    if (!lc.is_object() || Str(lc, "SourceS3Uri").empty() || Str(lc, "OnCreate").empty()) {
      return RuleViolation(absl::StrCat(
          "Instance group '", name, "' at '", where,
          ".lifeCycleConfig' needs a LifeCycleConfig with SourceS3Uri and OnCreate: HyperPod "
          "runs the OnCreate script from that S3 prefix on every new instance."));
    }
    if (g.contains("MinInstanceCount") &&
        g["MinInstanceCount"].get<int>() > g.value("InstanceCount", 0)) {
      return RuleViolation(absl::StrCat("Instance group '", name,
                                        "': MinInstanceCount cannot exceed InstanceCount."));
    }
  }
  return absl::OkStatus();
}

/// The orchestrator rules: Slurm (or none) is served; EKS waits for Kubernetes support.
Status CheckOrchestrator(const Json& in) {
  auto it = in.find("Orchestrator");
  if (it == in.end()) return absl::OkStatus();
  const bool eks = it->contains("Eks"), slurm = it->contains("Slurm");
  if (eks && slurm) {
    return RuleViolation("Orchestrator must specify exactly one of Eks and Slurm.");
  }
  if (eks) {
    return RuleViolation(
        "Orchestrator.Eks is not supported by Hyperfleet yet: clusters are orchestrated by "
        "Slurm. Omit Orchestrator or give Orchestrator.Slurm.");
  }
  return absl::OkStatus();
}

int TotalInstances(const std::vector<model::InstanceGroup>& groups) {
  int total = 0;
  for (const auto& g : groups) total += g.target_count;
  return total;
}

store::SortBy SortByFrom(const Json& in) {
  return Str(in, "SortBy") == "NAME" ? store::SortBy::kName : store::SortBy::kCreationTime;
}

bool Descending(const Json& in) { return Str(in, "SortOrder") == "Descending"; }

// Members of the create request kept as the cluster's spec (the rest is typed).
constexpr const char* kSpecMembers[] = {
    "VpcConfig",          "Orchestrator",   "NodeRecovery",  "TieredStorageConfig",
    "NodeProvisioningMode", "ClusterRole",  "AutoScaling",   "RestrictedInstanceGroups",
    "RestrictedInstanceGroupsConfig"};
// Members UpdateCluster may change in place.
constexpr const char* kUpdatableMembers[] = {
    "NodeRecovery", "TieredStorageConfig", "NodeProvisioningMode", "ClusterRole",
    "AutoScaling",  "Orchestrator",        "RestrictedInstanceGroups",
    "RestrictedInstanceGroupsConfig"};

}  // namespace

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

/// A Batch*ClusterNodes response: each list only when non-empty (Successful, Failed,
/// SuccessfulNodeLogicalIds, FailedNodeLogicalIds).
nlohmann::json BatchNodesResult(const nlohmann::json& ok_ids, const nlohmann::json& failed,
                                const nlohmann::json& ok_logical,
                                const nlohmann::json& failed_logical) {
  nlohmann::json out = nlohmann::json::object();
  if (!ok_ids.empty()) out["Successful"] = ok_ids;
  if (!failed.empty()) out["Failed"] = failed;
  if (!ok_logical.empty()) out["SuccessfulNodeLogicalIds"] = ok_logical;
  if (!failed_logical.empty()) out["FailedNodeLogicalIds"] = failed_logical;
  return out;
}

/// `out` with NextToken set when there is a next page (left out on the last one).
nlohmann::json WithNextToken(nlohmann::json out, const std::string& next_token) {
  if (!next_token.empty()) out["NextToken"] = next_token;
  return out;
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

model::Event ClusterOperations::event(const model::Cluster& c, std::string resource_type,
                                      std::string level, std::string description,
                                      std::string group) const {
  return model::MakeEvent(ids_.eventId(), c.id, clock_.now(),
                          {std::move(resource_type), std::move(level), std::move(description),
                           std::move(group), "", nullptr});
}

// ---- CreateCluster ---------------------------------------------------------------------

StatusOr<nlohmann::json> ClusterOperations::createCluster(const Json& in) {
  const Json groups = in.value("InstanceGroups", Json::array());
  if (groups.empty() && !in.contains("RestrictedInstanceGroups")) {
    return RuleViolation("InstanceGroups must list at least one instance group.");
  }
  HF_RETURN_IF_ERROR(CheckGroupSpecs(groups));
  HF_RETURN_IF_ERROR(CheckOrchestrator(in));
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
  store::ClusterQuery q;
  q.created_after = RequestTimestamp(in, "CreationTimeAfter");
  q.created_before = RequestTimestamp(in, "CreationTimeBefore");
  q.name_contains = Str(in, "NameContains");
  q.sort_by = SortByFrom(in);
  q.descending = Descending(in);
  q.limit = Limit(in, "MaxResults", 10);
  q.page_token = Str(in, "NextToken");
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

// ---- UpdateCluster / DeleteCluster -------------------------------------------------------

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

StatusOr<nlohmann::json> ClusterOperations::updateCluster(const Json& in) {
  HF_RETURN_IF_ERROR(CheckOrchestrator(in));
  const bool has_groups = in.contains("InstanceGroups");
  const Json groups = in.value("InstanceGroups", Json::array());
  HF_RETURN_IF_ERROR(CheckGroupSpecs(groups));
  const auto to_delete = in.value("InstanceGroupsToDelete", std::vector<std::string>{});
  return mutateCluster(Str(in, "ClusterName"), [&](model::Cluster& c,
                                                   store::WriteBatch& batch) -> StatusOr<Json> {
    if (c.status != cs::kInService) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Cluster ", c.name, " is ", c.status,
          "; UpdateCluster is accepted only while the cluster is InService."));
    }
    std::set<std::string> deleting(to_delete.begin(), to_delete.end());
    std::set<std::string> requested;
    for (const auto& g : groups) requested.insert(Str(g, "InstanceGroupName"));
    for (const auto& name : deleting) {
      if (!c.group(name)) {
        return RuleViolation(absl::StrCat("InstanceGroupsToDelete names '", name,
                                          "', which is not an instance group of cluster ",
                                          c.name, "."));
      }
      if (requested.count(name)) {
        return RuleViolation(absl::StrCat("Instance group '", name,
                                          "' is both in InstanceGroups and in "
                                          "InstanceGroupsToDelete."));
      }
    }
    // Declarative replace: with InstanceGroups given, every existing group must be listed
    // or named for deletion.
    if (has_groups) {
      for (const auto& g : c.groups) {
        if (!requested.count(g.name) && !deleting.count(g.name)) {
          return RuleViolation(absl::StrCat(
              "Instance group '", g.name,
              "' is missing from InstanceGroups. UpdateCluster replaces the list of instance "
              "groups: list every group to keep, and name groups to remove in "
              "InstanceGroupsToDelete."));
        }
      }
    }
    std::vector<model::InstanceGroup> next;
    bool groups_changed = !deleting.empty();
    for (const auto& g : c.groups) {
      if (deleting.count(g.name)) continue;
      if (!has_groups) {
        next.push_back(g);
        continue;
      }
      for (const auto& spec : groups) {
        if (Str(spec, "InstanceGroupName") != g.name) continue;
        model::InstanceGroup updated = GroupFromSpec(spec);
        if (updated.instance_type != g.instance_type) {
          return RuleViolation(absl::StrCat(
              "The InstanceType of instance group '", g.name, "' cannot change (", 
              g.instance_type, " to ", updated.instance_type,
              "). Add a new group instead and delete this one."));
        }
        if (updated.target_count != g.target_count) {
          groups_changed = true;
          auto e = event(c, "InstanceGroup", "Info",
                         absl::StrCat("Instance group ", g.name, " scaling from ",
                                      g.target_count, " to ", updated.target_count),
                         g.name);
          e.metadata = {{"InstanceGroupScaling",
                         {{"InstanceCount", g.target_count},
                          {"TargetCount", updated.target_count}}}};
          batch.events.push_back(std::move(e));
        }
        if (updated.spec != g.spec) groups_changed = true;
        next.push_back(std::move(updated));
      }
    }
    for (const auto& spec : groups) {
      const std::string name = Str(spec, "InstanceGroupName");
      if (c.group(name)) continue;
      if (std::find(c.groups_deleting.begin(), c.groups_deleting.end(), name) !=
          c.groups_deleting.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Instance group '", name, "' is still being deleted; add it again later."));
      }
      model::InstanceGroup added = GroupFromSpec(spec);
      groups_changed = true;
      auto e = event(c, "InstanceGroup", "Info",
                     absl::StrCat("Instance group ", name, " added with target count ",
                                  added.target_count),
                     name);
      e.metadata = {{"InstanceGroupScaling",
                     {{"InstanceCount", 0}, {"TargetCount", added.target_count}}}};
      batch.events.push_back(std::move(e));
      next.push_back(std::move(added));
    }
    if (TotalInstances(next) > config_.max_instances_per_cluster) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "The cluster would have ", TotalInstances(next), " instances; the limit is ",
          config_.max_instances_per_cluster, " instances per cluster."));
    }
    for (const auto& name : deleting) {
      c.groups_deleting.push_back(name);
      batch.events.push_back(event(c, "InstanceGroup", "Info",
                                   absl::StrCat("Instance group ", name, " deletion started"),
                                   name));
    }
    if (next.empty() && !c.spec.contains("RestrictedInstanceGroups")) {
      return RuleViolation("UpdateCluster would leave the cluster without instance groups.");
    }
    c.groups = std::move(next);
    for (const char* key : kUpdatableMembers) {
      if (in.contains(key)) c.spec[key] = in[key];
    }
    c.failure_message.clear();
    // One change, one moment: the cluster-level event first, then the group events that
    // detail it (events of equal time list in the order they were written).
    batch.events.insert(
        batch.events.begin(),
        event(c, "Cluster", "Info",
              absl::StrCat("Cluster ", c.name,
                           groups_changed ? " update started" : " settings updated")));
    for (auto& e : batch.events) e.time = batch.events.front().time;
    if (groups_changed) c.status = cs::kUpdating;
    batch.clusters.push_back({c, c.revision, false});
    return Json{{"ClusterArn", c.arn}};
  });
}

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

StatusOr<nlohmann::json> ClusterOperations::listClusterNodes(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  store::NodeQuery q;
  q.created_after = RequestTimestamp(in, "CreationTimeAfter");
  q.created_before = RequestTimestamp(in, "CreationTimeBefore");
  q.group_contains = Str(in, "InstanceGroupNameContains");
  q.sort_by = SortByFrom(in);
  q.descending = Descending(in);
  q.limit = Limit(in, "MaxResults", 10);
  q.page_token = Str(in, "NextToken");
  HF_ASSIGN_OR_RETURN(auto page, store_.listNodes(c.id, q));
  Json summaries = Json::array();
  for (const auto& n : page.items) summaries.push_back(nodeSummary(n));
  return WithNextToken({{"ClusterNodeSummaries", std::move(summaries)}}, page.next_token);
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
      auto e = event(c, "Instance", "Info",
                     absl::StrCat("Instance ", n->instance_id, " deletion requested"),
                     n->group);
      e.instance_id = n->instance_id;
      batch.events.push_back(std::move(e));
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
      auto e = event(c, "Instance", "Info",
                     absl::StrCat("Instance ", n->instance_id, " ", verb, " requested (", api,
                                  ")"),
                     n->group);
      e.instance_id = n->instance_id;
      batch.events.push_back(std::move(e));
      (is_logical ? ok_logical : ok_ids).push_back(key);
    };
    for (const auto& id : ids) request(id, false);
    for (const auto& id : logical) request(id, true);
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
    for (const auto& spec : specs) {
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

// ---- Events -------------------------------------------------------------------------------

nlohmann::json ClusterOperations::eventSummary(const model::Cluster& c, const model::Event& e,
                                               bool details) const {
  Json s = {{"EventId", e.id},
            {"ClusterArn", c.arn},
            {"ClusterName", c.name},
            {"ResourceType", e.resource_type},
            {"EventTime", ToEpochSeconds(e.time)},
            {"EventLevel", e.level},
            {"Description", e.description}};
  if (!e.group.empty()) s["InstanceGroupName"] = e.group;
  if (!e.instance_id.empty()) s["InstanceId"] = e.instance_id;
  if (details && e.metadata.is_object()) s["EventDetails"] = {{"EventMetadata", e.metadata}};
  return s;
}

StatusOr<nlohmann::json> ClusterOperations::listClusterEvents(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  store::EventQuery q;
  q.after = RequestTimestamp(in, "EventTimeAfter");
  q.before = RequestTimestamp(in, "EventTimeBefore");
  q.group = Str(in, "InstanceGroupName");
  q.instance_id = Str(in, "NodeId");
  q.resource_type = Str(in, "ResourceType");
  q.descending = Descending(in);
  q.limit = Limit(in, "MaxResults", 10);
  q.page_token = Str(in, "NextToken");
  HF_ASSIGN_OR_RETURN(auto page, store_.listEvents(c.id, q));
  Json events = Json::array();
  for (const auto& e : page.items) events.push_back(eventSummary(c, e, false));
  return WithNextToken({{"Events", std::move(events)}}, page.next_token);
}

StatusOr<nlohmann::json> ClusterOperations::describeClusterEvent(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  HF_ASSIGN_OR_RETURN(auto e, store_.event(c.id, Str(in, "EventId")));
  return Json{{"EventDetails", eventSummary(c, e, true)}};
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
