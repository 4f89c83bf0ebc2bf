#include "hyperfleet/agentapi/node_contract.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/slurm/slurm_config.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace is = model::instance_status;

/// slurm.conf, gres.conf and job_submit.lua for the controller of a Slurm cluster; none
/// while slurm.conf cannot be rendered yet (e.g. no node has an address).
void AddSlurmFiles(const model::Cluster& cluster, const std::vector<model::Node>& nodes,
                   const slurm::SlurmRoles& roles, NodeFiles& out) {
  const auto& catalog = model::InstanceCatalog::Embedded();
  auto conf = slurm::RenderSlurmConf(cluster, nodes, roles, catalog);
  if (!conf.ok()) {
    spdlog::debug("no slurm.conf for cluster {} yet: {}", cluster.name,
                  std::string(conf.status().message()));
    return;
  }
  out.files.push_back({"/opt/slurm/etc/slurm.conf", 0644, *conf});
  out.slurm_conf = std::move(*conf);
  if (auto gres = slurm::RenderGresConf(cluster, nodes, roles, catalog); gres.ok()) {
    out.files.push_back({"/opt/slurm/etc/gres.conf", 0644, *gres});
  }
  // slurm.conf names it (JobSubmitPlugins=lua): task governance holds jobs with it.
  out.files.push_back({"/opt/slurm/etc/job_submit.lua", 0644, slurm::RenderJobSubmitLua()});
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

NodeFiles BuildNodeFiles(const model::Cluster& cluster, const model::Node& node,
                         const std::vector<model::Node>& nodes,
                         const std::optional<json>& params) {
  NodeFiles out;
  auto add = [&](const std::string& path, const json& content) {
    out.files.push_back({path, 0600, content.dump(2) + "\n"});
  };
  add("/opt/ml/config/resource_config.json", ResourceConfig(cluster, nodes));
  const json& lcc = node.lifecycle;
  if (lcc.is_object()) {
    json life{{"S3Uri", lcc.value("SourceS3Uri", "")}, {"OnCreate", lcc.value("OnCreate", "")}};
    if (lcc.contains("OnInitComplete")) life["OnInitComplete"] = lcc["OnInitComplete"];
    add("/opt/ml/config/life_cycle_config.json", life);
    // provisioning_parameters.json travels with the scripts; HyperPod also puts a copy here.
    if (params) add("/opt/ml/config/provisioning_parameters.json", *params);
    // On the controller, slurm.conf as HyperPod's cluster agent writes it before the
    // lifecycle scripts run (they wait for it); refreshed as the cluster changes.
    auto roles = slurm::SlurmRolesOf(cluster, params.value_or(json()));
    if (roles.ok()) {
      out.controller_group = roles->controller_group;
      if (roles->controller_group == node.group) AddSlurmFiles(cluster, nodes, *roles, out);
    } else if (params && params->is_object() &&
               (params->contains("controller_group") || params->contains("worker_groups") ||
                params->contains("login_group"))) {
      out.roles_error = std::string(roles.status().message());
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
  // The hash of the files' JSON, as before the typed protocol, so that a restart of an
  // upgraded control plane does not send every node its files again.
  out.revision = static_cast<int64_t>(std::hash<std::string>{}(json(out.files).dump()) &
                                      ((uint64_t{1} << 53) - 1));
  return out;
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
