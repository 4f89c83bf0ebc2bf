#pragma once
// The node files of every cluster's nodes, kept between heartbeats (issue 19): a heartbeat of
// an agent that already holds its files costs nothing that grows with the cluster.
//
// Per cluster the cache keeps its node records as of a store revision (a node's write moves
// its cluster's revision, store.h), resource_config.json's text and, per provisioning
// parameters, the Slurm files: built once per change of the cluster, read up to date with
// Store::nodesChangedSince. Per node it keeps the key of its last files (NodeFilesPlan::key)
// and their revision, so that a node whose files did not change gets its revision without
// copying or hashing the shared texts.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/agentapi/node_contract.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/store/store.h"

namespace hf::agentapi {

/// Thread-safe. A cluster's shared files are built by one caller while the others of that
/// cluster wait; the rest runs outside the locks.
class NodeFilesCache {
 public:
  /// A cluster's node records and the texts its nodes share, as of `revision`. Immutable.
  struct Snapshot {
    int64_t revision = 0;
    model::Cluster cluster;
    std::vector<model::Node> nodes;
    std::string resource_config;  ///< ResourceConfigText
    size_t resource_config_hash = 0;
  };
  /// What a node's heartbeat or registration needs.
  struct Result {
    int64_t revision = 0;  ///< the files' revision (NodeFiles::revision)
    std::string controller_group;
    std::string roles_error;
    /// The files; empty when the agent holds them already (agent_revision == revision).
    std::vector<NodeFile> files;
    /// The cluster's nodes the files were built from.
    std::shared_ptr<const Snapshot> snapshot;
    /// The Slurm part when the node is the Slurm controller (its files include slurm.conf).
    std::shared_ptr<const SlurmFiles> slurm;
  };

  /// Entries of clusters no node asked about for this long are dropped.
  static constexpr Duration kIdle = std::chrono::minutes(10);

  NodeFilesCache(store::Store& store, const Clock& clock);

  /// The files of `node` of `cluster` (both as just read from the store) whose lifecycle
  /// bundle has provisioning_parameters.json `params` (nullopt: none), `extra` (an EKS
  /// node's KubernetesNodeFiles) included and counted in the revision; the files themselves
  /// only when `agent_revision` (what the agent holds; nullopt: nothing) differs from their
  /// revision. Reads the store only when the cluster's revision is newer than the kept
  /// copy's. Errors: the store's.
  StatusOr<Result> get(const model::Cluster& cluster, const model::Node& node,
                       const std::optional<nlohmann::json>& params,
                       std::optional<int64_t> agent_revision,
                       const std::vector<NodeFile>& extra = {});

  /// Drops what is kept of the cluster (it no longer exists).
  void forget(const std::string& cluster_id);

 private:
  /// A node's last files: their key and revision.
  struct Memo {
    uint64_t key = 0;
    int64_t revision = 0;
  };
  struct Entry {
    std::mutex mu;  ///< guards the members below; held while the snapshot is refreshed
    std::shared_ptr<const Snapshot> snapshot;
    /// The Slurm part per (params) of this snapshot, built when a node first asks.
    std::vector<std::pair<std::optional<nlohmann::json>, std::shared_ptr<const SlurmFiles>>>
        slurm;
    std::unordered_map<std::string, Memo> memos;  ///< by instance id
  };

  std::shared_ptr<Entry> entry(const std::string& cluster_id);
  /// Brings `e`'s snapshot up to `cluster` (e.mu held).
  Status refresh(Entry& e, const model::Cluster& cluster);
  /// The Slurm part for `params` of `e`'s snapshot (e.mu held).
  std::shared_ptr<const SlurmFiles> slurmFor(Entry& e, const std::optional<nlohmann::json>& params);

  store::Store& store_;
  const Clock& clock_;
  std::mutex mu_;  ///< guards entries_
  struct Slot {
    std::shared_ptr<Entry> entry;
    SteadyTime used;
  };
  std::unordered_map<std::string, Slot> entries_;  ///< by cluster id
};

}  // namespace hf::agentapi
