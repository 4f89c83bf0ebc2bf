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
