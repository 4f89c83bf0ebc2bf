#pragma once
// The files the control plane puts on a node (docs/hyperpod-contract.md "Node files"):
// resource_config.json, life_cycle_config.json, provisioning_parameters.json,
// host_agent.json, and on a Slurm cluster's controller slurm.conf, gres.conf and
// job_submit.lua; the agent writes them at registration and whenever they change.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/model/cluster.h"

namespace hf::agentapi {

/// /opt/ml/config/resource_config.json for `cluster` with `nodes` (HyperPod's schema):
/// ClusterConfig {ClusterArn, ClusterName}, ClusterType "Slurm", and every declared instance
/// group with its InstanceType and Instances (InstanceName "<group>-<n>" numbered from 1 by
/// launch order, InstanceId, AgentIpAddress and CustomerIpAddress = the node's address,
/// InstanceLabel null); a group without live instances has "Instances": null. Nodes
/// shutting down or without an address are left out.
nlohmann::json ResourceConfig(const model::Cluster& cluster,
                              const std::vector<model::Node>& nodes);

/// A node's files, and what the control plane learnt of the cluster's Slurm setup while
/// building them.
struct NodeFiles {
  std::vector<NodeFile> files;
  /// A hash of `files` (53 bits: an integer every JSON reader keeps exactly); an agent
  /// confirms it once it has written them (and reloaded Slurm).
  int64_t revision = 0;
  std::optional<std::string> slurm_conf;  ///< set on the controller of a Slurm cluster
  std::string controller_group;           ///< empty: not a Slurm cluster (no roles)
  /// Why provisioning_parameters.json gives no Slurm roles (it exists but is wrong).
  std::string roles_error;
};

/// The files of `node` in `cluster`, whose nodes are `nodes`, with the bundle's
/// provisioning_parameters.json `params` (nullopt: none). Pure.
NodeFiles BuildNodeFiles(const model::Cluster& cluster, const model::Node& node,
                         const std::vector<model::Node>& nodes,
                         const std::optional<nlohmann::json>& params);

/// The lifecycle bundles' provisioning_parameters.json (at most 1 MiB), each read at most
/// once per 5 s: every node's heartbeat asks, and a user who fixes the file and creates the
/// cluster again must see the fix. Thread-safe.
class ProvisioningParameters {
 public:
  ProvisioningParameters(bundle::BundleSource& bundles, const Clock& clock);
  /// The parameters of the bundle at `source_uri`; nullopt when there is none, it is too
  /// large or it is not JSON.
  std::optional<nlohmann::json> get(const std::string& source_uri);

 private:
  static constexpr Duration kTtl = std::chrono::seconds(5);
  static constexpr size_t kMaxBytes = 1u << 20;
  bundle::BundleSource& bundles_;
  const Clock& clock_;
  std::mutex mu_;
  /// SourceS3Uri -> (when read, parameters or none).
  std::map<std::string, std::pair<SystemTime, std::optional<nlohmann::json>>> cache_;
};

}  // namespace hf::agentapi
