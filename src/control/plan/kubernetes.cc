// Kubernetes: the Nodes of an EKS-orchestrated cluster (docs/kubernetes.md "Health on
// Nodes"). A user's `kubectl label node ... node-health-status=UnschedulablePendingReplacement`
// (or ...PendingReboot) asks for that node recovery, as on HyperPod; and every Node's health
// label and NoSchedule taint follow its instance: being replaced (or faulty, replacement
// due) is UnschedulablePendingReplacement, being rebooted UnschedulablePendingReboot, a
// running node Schedulable (Unschedulable for groups with OnStartDeepHealthChecks).
#include <algorithm>
#include <optional>

#include "control/plan/work.h"

namespace hf::control::plan {
namespace {

const KubernetesNodeView* ViewOf(const Work& w, const model::Node& n) {
  if (!w.snap.kubernetes_nodes) return nullptr;
  auto it = w.snap.kubernetes_nodes->find(n.instance_id);
  return it == w.snap.kubernetes_nodes->end() ? nullptr : &it->second;
}

/// The recovery a health label value asks for; nullopt for the others.
std::optional<Action> RequestedBy(const std::string& health) {
  if (health == node_health::kPendingReplacement) return Action::kReplace;
  if (health == node_health::kPendingReboot) return Action::kReboot;
  return std::nullopt;
}

/// What the health label of node `n` should say now; "" when nothing (not joined yet,
/// shutting down: its Node is being removed).
std::string WantedHealth(const Work& w, const model::Node& n) {
  if (n.recovery) {
    return n.recovery->action == Action::kReplace ? node_health::kPendingReplacement
                                                  : node_health::kPendingReboot;
  }
  if (n.fault) {
    return n.fault->kind == FaultKind::kSoftwareFault ? node_health::kPendingReboot
                                                      : node_health::kPendingReplacement;
  }
  if (n.status == is::kShuttingDown) {
    // Being replaced: shown so until its Node goes (the same pass removes it).
    const bool replaced = std::any_of(w.nodes.begin(), w.nodes.end(), [&](const model::Node& m) {
      return m.marks.replacement_of == n.instance_id;
    });
    return replaced ? node_health::kPendingReplacement : "";
  }
  if (n.status != is::kRunning) return "";
  return model::HasOnStartDeepHealthChecks(w.cluster, n) ? node_health::kUnschedulable
                                                         : node_health::kSchedulable;
}

}  // namespace

void DetectKubernetesRequests(Work& w) {
  if (!w.snap.kubernetes_nodes) return;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    model::Node& n = w.nodes[i];
    const KubernetesNodeView* view = ViewOf(w, n);
    if (view == nullptr || n.status != is::kRunning || n.recovery) continue;
    // Only a value Hyperfleet did not set itself: its own label stays until it changes it.
    const std::optional<Action> action = RequestedBy(view->health);
    if (!action || view->health == view->health_set) continue;
    Request request;
    request.action = *action;
    request.source = Source::kKubernetesLabel;
    request.requested_at = w.now;
    request.reason = absl::StrCat("Node ", model::KubernetesNodeName(n.instance_id),
                                  " was labelled ", node_health::kLabel, "=", view->health);
    n.recovery = request;
    w.dirty[i] = true;
    w.event("Instance", "Info",
            absl::StrCat(*action == Action::kReplace ? "Replacement" : "Reboot",
                         " of instance ", n.instance_id, " requested: ", request.reason),
            n.group, n.instance_id);
  }
}

void LabelKubernetesNodes(Work& w) {
  if (!w.snap.kubernetes_nodes) return;
  for (const model::Node& n : w.nodes) {
    const KubernetesNodeView* view = ViewOf(w, n);
    if (view == nullptr) continue;
    const std::string wanted = WantedHealth(w, n);
    if (wanted.empty()) continue;
    const bool tainted = wanted != node_health::kSchedulable;
    const std::string taint = tainted ? wanted : "";
    if (view->health == wanted && view->health_set == wanted && view->health_taint == taint) {
      continue;
    }
    w.plan.kubernetes_health.push_back({n.instance_id, wanted, tainted});
  }
}

}  // namespace hf::control::plan
