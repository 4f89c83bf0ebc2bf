#pragma once
// Typed state of one cluster node beyond its identity (docs/state-machines.md): its status,
// the recovery someone asked for, the planner's progress on it, a fault the planner reports,
// and the planner's bookkeeping. Each struct has one writer, named in its docstring. JSON
// exists only where the store persists these (src/store/node_json.cc).
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::model {

/// ClusterInstanceStatus (service model enum); ToString() gives the wire value.
enum class InstanceStatus { kPending, kRunning, kFailure, kShuttingDown };

/// The statuses under their short names (`namespace is = model::instance_status;`).
namespace instance_status {
inline constexpr InstanceStatus kPending = InstanceStatus::kPending;
inline constexpr InstanceStatus kRunning = InstanceStatus::kRunning;
inline constexpr InstanceStatus kFailure = InstanceStatus::kFailure;
inline constexpr InstanceStatus kShuttingDown = InstanceStatus::kShuttingDown;
}  // namespace instance_status

/// A node recovery asked for: the node's spec. Written whole by whoever asks (the API's
/// BatchRebootClusterNodes/BatchReplaceClusterNodes, or the planner when it detects a fault,
/// sees a Slurm `Action:` mark or retries a failed replacement) and never changed after;
/// the planner clears it when the recovery ends.
struct NodeRecoveryRequest {
  enum class Action { kReboot, kReplace };
  /// Who or what asked (stored as "Source": absent for the API, "Requested" for a Slurm
  /// `Action:` mark, else the fault kind).
  enum class Source {
    kApi,
    kSlurmAction,
    kKubernetesLabel,  ///< a user's node-health-status label on the Node (EKS clusters)
    kDead,
    kUnresponsive,
    kHardwareFault,
    kSoftwareFault,
    kReplacementFailed,
  };
  Action action = Action::kReboot;
  std::string reason;         ///< why, for messages, events and the Slurm DOWN reason
  SystemTime requested_at{};  ///< when it was asked for
  /// The node cannot be asked (dead, hung or failed): power-cycle instead of reboot, kill
  /// instead of a clean shutdown.
  bool hard = false;
  Source source = Source::kApi;
};

/// The planner's progress on a NodeRecoveryRequest (written by the planner only; reset with
/// the request).
struct RecoveryProgress {
  /// When the provider was first asked to reboot; none until then.
  std::optional<SystemTime> started_at;
  /// The boot the reboot must leave (the epoch when the instance was not running); boot
  /// times are only as exact as the kernel's boot second.
  std::optional<SystemTime> boot_time_before;
  /// When the provider was last asked (a lost or ignored request is repeated as a power
  /// cycle).
  std::optional<SystemTime> asked_at;
  /// A Replace of a Slurm controller node, carried out as a reboot (it keeps its disk).
  bool reboot_instead = false;
  bool operator==(const RecoveryProgress&) const = default;
};

/// A fault the planner detected and is not recovering from (NodeRecovery None, or a failed
/// replacement waiting for its retry). Written by the planner; the API clears it when a
/// BatchReboot/BatchReplace request answers it.
struct NodeFault {
  enum class Kind { kDead, kUnresponsive, kHardwareFault, kSoftwareFault, kReplacementFailed };
  Kind kind = Kind::kDead;
  std::string message;       ///< what was seen
  SystemTime detected_at{};
  SystemTime retry_at{};  ///< kReplacementFailed: when it is replaced again (epoch: at once)
};

/// The planner's bookkeeping on a node (written by the planner only; never on the wire).
struct PlannerMarks {
  /// The failed instance this one replaces under Continuous provisioning (the cluster's
  /// status does not wait for it).
  std::string retry_of;
  /// The instance this one replaces (node recovery); it launches once that one is gone.
  std::string replacement_of;
  /// The address the provider must give this instance (its predecessor's); empty: any.
  std::string requested_ip;
  /// Which attempt at replacing the original node this is (failed replacements are retried
  /// with a delay that doubles per attempt).
  int replace_attempt = 1;
  /// Recovered (replacement, or rebooted node) but Slurm has not shown the node DOWN yet: it
  /// stays marked down until Slurm confirms, so that the jobs of the faulty node end.
  bool slurm_down_pending = false;
  /// The Slurm DOWN reasons the planner set for this node's name (the last few); only those
  /// are lifted when the node is back, never a mark someone else set.
  std::vector<std::string> slurm_down_reasons;
  bool operator==(const PlannerMarks&) const = default;
};

/// The wire (and stored) values of the enums above.
const std::string& ToString(InstanceStatus s);
const std::string& ToString(NodeRecoveryRequest::Action a);
const std::string& ToString(NodeRecoveryRequest::Source s);  ///< "" for kApi
const std::string& ToString(NodeFault::Kind k);
/// The enum whose ToString() is `s`; nullopt for any other string.
std::optional<InstanceStatus> ParseInstanceStatus(std::string_view s);
std::optional<NodeRecoveryRequest::Action> ParseRecoveryAction(std::string_view s);
std::optional<NodeRecoveryRequest::Source> ParseRecoverySource(std::string_view s);
std::optional<NodeFault::Kind> ParseFaultKind(std::string_view s);

/// For test failure messages.
std::ostream& operator<<(std::ostream& os, InstanceStatus s);

// No implicit JSON for these enums: nlohmann would write their integers. Use ToString() on
// the wire; the store converts (src/store/node_json.cc).
void to_json(nlohmann::json&, InstanceStatus) = delete;
void to_json(nlohmann::json&, NodeRecoveryRequest::Action) = delete;
void to_json(nlohmann::json&, NodeRecoveryRequest::Source) = delete;
void to_json(nlohmann::json&, NodeFault::Kind) = delete;

}  // namespace hf::model
