#include <string_view>
#include <unordered_map>

#include "hyperfleet/store/store.h"

namespace hf::store {

std::optional<std::vector<model::Node>> ApplyNodeChanges(std::vector<model::Node> kept,
                                                         NodeChanges changes) {
  std::unordered_map<std::string_view, model::Node*> by_id;
  by_id.reserve(kept.size() + changes.changed.size());
  for (auto& n : kept) by_id[n.instance_id] = &n;
  for (auto& n : changes.changed) by_id[n.instance_id] = &n;  // newer than the kept copy
  std::vector<model::Node> nodes;
  nodes.reserve(changes.ids.size());
  for (const std::string& id : changes.ids) {
    auto it = by_id.find(id);
    if (it == by_id.end()) return std::nullopt;
    nodes.push_back(std::move(*it->second));
  }
  return nodes;
}

}  // namespace hf::store
