#pragma once
// When a node's lifecycle scripts may run (docs/hyperpod-contract.md "Bring-up", docs/slurm.md):
// HyperPod runs the Slurm controller's scripts first, and every other node's once they have
// succeeded. Pure functions of stored records, so that a restarted control plane decides as
// the one before it did.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/model/cluster.h"

namespace hf::agentapi {

/// The names a slurm.conf defines: the word after "NodeName=" at the start of a line.
std::vector<std::string> SlurmConfNodeNames(std::string_view conf);

/// Why `node`'s lifecycle scripts must wait, or nullopt when they may run. On a Slurm cluster
/// (`controller_group` not empty) a node of another group waits until a node of the
/// controller group that is neither failed nor shutting down has succeeded its scripts
/// (Node::lifecycle_state) and has applied a slurm.conf naming `node`'s hostname
/// (Node::slurm_conf_nodes): a configless slurmd that finds no NodeName for itself does not
/// start. `nodes` are the cluster's records as stored.
std::optional<std::string> LifecycleWait(const model::Node& node,
                                         const std::vector<model::Node>& nodes,
                                         std::string_view controller_group);

/// What a registering agent is told about its lifecycle scripts: run them (the node's
/// LifeCycleConfig, into "/tmp/<bucket>/<prefix>/", each for at most `timeout_seconds`),
/// wait (LifecycleWait; ask again after `retry_ms`), or nothing, when the node has no
/// LifeCycleConfig, its scripts have a result (results are final; a reboot does not run
/// them again), it is shutting down or its cluster failed. A node whose scripts started
/// never waits again. An unusable SourceS3Uri still runs: the bundle listing then fails
/// with the reason, which the agent reports as the node's failure.
LifecycleSpec LifecyclePlan(const model::Cluster& cluster, const model::Node& node,
                            const std::vector<model::Node>& nodes,
                            std::string_view controller_group, int64_t timeout_seconds,
                            int64_t retry_ms);

}  // namespace hf::agentapi
