// ClusterController's shell around the Nodes of EKS-orchestrated clusters
// (docs/kubernetes.md): reads them into the snapshot, applies the plan's health labels and
// taints, removes the Nodes (and pods) of terminated instances, and has the provider route
// the Nodes' pod ranges. Decisions are the plan's
// (plan/kubernetes.cc, plan/pod_routes.cc, plan/observe.cc).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "hyperfleet/control/cluster_controller.h"

namespace hf::control {
namespace {

/// The annotation beside the health label that holds the value Hyperfleet gave it, so that
/// a user's `kubectl label` (which changes the label only) is told apart.
constexpr const char* kHealthSetAnnotation = "hyperfleet/node-health-status";

/// The value of `key` in `values`; "" when absent.
std::string ValueOf(const std::map<std::string, std::string>& values, const std::string& key) {
  auto it = values.find(key);
  return it == values.end() ? "" : it->second;
}

/// The planner's view of `node`, whose fault labels have the keys `fault`.
KubernetesNodeView ViewOf(const eks::KubeNode& node, const model::FaultLabelKeys& fault) {
  KubernetesNodeView view;
  view.ready = node.ready;
  if (auto it = node.labels.find(node_health::kLabel); it != node.labels.end()) {
    view.health = it->second;
  }
  if (auto it = node.annotations.find(kHealthSetAnnotation); it != node.annotations.end()) {
    view.health_set = it->second;
  }
  for (const eks::Taint& t : node.taints) {
    if (t.key == node_health::kLabel && t.effect == "NoSchedule") view.health_taint = t.value;
  }
  view.pod_cidr = node.pod_cidr;
  view.fault_type = ValueOf(node.labels, fault.type);
  view.fault_reason = ValueOf(node.labels, fault.reason);
  view.fault_details = ValueOf(node.annotations, fault.details);
  return view;
}

/// The change that gives a Node `health` (fault labels of the keys `fault`; each one ""
/// is removed).
eks::NodeUpdate UpdateFor(const KubernetesNodeHealth& health, const model::FaultLabelKeys& fault) {
  eks::NodeUpdate update;
  update.set_labels[node_health::kLabel] = health.health;
  update.set_annotations[kHealthSetAnnotation] = health.health;
  for (const auto& [key, value] : {std::pair{&fault.type, &health.fault_type},
                                   std::pair{&fault.reason, &health.fault_reason}}) {
    if (value->empty()) {
      update.remove_labels.push_back(*key);
    } else {
      update.set_labels[*key] = *value;
    }
  }
  if (health.fault_details.empty()) {
    update.remove_annotations.push_back(fault.details);
  } else {
    update.set_annotations[fault.details] = health.fault_details;
  }
  eks::Taint taint{node_health::kLabel, health.health, "NoSchedule"};
  if (health.tainted) {
    update.set_taints.push_back(std::move(taint));
  } else {
    update.remove_taints.push_back(std::move(taint));
  }
  return update;
}

}  // namespace

void ClusterController::observeKubernetesNodes(ClusterSnapshot& snap) {
  const std::string eks = snap.cluster.eksClusterName();
  if (eks.empty() || hooks_.kubernetes == nullptr) return;
  const bool any = std::any_of(snap.nodes.begin(), snap.nodes.end(), [](const model::Node& n) {
    return n.status != model::InstanceStatus::kShuttingDown &&
           n.lifecycle_state == model::lifecycle_state::kSucceeded;
  });
  if (!any) return;  // no instance can have joined yet
  const SteadyTime now = clock_.monotonic();
  auto it = kubernetes_seen_.find(eks);
  if (it == kubernetes_seen_.end() || now - it->second.first >= std::chrono::seconds(1)) {
    auto nodes = hooks_.kubernetes->nodes(eks);
    if (!nodes.ok()) {
      spdlog::debug("cluster {}: Nodes of EKS cluster {}: {}", snap.cluster.id, eks,
                    nodes.status().ToString());
      return;
    }
    it = kubernetes_seen_.insert_or_assign(eks, std::pair{now, *std::move(nodes)}).first;
  }
  std::map<std::string, KubernetesNodeView> views;
  for (const eks::KubeNode& node : it->second.second) {
    views.emplace(node.name, ViewOf(node, options_.fault_labels));
  }
  std::map<std::string, KubernetesNodeView> by_instance;
  for (const model::Node& n : snap.nodes) {
    auto v = views.find(model::KubernetesNodeName(n.instance_id));
    if (v != views.end()) by_instance.emplace(n.instance_id, v->second);
  }
  snap.kubernetes_nodes = std::move(by_instance);
}

void ClusterController::applyKubernetesPlan(const model::Cluster& cluster,
                                            const ClusterPlan& plan) {
  const std::string eks = cluster.eksClusterName();
  if (eks.empty() || hooks_.kubernetes == nullptr) return;
  for (const KubernetesNodeHealth& health : plan.kubernetes_health) {
    const std::string node = model::KubernetesNodeName(health.instance_id);
    Status s = hooks_.kubernetes->updateNode(eks, node, UpdateFor(health, options_.fault_labels));
    if (s.ok()) {
      spdlog::info("cluster {}: Node {} is {}{}", cluster.id, node, health.health,
                   health.fault_type.empty()
                       ? ""
                       : absl::StrCat(" (", health.fault_type, ": ", health.fault_reason, ")"));
    } else {
      spdlog::warn("cluster {}: Node {} not labelled {}: {}", cluster.id, node, health.health,
                   s.ToString());
    }
  }
  // Seen again at the next pass: the labels just set must not read as a user's.
  if (!plan.kubernetes_health.empty()) kubernetes_seen_.erase(eks);
  for (const auto* ids : {&plan.kills, &plan.terminations}) {
    for (const std::string& id : *ids) {
      if (kubernetes_removed_.contains(id)) continue;
      Status s = hooks_.kubernetes->removeNode(eks, model::KubernetesNodeName(id));
      if (s.ok()) {
        kubernetes_removed_.insert(id);
      } else {
        spdlog::warn("cluster {}: Node of {} not removed: {}", cluster.id, id, s.ToString());
      }
    }
  }
}

void ClusterController::applyPodRoutes(const model::Cluster& cluster, const ClusterPlan& plan) {
  if (!plan.pod_routes) {
    if (cluster.status == model::cluster_status::kDeleting) pod_routes_set_.erase(cluster.id);
    return;
  }
  const SteadyTime now = clock_.monotonic();
  auto it = pod_routes_set_.find(cluster.id);
  const bool same = it != pod_routes_set_.end() && it->second.second == *plan.pod_routes;
  // The same routes again once per resync: the provider may have made the network anew.
  if (same && now - it->second.first < options_.resync_interval) return;
  Status s = provider_.setPodRoutes(cluster.id, *plan.pod_routes);
  if (!s.ok() && !absl::IsUnimplemented(s)) {
    spdlog::warn("cluster {}: pod routes not set: {}", cluster.id, s.ToString());
    return;
  }
  if (s.ok() && !same) {
    std::vector<std::string> text;
    for (const provider::PodRoute& r : *plan.pod_routes) {
      text.push_back(r.pod_cidr + " via " + r.node_ip);
    }
    spdlog::info("cluster {}: pod routes: {}", cluster.id,
                 text.empty() ? "none" : absl::StrJoin(text, ", "));
  }
  pod_routes_set_.insert_or_assign(cluster.id, std::pair{now, *plan.pod_routes});
}

}  // namespace hf::control
