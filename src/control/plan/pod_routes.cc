// Kubernetes: the routes of an EKS-orchestrated cluster's pod ranges (docs/kubernetes.md
// "Pod networking"). kube-controller-manager gives each Node a pod range; Hyperfleet plays
// the cloud of its route controller: each range goes to its node's private address, and
// the provider programs that on the cluster's network (Provider::setPodRoutes).
#include <algorithm>
#include <map>

#include "control/plan/work.h"
#include "hyperfleet/common/ipv4.h"

namespace hf::control {

std::vector<provider::PodRoute> DesiredPodRoutes(
    const std::vector<model::Node>& nodes,
    const std::map<std::string, KubernetesNodeView>& kubernetes_nodes) {
  std::map<std::string, std::pair<std::string, std::string>> by_cidr;  // -> {instance, ip}
  for (const model::Node& n : nodes) {
    if (n.status == model::InstanceStatus::kShuttingDown || !ParseIpv4(n.private_ip)) continue;
    const auto view = kubernetes_nodes.find(n.instance_id);
    if (view == kubernetes_nodes.end() || view->second.pod_cidr.empty()) continue;
    auto [it, added] = by_cidr.try_emplace(view->second.pod_cidr, n.instance_id, n.private_ip);
    if (!added && n.instance_id < it->second.first) it->second = {n.instance_id, n.private_ip};
  }
  std::vector<provider::PodRoute> routes;
  for (const auto& [cidr, owner] : by_cidr) routes.push_back({cidr, owner.second});
  return routes;
}

namespace plan {

void PlanPodRoutes(Work& w) {
  if (!w.snap.kubernetes_nodes) return;
  w.plan.pod_routes = DesiredPodRoutes(w.nodes, *w.snap.kubernetes_nodes);
}

}  // namespace plan
}  // namespace hf::control
