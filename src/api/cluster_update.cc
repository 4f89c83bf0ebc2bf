// UpdateCluster: the declarative replace of instance groups (PlanGroupUpdate, pure) and the
// operation that commits it with the settings it changes.
#include "cluster_update.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster_request.h"
#include "cluster_rules.h"
#include "hyperfleet/api/cluster_operations.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using cluster_request::RuleViolation;
using cluster_request::Str;
namespace cs = model::cluster_status;

/// An InstanceGroup event of `group` with its InstanceGroupScaling metadata.
model::EventText ScalingEvent(const std::string& group, std::string text, int from, int to) {
  return {"InstanceGroup", "Info", std::move(text), group, "",
          {{"InstanceGroupScaling", {{"InstanceCount", from}, {"TargetCount", to}}}}};
}

/// Each group to delete exists and is not also listed to keep.
Status CheckDeletions(const model::Cluster& c, const std::set<std::string>& deleting,
                      const std::set<std::string>& requested) {
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
  return absl::OkStatus();
}

/// Declarative replace: with InstanceGroups given, every existing group must be listed or
/// named for deletion.
Status CheckEveryGroupAccountedFor(const model::Cluster& c,
                                   const std::set<std::string>& deleting,
                                   const std::set<std::string>& requested) {
  for (const auto& g : c.groups) {
    if (!requested.count(g.name) && !deleting.count(g.name)) {
      return RuleViolation(absl::StrCat(
          "Instance group '", g.name,
          "' is missing from InstanceGroups. UpdateCluster replaces the list of instance "
          "groups: list every group to keep, and name groups to remove in "
          "InstanceGroupsToDelete."));
    }
  }
  return absl::OkStatus();
}

/// The kept groups, each with its new specification when InstanceGroups lists it.
Status UpdateExisting(const model::Cluster& c, const GroupUpdateRequest& req,
                      const std::set<std::string>& deleting, GroupUpdate& u) {
  for (const auto& g : c.groups) {
    if (deleting.count(g.name)) continue;
    if (!req.has_groups) {
      u.next.push_back(g);
      continue;
    }
    for (const auto& spec : req.groups) {
      if (Str(spec, "InstanceGroupName") != g.name) continue;
      model::InstanceGroup updated = GroupFromSpec(spec);
      if (updated.instance_type != g.instance_type) {
        return RuleViolation(absl::StrCat(
            "The InstanceType of instance group '", g.name, "' cannot change (",
            g.instance_type, " to ", updated.instance_type,
            "). Add a new group instead and delete this one."));
      }
      if (updated.target_count != g.target_count) {
        u.groups_changed = true;
        u.events.push_back(ScalingEvent(g.name,
                                        absl::StrCat("Instance group ", g.name, " scaling from ",
                                                     g.target_count, " to ",
                                                     updated.target_count),
                                        g.target_count, updated.target_count));
      }
      if (updated.spec != g.spec) u.groups_changed = true;
      u.next.push_back(std::move(updated));
    }
  }
  return absl::OkStatus();
}

/// The groups InstanceGroups lists that the cluster does not have yet.
Status AddNew(const model::Cluster& c, const GroupUpdateRequest& req, GroupUpdate& u) {
  for (const auto& spec : req.groups) {
    const std::string name = Str(spec, "InstanceGroupName");
    if (c.group(name)) continue;
    if (std::find(c.groups_deleting.begin(), c.groups_deleting.end(), name) !=
        c.groups_deleting.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Instance group '", name, "' is still being deleted; add it again later."));
    }
    model::InstanceGroup added = GroupFromSpec(spec);
    u.groups_changed = true;
    u.events.push_back(ScalingEvent(
        name, absl::StrCat("Instance group ", name, " added with target count ",
                           added.target_count),
        0, added.target_count));
    u.next.push_back(std::move(added));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<GroupUpdate> PlanGroupUpdate(const model::Cluster& c, const GroupUpdateRequest& req,
                                      int max_instances) {
  const std::set<std::string> deleting(req.to_delete.begin(), req.to_delete.end());
  std::set<std::string> requested;
  for (const auto& g : req.groups) requested.insert(Str(g, "InstanceGroupName"));
  HF_RETURN_IF_ERROR(CheckDeletions(c, deleting, requested));
  if (req.has_groups) HF_RETURN_IF_ERROR(CheckEveryGroupAccountedFor(c, deleting, requested));
  GroupUpdate u;
  u.deleting.assign(deleting.begin(), deleting.end());
  u.groups_changed = !deleting.empty();
  HF_RETURN_IF_ERROR(UpdateExisting(c, req, deleting, u));
  HF_RETURN_IF_ERROR(AddNew(c, req, u));
  if (TotalInstances(u.next) > max_instances) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "The cluster would have ", TotalInstances(u.next), " instances; the limit is ",
        max_instances, " instances per cluster."));
  }
  if (u.next.empty() && !c.spec.contains("RestrictedInstanceGroups")) {
    return RuleViolation("UpdateCluster would leave the cluster without instance groups.");
  }
  return u;
}

StatusOr<nlohmann::json> ClusterOperations::updateCluster(const Json& in) {
  HF_RETURN_IF_ERROR(CheckOrchestrator(in));
  GroupUpdateRequest request;
  request.has_groups = in.contains("InstanceGroups");
  request.groups = in.value("InstanceGroups", Json::array());
  HF_RETURN_IF_ERROR(CheckGroupSpecs(request.groups));
  request.to_delete = in.value("InstanceGroupsToDelete", std::vector<std::string>{});
  return mutateCluster(Str(in, "ClusterName"), [&](model::Cluster& c,
                                                   store::WriteBatch& batch) -> StatusOr<Json> {
    HF_RETURN_IF_ERROR(CheckOrchestratorKept(c, in));
    if (c.status != cs::kInService) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Cluster ", c.name, " is ", c.status,
          "; UpdateCluster is accepted only while the cluster is InService."));
    }
    HF_ASSIGN_OR_RETURN(GroupUpdate update,
                        PlanGroupUpdate(c, request, config_.max_instances_per_cluster));
    if (!c.eksClusterName().empty()) {
      HF_RETURN_IF_ERROR(CheckEksPlacement(update.next, c.groups, config_.runs_on_ssh));
    }
    for (auto& text : update.events) {
      batch.events.push_back(model::MakeEvent(ids_.eventId(), c.id, clock_.now(), std::move(text)));
    }
    for (const auto& name : update.deleting) {
      c.groups_deleting.push_back(name);
      batch.events.push_back(event(c, "InstanceGroup", "Info",
                                   absl::StrCat("Instance group ", name, " deletion started"),
                                   name));
    }
    c.groups = std::move(update.next);
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
                           update.groups_changed ? " update started" : " settings updated")));
    for (auto& e : batch.events) e.time = batch.events.front().time;
    if (update.groups_changed) c.status = cs::kUpdating;
    batch.clusters.push_back({c, c.revision, false});
    return Json{{"ClusterArn", c.arn}};
  });
}

}  // namespace hf::api
