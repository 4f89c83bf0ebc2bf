#pragma once
// What node agents tell the control plane about node health, and the Slurm node states the
// control plane asks the controller node's agent to set (docs/resiliency.md). Shared by the
// agent service (which hears it) and the cluster planner (which decides on it).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::model {

/// What the control plane last heard from one instance's node agent.
struct NodeLiveness {
  SystemTime last_heard{};  ///< last registration or heartbeat
  /// The last health report (docs/nodes.md "Health checks": {"verdict", "checked_at" epoch
  /// seconds, "findings": [{"check", "severity", "message"}]}), or null.
  nlohmann::json health;
};

/// One Slurm node as the controller node's agent last saw it (`sinfo -N`).
struct SlurmNodeState {
  std::string name;        ///< NodeName (the node's hostname, ip-a-b-c-d)
  std::string state;       ///< sinfo's long state, lower case: idle, alloc, down*, fail, ...
  int alloc_cpus = 0;      ///< CPUs allocated to jobs (0: no job runs there)
  std::string reason;      ///< Reason, empty when none (exactly as set)
  SystemTime reason_time{};  ///< when the reason was set (second resolution); zero if none
};

/// A change the controller node's agent makes in Slurm (`scontrol update nodename=...`).
struct SlurmMark {
  std::string node;    ///< NodeName
  std::string action;  ///< "down" (state=down reason=...) or "resume" (state=resume)
  /// down: the reason to set ("Hyperfleet: ..."); resume: the reason the node must still
  /// carry, so that a mark set after the planner looked is not lifted.
  std::string reason;
  bool operator==(const SlurmMark&) const = default;
};

/// What node agents said about one cluster, as the cluster planner needs it.
struct ClusterHealthView {
  std::map<std::string, NodeLiveness> nodes;  ///< by instance id
  /// The Slurm controller's view of its nodes when its agent reported it recently (within
  /// a few heartbeats); nullopt otherwise and for clusters without Slurm.
  std::optional<std::vector<SlurmNodeState>> slurm_nodes;
  std::string controller_group;  ///< the group running slurmctld; empty if unknown
};

}  // namespace hf::model
