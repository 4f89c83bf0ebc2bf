#include "cluster_rules.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster_request.h"

namespace hf::api {

using Json = nlohmann::json;
using cluster_request::RuleViolation;
using cluster_request::Str;

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

Status CheckOrchestrator(const Json& in) {
  auto it = in.find("Orchestrator");
  if (it == in.end()) return absl::OkStatus();
  const auto given = [&](const char* key) {
    const auto m = it->find(key);
    return m != it->end() && !m->is_null();
  };
  // An empty Orchestrator ({} or members null) names no orchestrator either.
  if (given("Eks") == given("Slurm")) {
    return RuleViolation("Orchestrator must specify exactly one of Eks and Slurm.");
  }
  return absl::OkStatus();
}

Status CheckOrchestratorKept(const model::Cluster& cluster, const Json& request) {
  const auto it = request.find("Orchestrator");
  if (it == request.end() || !it->is_object()) return absl::OkStatus();
  const bool on_eks = !cluster.eksClusterName().empty();
  const std::string kind = on_eks ? "EKS" : "Slurm";
  if (it->contains("Eks")) {
    const std::string given = Str((*it)["Eks"], "ClusterArn");
    const auto has = cluster.spec.find("Orchestrator");
    const bool same = on_eks && has != cluster.spec.end() &&
                      Str(has->value("Eks", Json::object()), "ClusterArn") == given;
    if (!same) {
      return RuleViolation(absl::StrCat(
          "Orchestrator.Eks.ClusterArn: cluster ", cluster.name, " is orchestrated by ", kind,
          on_eks ? absl::StrCat(" cluster ", cluster.eksClusterName()) : std::string(),
          "; UpdateCluster cannot change a cluster's orchestrator."));
    }
  }
  if (it->contains("Slurm") && on_eks) {
    return RuleViolation(absl::StrCat("Orchestrator.Slurm: cluster ", cluster.name,
                                      " is orchestrated by EKS; UpdateCluster cannot change a "
                                      "cluster's orchestrator."));
  }
  return absl::OkStatus();
}

std::optional<std::string> EksClusterNameOf(std::string_view cluster_arn, std::string_view region,
                                            std::string_view account) {
  const std::string prefix = absl::StrCat("arn:aws:eks:", std::string(region), ":", std::string(account),
                                            ":cluster/");
  if (!cluster_arn.starts_with(prefix) || cluster_arn.size() == prefix.size()) {
    return std::nullopt;
  }
  return std::string(cluster_arn.substr(prefix.size()));
}

Status CheckEksAttachment(std::string_view cluster_arn,
                          const std::optional<store::EksCluster>& found) {
  if (!found) {
    return RuleViolation(absl::StrCat("Orchestrator.Eks.ClusterArn: no EKS cluster ", std::string(cluster_arn),
                                      " exists in this account and region."));
  }
  switch (found->status) {
    case store::EksClusterStatus::kActive:
      break;
    case store::EksClusterStatus::kCreating:
      return RuleViolation(absl::StrCat("Orchestrator.Eks.ClusterArn: the EKS cluster ",
                                        found->name, " is still CREATING; wait until it is "
                                        "ACTIVE (aws eks wait cluster-active)."));
    default:
      return RuleViolation(absl::StrCat(
          "Orchestrator.Eks.ClusterArn: the EKS cluster ", found->name, " is ",
          std::string(store::EksClusterStatusName(found->status)), ", not ACTIVE."));
  }
  if (found->auth_mode == store::EksAuthMode::kConfigMap) {
    return RuleViolation(absl::StrCat(
        "Orchestrator.Eks.ClusterArn: the EKS cluster ", found->name,
        " has authenticationMode CONFIG_MAP; HyperPod needs API or API_AND_CONFIG_MAP (aws eks "
        "update-cluster-config --access-config authenticationMode=API_AND_CONFIG_MAP)."));
  }
  return absl::OkStatus();
}

Status CheckEksPlacement(const std::vector<model::InstanceGroup>& groups,
                         const std::vector<model::InstanceGroup>& before,
                         const std::function<StatusOr<bool>(std::string_view)>& runs_on_ssh,
                         std::string_view place) {
  if (!runs_on_ssh) return absl::OkStatus();
  for (size_t i = 0; i < groups.size(); ++i) {
    const model::InstanceGroup& g = groups[i];
    const auto old = std::find_if(before.begin(), before.end(),
                                  [&](const model::InstanceGroup& b) { return b.name == g.name; });
    // Only launches matter: a group that keeps or lowers its count starts nothing anywhere.
    if (old != before.end() && g.target_count <= old->target_count) continue;
    HF_ASSIGN_OR_RETURN(const bool on_ssh, runs_on_ssh(g.instance_type));
    if (!on_ssh) continue;
    return RuleViolation(absl::StrCat(
        "Instance group '", g.name, "' at '",
        place.empty() ? absl::StrCat("instanceGroups.", i + 1, ".member.instanceType")
                      : std::string(place),
        "': instances of ", g.instance_type,
        " run on registered ssh machines, and the ssh provider does not run EKS nodes "
        "(Orchestrator.Eks); use an instance type without registered machines (local nodes) "
        "or a Slurm-orchestrated cluster."));
  }
  return absl::OkStatus();
}

int TotalInstances(const std::vector<model::InstanceGroup>& groups) {
  int total = 0;
  for (const auto& g : groups) total += g.target_count;
  return total;
}

}  // namespace hf::api
