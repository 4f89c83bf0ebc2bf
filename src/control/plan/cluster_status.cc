// The cluster's side of a pass (docs/state-machines.md "Cluster"): a Deleting cluster's
// whole pass, Failed and RollingBack on a failed instance, the records' end of pass
// (erasures, writes) and the status the pass ends in, with the cluster write that fences
// every other write.
#include <algorithm>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

/// The first failed instance of the declared groups, if any.
const model::Node* FirstFailure(const Work& w) {
  for (const auto& n : w.nodes) {
    if (n.status == is::kFailure && w.cluster.group(n.group)) return &n;
  }
  return nullptr;
}

/// Every declared group has exactly its target of Running instances.
bool AllGroupsReady(const Work& w) {
  for (const auto& g : w.cluster.groups) {
    int running = 0;
    for (const auto& n : w.nodes) {
      if (n.group == g.name && n.status == is::kRunning) ++running;
    }
    if (running != g.target_count) return false;
  }
  return true;
}

/// Continuous provisioning: every instance's first attempt has ended (Running, or failed and
/// being retried), so the cluster is usable while retries go on.
bool FirstAttemptsDone(const Work& w) {
  if (!w.cluster.groups_deleting.empty()) return false;
  for (const auto& n : w.nodes) {
    if (n.status == is::kPending && !IsRetry(n)) return false;
  }
  return true;
}

/// Something is pending or shutting down, launched or terminated by this plan, or a group
/// is being deleted.
bool InFlight(const Work& w) {
  for (const auto& n : w.nodes) {
    if (n.status == is::kPending || n.status == is::kShuttingDown) return true;
  }
  return !w.plan.launches.empty() || !w.plan.terminations.empty() ||
         !w.cluster.groups_deleting.empty();
}

void SetClusterStatus(Work& w, const char* status, const std::string& failure = "") {
  if (w.cluster.status == status) return;
  w.cluster.status = status;
  if (!failure.empty()) w.cluster.failure_message = failure;
  const char* level = w.cluster.status == cs::kFailed ? "Error" : "Info";
  json meta;
  if (!failure.empty()) meta = json{{"Cluster", {{"FailureMessage", failure}}}};
  w.event("Cluster", level,
          absl::StrCat("Cluster ", w.cluster.name, " is ", status,
                       failure.empty() ? "" : absl::StrCat(": ", failure)),
          "", "", meta);
}

/// Rolls a failed update back: groups shrink to the instances that run.
void RollBack(Work& w, const model::Node& failed) {
  const std::string why = absl::StrCat("Instance ", failed.instance_id, " in group ",
                                       failed.group, " failed: ", failed.message);
  w.cluster.failure_message = why;
  for (auto& g : w.cluster.groups) {
    int keep = 0;
    for (const auto& n : w.nodes) {
      if (n.group == g.name && n.status == is::kRunning) ++keep;
    }
    if (keep < g.target_count) {
      w.event("InstanceGroup", "Error",
              absl::StrCat("Scaling group ", g.name, " to ", g.target_count,
                           " failed; rolled back to ", keep, ": ", why),
              g.name, "",
              json{{"InstanceGroupScaling",
                    {{"InstanceCount", keep}, {"TargetCount", g.target_count},
                     {"FailureMessage", why}}}});
      g.target_count = keep;
      g.spec["InstanceCount"] = keep;
    }
  }
  SetClusterStatus(w, cs::kRollingBack);
}

/// Whether this pass changed the cluster record itself.
bool ClusterChanged(const Work& w) {
  const model::Cluster& before = w.snap.cluster;
  return w.cluster.status != before.status ||
         w.cluster.failure_message != before.failure_message ||
         w.cluster.groups_deleting != before.groups_deleting ||
         w.cluster.groups.size() != before.groups.size() ||
         !std::equal(w.cluster.groups.begin(), w.cluster.groups.end(), before.groups.begin(),
                     [](const auto& a, const auto& b) { return a.target_count == b.target_count; });
}

}  // namespace

void PlanDeletion(Work& w) {
  for (size_t i = 0; i < w.nodes.size(); ++i) w.shutDown(i, "the cluster is being deleted");
  Finish(w);
  const int64_t revision = w.snap.cluster.revision;
  if (w.nodes.empty() && w.snap.instances.empty()) {
    w.plan.writes.events.clear();  // erased with the cluster, as are its node records
    w.plan.writes.nodes.clear();
    w.plan.writes.clusters.push_back({w.cluster, revision, /*erase=*/true});
  } else {
    w.plan.writes.clusters.push_back({w.cluster, revision, false});
  }
}

void FailOrRollBack(Work& w) {
  const model::Node* failure = FirstFailure(w);
  if (!failure || w.cluster.continuous()) return;
  if (w.cluster.status == cs::kCreating) {
    // HyperPod's wording (DescribeCluster.FailureMessage of a failed create).
    SetClusterStatus(w, cs::kFailed,
                     absl::StrCat("Instance ", failure->instance_id, " (instance group ",
                                  failure->group,
                                  ") failed to provision with the following error: \"",
                                  failure->message,
                                  "\" Note that multiple instances may be impacted."));
  } else if (w.cluster.status == cs::kUpdating) {
    RollBack(w, *failure);
  }
}

void Finish(Work& w) {
  // Erase records of instances the provider no longer has (unless just asked to go).
  std::vector<model::Node> kept;
  kept.reserve(w.nodes.size());
  // Built on first use: a cluster being deleted asks to terminate every instance at once.
  std::optional<std::unordered_set<std::string_view>> asked;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    auto& n = w.nodes[i];
    if (n.status == is::kShuttingDown && !w.observed(n.instance_id) &&
        w.expected[i] != store::kMustNotExist) {
      if (!asked) asked.emplace(w.plan.terminations.begin(), w.plan.terminations.end());
      if (!asked->count(n.instance_id)) {
        w.plan.writes.nodes.push_back({n, w.expected[i], /*erase=*/true});
        w.event("Instance", "Info", absl::StrCat("Instance ", n.instance_id, " terminated"),
                n.group, n.instance_id);
        continue;
      }
    }
    if (w.dirty[i]) w.plan.writes.nodes.push_back({n, w.expected[i], false});
    kept.push_back(std::move(n));
  }
  w.nodes = std::move(kept);
}

void SetStatus(Work& w) {
  if (w.snap.lifecycle_by_agent && w.cluster.status != cs::kDeleting) {
    w.plan.watch_liveness = std::any_of(w.nodes.begin(), w.nodes.end(), [](const auto& n) {
      return n.status == is::kRunning || (n.status == is::kFailure && n.fault);
    });
  }
  const bool in_flight = InFlight(w);
  if (w.cluster.status == cs::kCreating || w.cluster.status == cs::kUpdating ||
      w.cluster.status == cs::kRollingBack) {
    if ((!in_flight && AllGroupsReady(w)) || (w.cluster.continuous() && FirstAttemptsDone(w))) {
      SetClusterStatus(w, cs::kInService);
    }
  }
  // Node writes are fenced by the cluster's revision: an API update in between makes this
  // plan stale, and the commit fails instead of acting on an old declaration.
  if (ClusterChanged(w) || !w.plan.writes.empty()) {
    w.plan.writes.clusters.push_back({w.cluster, w.snap.cluster.revision, false});
  }
  w.plan.settled =
      !in_flight && (w.cluster.status == cs::kInService || w.cluster.status == cs::kFailed);
}

}  // namespace hf::control::plan
