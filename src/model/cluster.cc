#include "hyperfleet/model/cluster.h"

namespace hf::model {

const InstanceGroup* Cluster::group(const std::string& group_name) const {
  for (const auto& g : groups) {
    if (g.name == group_name) return &g;
  }
  return nullptr;
}

bool Cluster::continuous() const {
  auto it = spec.find("NodeProvisioningMode");
  return it != spec.end() && it->is_string() && *it == "Continuous";
}

std::string Cluster::eksClusterName() const {
  const auto orchestrator = spec.find("Orchestrator");
  if (orchestrator == spec.end() || !orchestrator->is_object()) return "";
  const auto eks = orchestrator->find("Eks");
  if (eks == orchestrator->end() || !eks->is_object()) return "";
  const auto arn = eks->find("ClusterArn");
  if (arn == eks->end() || !arn->is_string()) return "";
  const std::string& text = arn->get_ref<const std::string&>();
  const size_t at = text.rfind(":cluster/");
  return at == std::string::npos ? "" : text.substr(at + 9);
}

bool HasOnStartDeepHealthChecks(const Cluster& cluster, const Node& node) {
  const InstanceGroup* group = cluster.group(node.group);
  if (group == nullptr || !group->spec.is_object()) return false;
  const auto it = group->spec.find("OnStartDeepHealthChecks");
  return it != group->spec.end() && it->is_array() && !it->empty();
}

std::string KubernetesNodeName(std::string_view instance_id) {
  return "hyperpod-" + std::string(instance_id);
}

nlohmann::json NodeSpecMembers(const InstanceGroup& g) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* key : {"ThreadsPerCore", "InstanceStorageConfigs", "OverrideVpcConfig"}) {
    if (g.spec.contains(key)) out[key] = g.spec[key];
  }
  return out;
}

Event MakeEvent(std::string id, std::string cluster_id, SystemTime time, EventText text) {
  Event e;
  e.id = std::move(id);
  e.cluster_id = std::move(cluster_id);
  e.time = time;
  e.resource_type = std::move(text.resource_type);
  e.level = std::move(text.level);
  e.description = std::move(text.description);
  e.group = std::move(text.group);
  e.instance_id = std::move(text.instance_id);
  e.metadata = std::move(text.metadata);
  return e;
}

}  // namespace hf::model
