// Kubernetes: the Nodes of an EKS-orchestrated cluster (docs/kubernetes.md "Health on
// Nodes"). A user's `kubectl label node ... node-health-status=UnschedulablePendingReplacement`
// (or ...PendingReboot) asks for that node recovery, as on HyperPod; and every Node's health
// label and NoSchedule taint follow its instance: being replaced (or faulty, replacement
// due) is UnschedulablePendingReplacement, being rebooted UnschedulablePendingReboot, a
// running node Schedulable (Unschedulable for groups with OnStartDeepHealthChecks). A
// faulty instance's Node also gets HyperPod's fault labels (category, reason) and details
// annotation, removed once the instance is healthy again.
#include <algorithm>
#include <optional>

#include "control/plan/work.h"
#include "hyperfleet/model/kubernetes_labels.h"

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

/// The fault labels of a Node (KubernetesNodeHealth's fault_*); all "" for none.
struct FaultShown {
  std::string type, reason, details;
};

/// A fault's labels: its kind, its message as a label value (the kind when nothing of it
/// is left) and the message itself.
FaultShown ShownAs(const std::string& kind, const std::string& message) {
  std::string reason = model::LabelValueOf(message);
  return {kind, reason.empty() ? kind : std::move(reason), message};
}

/// The fault labels recovery `r` gives: a detected fault's; none for a recovery someone
/// asked for (the API, a Slurm Action: mark, a user's label on the Node): no fault was seen.
FaultShown ShownFor(const Request& r) {
  switch (r.source) {
    case Source::kDead:
    case Source::kUnresponsive:
    case Source::kHardwareFault:
    case Source::kSoftwareFault:
    case Source::kReplacementFailed: return ShownAs(model::ToString(r.source), r.reason);
    case Source::kApi:
    case Source::kSlurmAction:
    case Source::kKubernetesLabel: return {};
  }
  return {};
}

/// What the fault labels of node `n` (Node `view`) should say now.
FaultShown WantedFault(const Work& w, const model::Node& n, const KubernetesNodeView& view) {
  if (n.recovery) return ShownFor(*n.recovery);
  if (n.fault) return ShownAs(model::ToString(n.fault->kind), n.fault->message);
  if (n.status == is::kShuttingDown) {
    // Replaced this pass: why; replaced earlier: as its Node shows it until it goes (the
    // recovery ended with the replacement).
    auto it = w.replaced_now.find(n.instance_id);
    if (it != w.replaced_now.end()) return ShownFor(it->second);
    return {view.fault_type, view.fault_reason, view.fault_details};
  }
  return {};
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
    FaultShown fault = WantedFault(w, n, *view);
    if (view->health == wanted && view->health_set == wanted && view->health_taint == taint &&
        view->fault_type == fault.type && view->fault_reason == fault.reason &&
        view->fault_details == fault.details) {
      continue;
    }
    w.plan.kubernetes_health.push_back({n.instance_id, wanted, tainted, std::move(fault.type),
                                        std::move(fault.reason), std::move(fault.details)});
  }
}

}  // namespace hf::control::plan
