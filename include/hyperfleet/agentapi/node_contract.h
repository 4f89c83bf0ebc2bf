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
/// provisioning_parameters.json `params` (nullopt: none), then `extra` (an EKS node's
/// KubernetesNodeFiles). Pure. The same as MaterializeNodeFiles(PlanNodeFiles(...)) over
/// ResourceConfigText and BuildSlurmFiles.
NodeFiles BuildNodeFiles(const model::Cluster& cluster, const model::Node& node,
                         const std::vector<model::Node>& nodes,
                         const std::optional<nlohmann::json>& params,
                         const std::vector<NodeFile>& extra = {});

// A node's files in two steps, so that what every node of a cluster shares (resource_config.json
// and the Slurm files list every node) is built once per change of the cluster, not once per
// node and heartbeat (NodeFilesCache).

/// resource_config.json's text (ResourceConfig, as written on the node).
std::string ResourceConfigText(const model::Cluster& cluster,
                               const std::vector<model::Node>& nodes);

/// What the nodes of a cluster with the same provisioning_parameters.json share of Slurm.
struct SlurmFiles {
  std::string controller_group;  ///< empty: no Slurm roles
  std::string roles_error;       ///< why params give no roles although they name some
  /// slurm.conf, gres.conf and job_submit.lua for the controller group's nodes, slurm.conf
  /// first; empty while slurm.conf cannot be rendered yet (no controller address).
  std::vector<NodeFile> files;
  std::vector<std::string> slurm_conf_nodes;  ///< slurm.conf's NodeName= names
  size_t hash = 0;                            ///< of every file's path, mode and content
};

/// The Slurm part of the files of `cluster`'s nodes whose lifecycle configuration gives
/// `params` (nullopt: none). Pure.
SlurmFiles BuildSlurmFiles(const model::Cluster& cluster, const std::vector<model::Node>& nodes,
                           const std::optional<nlohmann::json>& params);

/// One of a node's files: its own content, or a shared text it does not own.
struct NodeFileRef {
  std::string path;
  uint32_t mode = 0600;
  std::string own;
  const std::string* shared = nullptr;  ///< outlives this (a cache snapshot)
  size_t shared_hash = 0;               ///< std::hash of *shared
  const std::string& content() const { return shared != nullptr ? *shared : own; }
};

/// A node's files before the shared texts are copied in.
struct NodeFilesPlan {
  std::vector<NodeFileRef> files;
  std::string controller_group;
  std::string roles_error;
  bool slurm = false;  ///< files include the Slurm files (the node is the controller)
  /// A hash of every file's path, mode and content (shared contents by their hashes): equal
  /// keys, equal files (up to 64-bit hash collisions). O(size of the node's own files).
  uint64_t key = 0;
};

/// The plan of `node`'s files given the cluster's resource_config.json text (and its
/// std::hash) and, when the node has a lifecycle configuration, the Slurm part for its
/// `params` (`slurm` null otherwise); `extra` files (its own, counted in the key) come last.
/// Pure; `resource_config` and `slurm` must outlive it.
NodeFilesPlan PlanNodeFiles(const model::Cluster& cluster, const model::Node& node,
                            const std::string& resource_config, size_t resource_config_hash,
                            const SlurmFiles* slurm, const std::optional<nlohmann::json>& params,
                            const std::vector<NodeFile>& extra = {});

/// The files of `plan`, with their revision (O(total size): done only when a node's files
/// changed or must be sent).
NodeFiles MaterializeNodeFiles(const NodeFilesPlan& plan);

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
