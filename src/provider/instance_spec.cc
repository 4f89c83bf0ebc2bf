#include "hyperfleet/provider/provider.h"

namespace hf::provider {

void WriteInstanceSpec(const InstanceSpec& spec, nlohmann::json& into) {
  into["instance_id"] = spec.instance_id;
  into["cluster_id"] = spec.cluster_id;
  into["cluster_name"] = spec.cluster_name;
  into["group"] = spec.group;
  into["instance_type"] = spec.instance_type;
  into["lifecycle"] = spec.lifecycle;
  into["secondary_ebs_volume"] = spec.secondary_ebs_volume;
  into["requested_hostname"] = spec.hostname;
  into["image_variant"] = std::string(NodeImageVariantName(spec.image_variant));
}

InstanceSpec ReadInstanceSpec(const nlohmann::json& from) {
  InstanceSpec spec;
  if (!from.is_object()) return spec;
  const auto text = [&](const char* key) {
    const auto it = from.find(key);
    return it != from.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  spec.instance_id = text("instance_id");
  spec.cluster_id = text("cluster_id");
  spec.cluster_name = text("cluster_name");
  spec.group = text("group");
  spec.instance_type = text("instance_type");
  if (const auto it = from.find("lifecycle"); it != from.end()) spec.lifecycle = *it;
  if (const auto it = from.find("secondary_ebs_volume"); it != from.end() && it->is_boolean()) {
    spec.secondary_ebs_volume = it->get<bool>();
  }
  spec.hostname = text("requested_hostname");
  spec.image_variant =
      ParseNodeImageVariant(text("image_variant")).value_or(NodeImageVariant::kSlurm);
  return spec;
}

}  // namespace hf::provider
