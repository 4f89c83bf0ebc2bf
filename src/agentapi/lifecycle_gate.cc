#include "hyperfleet/agentapi/lifecycle_gate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hyperfleet/bundle/bundle_source.h"

namespace hf::agentapi {
namespace {

namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

/// "/tmp/<bucket>/<prefix>/", where HyperPod puts a node's lifecycle bundle.
std::string BundleDirectory(const bundle::S3Location& loc) {
  std::string dir = absl::StrCat("/tmp/", loc.bucket, "/", loc.prefix);
  if (dir.back() != '/') dir.push_back('/');
  return dir;
}

}  // namespace

std::vector<std::string> SlurmConfNodeNames(std::string_view conf) {
  constexpr std::string_view kKey = "NodeName=";
  std::vector<std::string> names;
  while (!conf.empty()) {
    const size_t end = std::min(conf.find('\n'), conf.size());
    std::string_view line = conf.substr(0, end);
    conf.remove_prefix(std::min(end + 1, conf.size()));
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    names.emplace_back(line.substr(0, line.find_first_of(" \t\r")));
  }
  return names;
}

std::optional<std::string> LifecycleWait(const model::Node& node,
                                         const std::vector<model::Node>& nodes,
                                         std::string_view controller_group) {
  if (controller_group.empty() || node.group == controller_group) return std::nullopt;
  bool controller_ready = false;
  bool named = false;
  for (const auto& n : nodes) {
    if (n.group != controller_group || n.status == is::kFailure ||
        n.status == is::kShuttingDown || n.lifecycle_state != ls::kSucceeded) {
      continue;
    }
    controller_ready = true;
    const auto& applied = n.slurm_conf_nodes;
    named |= !node.hostname.empty() &&
             std::find(applied.begin(), applied.end(), node.hostname) != applied.end();
  }
  if (!controller_ready) {
    return absl::StrCat("the lifecycle scripts of the controller group ",
                        std::string(controller_group),
                        " have not succeeded yet (Slurm's controller starts first)");
  }
  if (!named) return "the Slurm controller has not loaded a slurm.conf naming this node yet";
  return std::nullopt;
}

LifecycleSpec LifecyclePlan(const model::Cluster& cluster, const model::Node& node,
                            const std::vector<model::Node>& nodes,
                            std::string_view controller_group, int64_t timeout_seconds,
                            int64_t retry_ms) {
  LifecycleSpec spec;
  const nlohmann::json& lcc = node.lifecycle;
  const bool done =
      node.lifecycle_state == ls::kSucceeded || node.lifecycle_state == ls::kFailed;
  // A failed cluster's nodes wait for nothing (its controller will not come).
  if (!lcc.is_object() || done || node.status == is::kShuttingDown ||
      cluster.status == model::cluster_status::kFailed) {
    return spec;
  }
  if (node.lifecycle_state != ls::kStarted) {
    if (auto wait = LifecycleWait(node, nodes, controller_group)) {
      spec.wait = true;
      spec.wait_reason = std::move(*wait);
      spec.retry_ms = retry_ms;
      return spec;
    }
  }
  const std::string uri = lcc.value("SourceS3Uri", "");
  auto loc = bundle::ParseS3Uri(uri);
  spec.run = true;
  spec.source_s3_uri = uri;
  spec.on_create = lcc.value("OnCreate", "");
  spec.on_init_complete = lcc.value("OnInitComplete", "");
  spec.directory = loc.ok() ? BundleDirectory(*loc) : "/tmp/lifecycle-scripts/";
  spec.timeout_seconds = timeout_seconds;
  return spec;
}

}  // namespace hf::agentapi
