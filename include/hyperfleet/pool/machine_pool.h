#pragma once
// The machine pool's policy as pure code (issue 18 "Hot spares", reused by the fleet
// simulator of issue 19): which machine serves a launch, which free machines become hot
// spares, when a faulty machine goes to reboot, repair or quarantine (the lemon rule), how a
// machine comes back through a check, and which spare checks are due. Every function takes
// the machines as a snapshot and the time, and returns the new records of the machines it
// changes; the caller stores them (the ssh provider: a compare-and-swap write; the
// simulator: in memory) and starts the effects (provision, check, reboot). No I/O, no clock,
// no randomness. The states and their transitions: docs/machine-pool.md.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::pool {

/// What a machine is doing.
enum class MachineState {
  kFree,               ///< registered, idle, clean
  kSpareProvisioning,  ///< being made a hot spare (provisioned up to the lifecycle scripts)
  kSpareReady,         ///< a hot spare that passed its last check (Machine::last_check)
  kSpareChecking,      ///< a hot spare running its periodic health check
  kInUse,              ///< serves a cluster node (Machine::cluster, Machine::node)
  kRebooting,          ///< rebooting after a fault; with a node when rebooted in place
  kRepairing,          ///< out for repair after a fault (hands, vendor)
  kChecking,           ///< back from reboot or repair, running its return check
  kQuarantined,        ///< out of service until an operator returns it (Machine::reason)
};

/// "free", "spare-provisioning", "spare-ready", "spare-checking", "in-use", "rebooting",
/// "repairing", "checking", "quarantined": the stored and displayed names.
std::string_view MachineStateName(MachineState state);
/// Inverse of MachineStateName; nullopt for any other text.
std::optional<MachineState> ParseMachineState(std::string_view name);

/// One machine of the pool, typed.
struct Machine {
  std::string id;
  std::string instance_type;  ///< the type it serves as, e.g. "ml.p5.48xlarge"
  MachineState state = MachineState::kFree;
  SystemTime since{};                    ///< when it entered `state`
  std::optional<SystemTime> last_check;  ///< a spare's last passed check
  std::string cluster;                   ///< kInUse, or kRebooting in place: its cluster...
  std::string node;                      ///< ...and node (the instance id)
  std::string reason;  ///< kRebooting/kRepairing/kChecking/kQuarantined: why
  /// Its failures, oldest first; those older than the lemon window are dropped when a
  /// transition writes the record, so the record stays small.
  std::vector<SystemTime> failures;

  bool operator==(const Machine&) const = default;
};

/// The pool's knobs. Defaults: resiliency research §5.4 column C (quarantine after 2
/// failures within 7 days; returning machines are checked).
struct PoolPolicy {
  /// Hot spares kept per instance type; types not listed keep none.
  std::map<std::string, int, std::less<>> spare_target;
  /// The lemon rule: this many failures within lemon_window quarantine the machine.
  /// 0 disables quarantine.
  int lemon_failures = 2;
  Duration lemon_window = std::chrono::hours(24 * 7);
  /// A ready spare is checked again when its last check is this old.
  Duration spare_check_interval = std::chrono::hours(1);
  /// Whether a machine back from reboot or repair runs a check before it is free again
  /// (false: straight to kFree).
  bool return_check = true;
};

/// Counts of a type's machines by state, for `machines list`, capacity messages and the
/// simulator's spare-exhaustion figures.
struct Capacity {
  int free = 0;
  int spares_ready = 0;
  int spares_provisioning = 0;  ///< kSpareProvisioning and kSpareChecking
  int in_use = 0;
  int out_of_service = 0;  ///< kRebooting, kRepairing, kChecking
  int quarantined = 0;
  int total = 0;
};
/// The counts for machines of `instance_type`.
Capacity CountCapacity(std::span<const Machine> machines, std::string_view instance_type);

// ---- Launches ----

/// A launch of `nodes` (instance ids, one machine each) of `instance_type` for `cluster`.
struct LaunchRequest {
  std::string cluster;
  std::string instance_type;
  std::vector<std::string> nodes;
  /// True: grant nothing unless every node gets a machine (CreateCluster's all-or-nothing);
  /// false: grant what there is (a replacement, Continuous provisioning).
  bool all_or_nothing = false;
};

/// A machine granted to a node: its record after the grant (kInUse).
struct Grant {
  Machine machine;
  bool from_spare = false;  ///< it was a ready hot spare ("spare m-3 replaced node i-…")
};

/// Why not every node got a machine, with the numbers.
struct Shortfall {
  std::string instance_type;
  int requested = 0;
  int spares_ready = 0;
  int free = 0;
  /// "Insufficient capacity for ml.c5.large: 3 requested, 1 hot spare ready and 1 free
  /// machine (2 in use, 1 quarantined)".
  std::string message;
};

struct Allocation {
  std::vector<Grant> grants;  ///< in the order of LaunchRequest::nodes
  std::optional<Shortfall> shortfall;
};

/// Which machines serve a launch: ready hot spares first (the most recently checked, then by
/// id), then free machines (fewest failures within the lemon window, then by id); spares
/// being provisioned or checked, and every other state, are never granted. A spare taken is
/// refilled by the next PlanSpares.
Allocation Allocate(std::span<const Machine> machines, const LaunchRequest& request,
                    const PoolPolicy& policy, SystemTime now);

// ---- Hot spares ----

/// One step of keeping the spare targets.
struct SpareStep {
  enum class Kind {
    kProvision,  ///< a free machine starts provisioning as a spare (after: kSpareProvisioning)
    kCheck,      ///< a ready spare's check is due (after: kSpareChecking)
    kRetire,     ///< a ready spare above the target goes back to free (after: kFree)
  };
  Kind kind;
  Machine machine;  ///< its record after the step
};

/// The steps that keep each type at its spare target at `now`: provision free machines
/// (healthiest first, as Allocate) while ready + provisioning + checking spares are below
/// the target, retire ready spares above it (the longest unchecked first), and check the
/// ready spares whose last check is at least spare_check_interval old. Ordered by type, then
/// kind, then machine id.
std::vector<SpareStep> PlanSpares(std::span<const Machine> machines, const PoolPolicy& policy,
                                  SystemTime now);

// ---- One machine's reports ----

/// What happened to one machine.
enum class Report {
  kFaultRebootInPlace,  ///< its node failed; recovery reboots it with the node kept on it
  kFaultReboot,         ///< it failed; its node (if any) moves away, the machine reboots
  kFaultRepair,         ///< it failed; its node (if any) moves away, the machine is repaired
  kRebooted,            ///< a reboot finished
  kRepaired,            ///< a repair finished
  kProvisioned,         ///< spare provisioning finished and passed its check
  kCheckPassed,         ///< a spare's periodic check or a return check passed
  kCheckFailed,         ///< a check or a spare's provisioning failed (e.g. a bad return)
  kReleased,            ///< its node was deleted and the machine cleaned
  kOperatorReturn,      ///< an operator returns a quarantined machine (through a check)
};

/// The machine's new record and what the caller must do about its node.
struct Transition {
  Machine machine;
  /// The node that was on it must be replaced on another machine (a fault that moves the
  /// node, or a quarantine, which overrides an in-place reboot).
  bool replace_node = false;
  bool quarantined = false;  ///< this transition quarantined it (the lemon rule)
};

/// Applies `report` to `machine` at `now`: a fault (and a failed check) is recorded in its
/// history and quarantines it when the lemon rule holds (PoolPolicy::lemon_failures within
/// lemon_window, this failure included; Machine::reason then says so, with `reason`);
/// otherwise the fault's remedy. A failed check sends it to repair. kRebooted returns an
/// in-place reboot to kInUse and any other to the return check (or kFree); kRepaired and
/// kOperatorReturn go to the return check. FailedPrecondition when the report does not fit
/// the state (e.g. kRebooted while free), naming both.
StatusOr<Transition> Apply(const Machine& machine, Report report, const PoolPolicy& policy,
                           SystemTime now, std::string_view reason = {});

}  // namespace hf::pool
