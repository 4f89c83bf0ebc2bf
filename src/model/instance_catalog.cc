#include "hyperfleet/model/instance_catalog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace hf::data {
// The bytes of data/instance-types.json (src/model/CMakeLists.txt, hf_embed_file).
extern const std::string_view kInstanceCatalog;
}  // namespace hf::data

namespace hf::model {
namespace {

using nlohmann::json;

Status FieldError(const std::string& name, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError("instance catalog: " + name + ": " + std::string(field) +
                                    " " + std::string(what));
}

StatusOr<AcceleratorKind> ParseKind(const std::string& text) {
  if (text == "none") return AcceleratorKind::kNone;
  if (text == "nvidia-gpu") return AcceleratorKind::kNvidiaGpu;
  if (text == "aws-trainium") return AcceleratorKind::kAwsTrainium;
  if (text == "aws-inferentia") return AcceleratorKind::kAwsInferentia;
  return absl::InvalidArgumentError("unknown accelerator_kind '" + text + "'");
}

StatusOr<InstanceTypeSpec> ParseSpec(const json& entry, size_t index) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError("instance catalog: entry " + std::to_string(index) +
                                      " is not an object");
  }
  InstanceTypeSpec spec;
  auto name = entry.find("name");
  if (name == entry.end() || !name->is_string()) {
    return absl::InvalidArgumentError("instance catalog: entry " + std::to_string(index) +
                                      " has no name");
  }
  spec.name = name->get<std::string>();

  // Required fields must be present with the right JSON type; optional ones may be null.
  auto get = [&](std::string_view field, bool nullable,
                 json::value_t type) -> StatusOr<const json*> {
    auto it = entry.find(std::string(field));
    if (it == entry.end()) return FieldError(spec.name, field, "is missing");
    if (it->is_null()) {
      if (nullable) return static_cast<const json*>(nullptr);
      return FieldError(spec.name, field, "is null");
    }
    bool ok = type == json::value_t::number_float     ? it->is_number()
              : type == json::value_t::number_integer ? it->is_number_integer()
              : type == json::value_t::string         ? it->is_string()
                                                      : it->is_boolean();
    if (!ok) return FieldError(spec.name, field, "has the wrong type");
    return &*it;
  };
  using T = json::value_t;
  HF_ASSIGN_OR_RETURN(const json* vcpus, get("vcpus", false, T::number_integer));
  spec.vcpus = vcpus->get<int>();
  HF_ASSIGN_OR_RETURN(const json* memory, get("memory_gib", false, T::number_float));
  spec.memory_gib = memory->get<double>();
  HF_ASSIGN_OR_RETURN(const json* kind, get("accelerator_kind", false, T::string));
  auto parsed_kind = ParseKind(kind->get<std::string>());
  if (!parsed_kind.ok()) {
    return FieldError(spec.name, "accelerator_kind", std::string(parsed_kind.status().message()));
  }
  spec.accelerator_kind = *parsed_kind;
  HF_ASSIGN_OR_RETURN(const json* model, get("accelerator_model", false, T::string));
  spec.accelerator_model = model->get<std::string>();
  HF_ASSIGN_OR_RETURN(const json* count, get("accelerator_count", false, T::number_integer));
  spec.accelerator_count = count->get<int>();
  HF_ASSIGN_OR_RETURN(const json* acc_mem, get("accelerator_memory_gib", true, T::number_float));
  if (acc_mem) spec.accelerator_memory_gib = acc_mem->get<double>();
  HF_ASSIGN_OR_RETURN(const json* efa, get("efa_interfaces", true, T::number_integer));
  if (efa) spec.efa_interfaces = efa->get<int>();
  HF_ASSIGN_OR_RETURN(const json* network, get("network", false, T::string));
  spec.network = network->get<std::string>();
  HF_ASSIGN_OR_RETURN(const json* gbps, get("network_gbps", false, T::number_float));
  spec.network_gbps = gbps->get<double>();
  HF_ASSIGN_OR_RETURN(const json* burst, get("network_burstable", false, T::boolean));
  spec.network_burstable = burst->get<bool>();
  HF_ASSIGN_OR_RETURN(const json* nvme, get("nvme_gb", true, T::number_integer));
  if (nvme) spec.nvme_gb = nvme->get<long>();

  if (spec.vcpus <= 0 || spec.memory_gib <= 0) {
    return FieldError(spec.name, "vcpus/memory_gib", "must be positive");
  }
  if ((spec.accelerator_kind == AcceleratorKind::kNone) != (spec.accelerator_count == 0)) {
    return FieldError(spec.name, "accelerator_count", "disagrees with accelerator_kind");
  }
  return spec;
}

}  // namespace

std::string_view AcceleratorKindName(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::kNone: return "none";
    case AcceleratorKind::kNvidiaGpu: return "nvidia-gpu";
    case AcceleratorKind::kAwsTrainium: return "aws-trainium";
    case AcceleratorKind::kAwsInferentia: return "aws-inferentia";
  }
  return "none";
}

StatusOr<InstanceCatalog> InstanceCatalog::FromJson(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("instance catalog: not a JSON object");
  }
  auto types = doc.find("instance_types");
  if (types == doc.end() || !types->is_array()) {
    return absl::InvalidArgumentError("instance catalog: no \"instance_types\" array");
  }
  InstanceCatalog catalog;
  catalog.specs_.reserve(types->size());
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < types->size(); ++i) {
    HF_ASSIGN_OR_RETURN(InstanceTypeSpec spec, ParseSpec((*types)[i], i));
    if (!seen.insert(spec.name).second) {
      return absl::InvalidArgumentError("instance catalog: duplicate instance type " +
                                        spec.name);
    }
    catalog.specs_.push_back(std::move(spec));
  }
  std::sort(catalog.specs_.begin(), catalog.specs_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return catalog;
}

const InstanceCatalog& InstanceCatalog::Embedded() {
  static const InstanceCatalog* catalog = [] {
    auto parsed = FromJson(data::kInstanceCatalog);
    if (!parsed.ok()) {
      // The embedded data is checked by the unit tests; failing here is a build defect.
      std::fprintf(stderr, "embedded instance catalog: %s\n",
                   std::string(parsed.status().message()).c_str());
      std::abort();
    }
    return new InstanceCatalog(std::move(*parsed));
  }();
  return *catalog;
}

const InstanceTypeSpec* InstanceCatalog::find(std::string_view type) const {
  auto it = std::lower_bound(specs_.begin(), specs_.end(), type,
                             [](const InstanceTypeSpec& s, std::string_view t) {
                               return s.name < t;
                             });
  if (it == specs_.end() || it->name != type) return nullptr;
  return &*it;
}

}  // namespace hf::model
