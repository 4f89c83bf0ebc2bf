#pragma once
// What node agents tell the control plane about node health, and the Slurm node states the
// control plane asks the controller node's agent to set (docs/resiliency.md). Shared by the
// agent service (which hears it) and the cluster planner (which decides on it).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::model {

/// How bad a health finding is (the node agent's "severity" and "verdict": "ok", "warning",
/// "soft_fault", "hard_fault"; docs/nodes.md "Health checks"). kUnknown: any other string,
/// from an agent newer than this control plane; it asks for nothing, like kOk and kWarning.
enum class HealthSeverity { kOk, kWarning, kSoftFault, kHardFault, kUnknown };

/// The recovery a finding asks for (the agent's "action": "none", "reboot", "replace").
/// kUnknown: any other string. The planner decides on the severity, not on this.
enum class HealthAction { kNone, kReboot, kReplace, kUnknown };

/// One check's outcome in a health report.
struct HealthFinding {
  std::string check;  ///< e.g. "slurmd", "gpu.xid" ("" when the agent sent none)
  HealthSeverity severity = HealthSeverity::kOk;
  HealthAction action = HealthAction::kNone;
  std::string message;  ///< the agent's words
  bool operator==(const HealthFinding&) const = default;
};

/// A node agent's health report as the control plane keeps it (converted once, when the
/// heartbeat arrives: agentapi/node_status_cache.h).
struct HealthReport {
  HealthSeverity verdict = HealthSeverity::kOk;  ///< the worst finding's severity
  HealthAction action = HealthAction::kNone;
  SystemTime checked_at{};                ///< when the agent's round of checks started
  std::chrono::milliseconds duration{0};  ///< how long that round took
  std::vector<HealthFinding> findings;
  bool operator==(const HealthReport&) const = default;
};

/// The wire strings: "ok", "warning", "soft_fault", "hard_fault" ("unknown" for kUnknown);
/// "none", "reboot", "replace" ("unknown").
const std::string& ToString(HealthSeverity s);
const std::string& ToString(HealthAction a);
/// The enum whose ToString() is `s`; kUnknown for any other string ("unknown" included).
HealthSeverity ParseHealthSeverity(std::string_view s);
HealthAction ParseHealthAction(std::string_view s);

// No implicit JSON for these enums: nlohmann would write their integers.
void to_json(nlohmann::json&, HealthSeverity) = delete;
void to_json(nlohmann::json&, HealthAction) = delete;

/// What the control plane last heard from one instance's node agent.
struct NodeLiveness {
  SystemTime last_heard{};  ///< last registration or heartbeat
  std::optional<HealthReport> health;  ///< the last health report; nullopt when none came
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
