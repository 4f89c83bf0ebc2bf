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

}  // namespace hf::model
