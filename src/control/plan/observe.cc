// Observe: what the provider reports, reflected into the node records (passive transitions;
// docs/state-machines.md "Instance").
#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

/// Record `i`, which the provider does not report (and is not shutting down).
void ObserveUnreported(Work& w, size_t i) {
  const model::Node& n = w.nodes[i];
  if (n.status == is::kPending && IsReplacement(n) && w.observed(n.marks.replacement_of)) {
    return;  // a replacement starts once its predecessor has released the address
  }
  if (n.status == is::kPending) {
    // Launch (again): idempotent by id. Not for a cluster being deleted, which only
    // terminates (the record goes once the provider confirms it has no such instance).
    if (w.cluster.status != cs::kDeleting) w.plan.launches.push_back(w.specFor(n));
  } else if (n.status == is::kRunning && !w.snap.lifecycle_by_agent) {
    w.setStatus(i, is::kFailure, "The instance is no longer reported by its provider.");
    w.event("Instance", "Error",
            absl::StrCat("Instance ", n.instance_id, " disappeared from its provider"), n.group,
            n.instance_id);
  }
}

/// Whether the Kubernetes Node of `n` (an EKS-orchestrated cluster's) is Ready.
bool KubernetesNodeReady(const Work& w, const model::Node& n) {
  if (!w.snap.kubernetes_nodes) return false;
  auto it = w.snap.kubernetes_nodes->find(n.instance_id);
  return it != w.snap.kubernetes_nodes->end() && it->second.ready;
}

/// Record `i`, whose instance the provider reports running (`o`).
void ObserveRunning(Work& w, size_t i, const provider::InstanceObservation& o) {
  const model::Node& n = w.nodes[i];
  if (n.recovery) return;  // Recover() decides
  if (w.snap.lifecycle_by_agent && n.status == is::kPending) {
    // With an agent, a booted node is Running once its lifecycle scripts succeeded.
    if (n.lifecycle_state == model::lifecycle_state::kFailed) {
      FailNode(w, i, n.lifecycle_message);
      return;
    }
    if (n.lifecycle_state != model::lifecycle_state::kSucceeded) {
      if (n.lifecycle_state.empty() &&
          w.now - AgentStartCountedFrom(n, o) > w.snap.agent_start_timeout) {
        FailNode(w, i,
                 absl::StrCat("The instance booted but its node agent did not start the "
                              "lifecycle scripts within ",
                              Seconds(w.snap.agent_start_timeout), " seconds."));
      }
      return;
    }
    if (!w.cluster.eksClusterName().empty() && !KubernetesNodeReady(w, n)) return;
  }
  if (n.status == is::kPending) {
    w.setStatus(i, is::kRunning);
    w.event("Instance", "Info",
            absl::StrCat("Instance ", n.instance_id, " is running in group ", n.group), n.group,
            n.instance_id, json{{"Instance", {{"NodeLogicalId", n.logical_id}}}});
  }
}

}  // namespace
}  // namespace hf::control::plan

namespace hf::control {

SystemTime AgentStartCountedFrom(const model::Node& node,
                                 const provider::InstanceObservation& observed) {
  return std::max(node.launch_time, observed.boot_time);
}

}  // namespace hf::control

namespace hf::control::plan {

void Observe(Work& w) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    model::Node& n = w.nodes[i];
    const provider::InstanceObservation* o = w.observed(n.instance_id);
    if (n.status == is::kShuttingDown) {
      // Gone: erased by Finish(). Still there: asked (again) to terminate.
      if (o && o->state != InstanceState::kTerminating) {
        w.plan.terminations.push_back(n.instance_id);
      }
      continue;
    }
    if (!o) {
      ObserveUnreported(w, i);
      continue;
    }
    if (!o->private_ip.empty() && (n.private_ip != o->private_ip || n.hostname != o->hostname)) {
      n.private_ip = o->private_ip;
      n.hostname = o->hostname;
      w.dirty[i] = true;
    }
    switch (o->state) {
      case InstanceState::kPending:
        break;
      case InstanceState::kRunning:
        ObserveRunning(w, i, *o);
        break;
      case InstanceState::kFailed:
        if (n.recovery) break;  // Recover() decides (a hard reboot brings it back)
        if (w.snap.lifecycle_by_agent && n.status == is::kRunning) break;  // Detect() decides
        if (n.status != is::kFailure) FailNode(w, i, o->message);
        break;
      case InstanceState::kTerminating:
        w.setStatus(i, is::kShuttingDown);
        break;
    }
  }
  // Instances the provider runs that no record knows (e.g. a record erased before the
  // provider finished): terminate them.
  std::unordered_set<std::string_view> known;
  known.reserve(w.nodes.size());
  for (const auto& n : w.nodes) known.insert(n.instance_id);
  for (const auto& o : w.snap.instances) {
    if (!known.count(o.instance_id) && o.state != InstanceState::kTerminating) {
      w.plan.terminations.push_back(o.instance_id);
    }
  }
}

}  // namespace hf::control::plan
