#include "hyperfleet/agentapi/node_contract.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "hyperfleet/agentapi/lifecycle_gate.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/slurm/slurm_config.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace is = model::instance_status;

/// `seed` with `v` mixed in (the 64-bit finaliser of MurmurHash3): order-sensitive.
uint64_t Mix(uint64_t seed, uint64_t v) {
  uint64_t h = seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

uint64_t FileKey(uint64_t seed, const std::string& path, uint32_t mode, size_t content_hash) {
  return Mix(Mix(Mix(seed, std::hash<std::string>{}(path)), mode), content_hash);
}

}  // namespace

json ResourceConfig(const model::Cluster& cluster, const std::vector<model::Node>& nodes) {
  json groups = json::array();
  for (const auto& g : cluster.groups) {
    std::vector<const model::Node*> members;
    for (const auto& n : nodes) {
      if (n.group == g.name && n.status != is::kShuttingDown && !n.private_ip.empty()) {
        members.push_back(&n);
      }
    }
    std::sort(members.begin(), members.end(), [](const model::Node* a, const model::Node* b) {
      if (a->launch_time != b->launch_time) return a->launch_time < b->launch_time;
      return a->instance_id < b->instance_id;
    });
    json instances = json::array();
    int index = 0;
    for (const auto* n : members) {
      instances.push_back({{"InstanceName", absl::StrCat(g.name, "-", ++index)},
                           {"InstanceId", n->instance_id},
                           {"AgentIpAddress", n->private_ip},
                           {"CustomerIpAddress", n->private_ip},
                           {"InstanceLabel", nullptr}});
    }
    groups.push_back({{"Name", g.name},
                      {"InstanceType", g.instance_type},
                      {"Instances", instances.empty() ? json(nullptr) : instances}});
  }
  return json{{"ClusterConfig", {{"ClusterArn", cluster.arn}, {"ClusterName", cluster.name}}},
              {"ClusterType", "Slurm"},
              {"InstanceGroups", groups}};
}

std::string ResourceConfigText(const model::Cluster& cluster,
                               const std::vector<model::Node>& nodes) {
  return ResourceConfig(cluster, nodes).dump(2) + "\n";
}

SlurmFiles BuildSlurmFiles(const model::Cluster& cluster, const std::vector<model::Node>& nodes,
                           const std::optional<json>& params) {
  SlurmFiles out;
  auto roles = slurm::SlurmRolesOf(cluster, params.value_or(json()));
  if (!roles.ok()) {
    if (params && params->is_object() &&
        (params->contains("controller_group") || params->contains("worker_groups") ||
         params->contains("login_group"))) {
      out.roles_error = std::string(roles.status().message());
    }
    return out;
  }
  out.controller_group = roles->controller_group;
  const auto& catalog = model::InstanceCatalog::Embedded();
  auto conf = slurm::RenderSlurmConf(cluster, nodes, *roles, catalog);
  if (!conf.ok()) {
    spdlog::debug("no slurm.conf for cluster {} yet: {}", cluster.name,
                  std::string(conf.status().message()));
    return out;
  }
  out.slurm_conf_nodes = SlurmConfNodeNames(*conf);
  out.files.push_back({"/opt/slurm/etc/slurm.conf", 0644, std::move(*conf)});
  if (auto gres = slurm::RenderGresConf(cluster, nodes, *roles, catalog); gres.ok()) {
    out.files.push_back({"/opt/slurm/etc/gres.conf", 0644, std::move(*gres)});
  }
  // slurm.conf names it (JobSubmitPlugins=lua): task governance holds jobs with it.
  out.files.push_back({"/opt/slurm/etc/job_submit.lua", 0644, slurm::RenderJobSubmitLua()});
  for (const auto& f : out.files) {
    out.hash = FileKey(out.hash, f.path, f.mode, std::hash<std::string>{}(f.content));
  }
  return out;
}

NodeFilesPlan PlanNodeFiles(const model::Cluster& cluster, const model::Node& node,
                            const std::string& resource_config, size_t resource_config_hash,
                            const SlurmFiles* slurm, const std::optional<json>& params,
                            const std::vector<NodeFile>& extra) {
  NodeFilesPlan out;
  auto add = [&](const std::string& path, const json& content) {
    out.files.push_back({path, 0600, content.dump(2) + "\n"});
  };
  out.files.push_back({"/opt/ml/config/resource_config.json", 0600, {}, &resource_config,
                       resource_config_hash});
  const json& lcc = node.lifecycle;
  if (lcc.is_object()) {
    json life{{"S3Uri", lcc.value("SourceS3Uri", "")}, {"OnCreate", lcc.value("OnCreate", "")}};
    if (lcc.contains("OnInitComplete")) life["OnInitComplete"] = lcc["OnInitComplete"];
    add("/opt/ml/config/life_cycle_config.json", life);
    // provisioning_parameters.json travels with the scripts; HyperPod also puts a copy here.
    if (params) add("/opt/ml/config/provisioning_parameters.json", *params);
    // On the controller, slurm.conf as HyperPod's cluster agent writes it before the
    // lifecycle scripts run (they wait for it); refreshed as the cluster changes.
    if (slurm != nullptr) {
      out.controller_group = slurm->controller_group;
      out.roles_error = slurm->roles_error;
      if (!slurm->controller_group.empty() && slurm->controller_group == node.group &&
          !slurm->files.empty()) {
        out.slurm = true;
        for (const auto& f : slurm->files) {
          out.files.push_back({f.path, f.mode, {}, &f.content, 0});
        }
      }
    }
  }
  // gres.conf names NVIDIA's device files: slurmd's drop-in makes stand-ins where there are
  // none (a local node), or a GPU instance type registers INVALID_REG.
  if (const auto* spec = model::InstanceCatalog::Embedded().find(node.instance_type);
      spec != nullptr && spec->accelerator_kind == model::AcceleratorKind::kNvidiaGpu &&
      spec->accelerator_count > 0) {
    out.files.push_back({std::string(slurm::kEmulatedGpusDropInPath), 0644,
                         slurm::RenderEmulatedGpusDropIn(spec->accelerator_count)});
  }
  add("/opt/ml/config/host_agent.json",
      json{{"ClusterArn", cluster.arn}, {"InstanceId", node.instance_id},
           {"InstanceGroupName", node.group}});
  for (const auto& f : extra) out.files.push_back({f.path, f.mode, f.content});
  // Shared contents count by their hashes (the Slurm files by their set's), so the key costs
  // nothing that grows with the cluster.
  for (const auto& f : out.files) {
    if (f.shared == &resource_config) {
      out.key = FileKey(out.key, f.path, f.mode, resource_config_hash);
    } else if (f.shared == nullptr) {
      out.key = FileKey(out.key, f.path, f.mode, std::hash<std::string>{}(f.own));
    }
  }
  if (out.slurm) out.key = Mix(out.key, slurm->hash);
  return out;
}

NodeFiles MaterializeNodeFiles(const NodeFilesPlan& plan) {
  NodeFiles out;
  out.controller_group = plan.controller_group;
  out.roles_error = plan.roles_error;
  out.files.reserve(plan.files.size());
  for (const auto& f : plan.files) out.files.push_back({f.path, f.mode, f.content()});
  if (plan.slurm) {
    for (const auto& f : out.files) {
      if (f.path == "/opt/slurm/etc/slurm.conf") out.slurm_conf = f.content;
    }
  }
  // The hash of the files' JSON, as before the typed protocol, so that a restart of an
  // upgraded control plane does not send every node its files again.
  out.revision = static_cast<int64_t>(std::hash<std::string>{}(json(out.files).dump()) &
                                      ((uint64_t{1} << 53) - 1));
  return out;
}

NodeFiles BuildNodeFiles(const model::Cluster& cluster, const model::Node& node,
                         const std::vector<model::Node>& nodes,
                         const std::optional<json>& params,
                         const std::vector<NodeFile>& extra) {
  const std::string resource_config = ResourceConfigText(cluster, nodes);
  std::optional<SlurmFiles> slurm;
  if (node.lifecycle.is_object()) slurm = BuildSlurmFiles(cluster, nodes, params);
  return MaterializeNodeFiles(PlanNodeFiles(cluster, node, resource_config,
                                            std::hash<std::string>{}(resource_config),
                                            slurm ? &*slurm : nullptr, params, extra));
}

ProvisioningParameters::ProvisioningParameters(bundle::BundleSource& bundles, const Clock& clock)
    : bundles_(bundles), clock_(clock) {}

std::optional<json> ProvisioningParameters::get(const std::string& source_uri) {
  const SystemTime now = clock_.now();
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(source_uri);
    if (it != cache_.end() && now - it->second.first < kTtl) return it->second.second;
  }
  std::optional<json> value;
  if (auto loc = bundle::ParseS3Uri(source_uri); loc.ok()) {
    auto text = bundles_.read(*loc, "provisioning_parameters.json");
    if (text.ok() && text->size() <= kMaxBytes) {
      json parsed = json::parse(*text, nullptr, false);
      if (!parsed.is_discarded()) value = std::move(parsed);
    }
  }
  std::lock_guard lock(mu_);
  cache_[source_uri] = {now, value};
  return value;
}

}  // namespace hf::agentapi
