#pragma once
// Node health checks of the agent (docs/resiliency.md; after HyperPod's health monitoring
// agent, docs/hyperpod-contract.md "Resiliency"). Every heartbeat carries a HealthReport; its
// verdict names the recovery the node needs: a soft fault asks for a reboot, a hard fault
// for a replacement. The rules, thresholds and the source of each are tabled in docs/nodes.md
// "Health checks".
//
// Each check is a pure function of plain inputs (file texts, statvfs figures, command
// results), so it is tested without a real node; HealthMonitor gathers those inputs on a
// node (under a root prefix, with an injectable command runner) and owns the only side
// effect: restarting a dead slurmd/slurmctld.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperfleet/agent/nvml.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// How bad a finding is, in increasing order; the worst one decides the node's recovery.
enum class Severity {
  kOk = 0,         ///< healthy (or informational)
  kWarning = 1,    ///< worth a look; no automatic action
  kSoftFault = 2,  ///< the node needs a reboot (HyperPod's "Action:Reboot")
  kHardFault = 3,  ///< the node needs replacing (HyperPod's "Action:Replace")
};

/// "ok", "warning", "soft_fault", "hard_fault".
std::string_view SeverityName(Severity severity);
/// The recovery a severity asks for: "none" (ok, warning), "reboot", "replace".
std::string_view SeverityAction(Severity severity);

/// The outcome of one check.
struct HealthFinding {
  std::string check;  ///< e.g. "disk:/", "memory", "clock", "slurmd", "gpu.ecc", "gpu.xid"
  Severity severity = Severity::kOk;
  std::string message;  ///< human-readable, with figures and units
};

/// All findings of one round of checks.
struct HealthReport {
  std::vector<HealthFinding> findings;
  SystemTime checked_at{};              ///< when the round started (the monitor's Clock)
  std::chrono::milliseconds duration{0};  ///< how long the round took

  /// The worst severity of the findings (kOk when there are none).
  Severity verdict() const;
  /// The first finding named `check`, or nullptr.
  const HealthFinding* Find(std::string_view check) const;
  /// The report as the heartbeat's "health" carries it (agentapi/protocol.h): the verdict
  /// and its action, checked_at in epoch seconds, duration_ms, the findings.
  agentapi::HealthReport ToWire() const;
  /// ToWire() as JSON: {"verdict": "ok", "action": "none", "checked_at", "duration_ms",
  /// "findings": [{"check", "severity", "action", "message"}]}.
  nlohmann::json ToJson() const;
};

// ---------------------------------------------------------------------------------------
// Pure checks

/// statvfs figures of one file system (f_blocks/f_bavail × f_frsize, f_files/f_favail).
struct DiskSpace {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  ///< available to unprivileged users (f_bavail)
  uint64_t total_inodes = 0;     ///< 0: the file system has no inode limit (e.g. btrfs)
  uint64_t available_inodes = 0;
};

/// Warning below either free-space floor (defaults: 1 GiB, 2 % of the size) or below the
/// free-inode floor. Never a fault: neither a reboot nor a replacement is known to fix data
/// filling a disk, and a replacement would destroy it (HyperPod documents no disk rule).
struct DiskThresholds {
  uint64_t min_free_bytes = uint64_t{1} << 30;
  double min_free_percent = 2.0;
  double min_free_inodes_percent = 2.0;
};

/// Checks one mount point ("/", "/tmp"); the finding is named "disk:<mount>".
HealthFinding EvaluateDisk(std::string_view mount, const DiskSpace& space,
                           const DiskThresholds& thresholds = {});

/// Warning when MemAvailable is below `min_available_percent` of MemTotal or when the
/// pressure stall information "some avg10" (share of the last 10 s in which at least one
/// task waited for memory, %) exceeds `max_some_avg10`. Never a fault (the kernel's OOM
/// killer acts first; a reboot only hides a leaking job).
struct MemoryThresholds {
  double min_available_percent = 5.0;
  double max_some_avg10 = 50.0;
};

/// `meminfo`: the text of /proc/meminfo (MemTotal and MemAvailable in kB). `pressure`: the
/// text of /proc/pressure/memory, empty when the kernel has no PSI. An unparsable meminfo
/// is a warning. The finding is named "memory".
HealthFinding EvaluateMemory(std::string_view meminfo, std::string_view pressure,
                             const MemoryThresholds& thresholds = {});

/// The kernel's view of time synchronisation (adjtimex(2) with modes 0).
struct ClockSync {
  bool synchronized = false;  ///< not TIME_ERROR and STA_UNSYNC clear
  int64_t max_error_us = 0;   ///< timex.maxerror, µs
};

/// Warning when the node's clock differs from the reference (the control plane's clock)
/// by more than `max_skew` (default 30 s; munge rejects credentials beyond its 300 s TTL,
/// so Slurm breaks well after this warns), when it is before `not_before` (a reset RTC), or
/// when the kernel says it is not synchronised. Never a fault: the control plane's clock may
/// be the wrong one, and rebooting a fleet for it would be worse.
struct ClockThresholds {
  std::chrono::seconds max_skew{30};
  SystemTime not_before = SystemTime(std::chrono::seconds(1704067200));  ///< 2024-01-01Z
};

/// `node_time` and `reference_time` sampled at the same moment (reference nullopt: no
/// comparison); `sync` nullopt: not known. The finding is named "clock".
HealthFinding EvaluateClock(SystemTime node_time, std::optional<SystemTime> reference_time,
                            std::optional<ClockSync> sync,
                            const ClockThresholds& thresholds = {});

/// The result of one command (see CommandRunner).
struct CommandResult {
  bool started = true;     ///< false: it could not be executed (e.g. no systemctl)
  bool timed_out = false;  ///< killed after its timeout
  int exit_code = 0;
  std::string output;  ///< stdout and stderr, lines joined by '\n', at most 4 KiB
};

/// Init (systemd, PID 1) from `systemctl is-system-running`: running, starting or
/// initializing → ok; degraded, maintenance, stopping and other states → warning; no
/// answer before the timeout → soft fault (a hung PID 1 cannot start or restart any
/// service; a reboot is the only remedy). Not started (no systemctl) → ok, "no systemd".
/// The finding is named "init".
HealthFinding EvaluateInit(const CommandResult& is_system_running);

/// What the monitor saw and did about one systemd unit in one round.
struct ServiceObservation {
  std::string state_before;   ///< `systemctl is-active` at the start ("active", "failed", ...)
  int restarts_this_round = 0;  ///< `systemctl restart` runs in this round
  int restarts_total = 0;     ///< since the unit was last found active at a round's start
  int max_restarts = 3;
  bool active_after = false;  ///< active at the end of the round
  std::string last_output;    ///< the last systemctl output (why a restart failed)
};

/// A unit the node's role enables (slurmd on workers and login nodes, slurmctld on the
/// controller): active → ok; restarted by the agent and now active → warning (the control
/// plane sees it happened); still down after `max_restarts` → soft fault "cannot be
/// restarted" (Hyperfleet's rule: a killed slurmd is first restarted by the agent, a
/// slurmd that cannot be restarted asks for a reboot). The finding is named `unit`.
HealthFinding EvaluateService(std::string_view unit, const ServiceObservation& observation);

/// GPU rule inputs that are not reported by NVML itself.
struct GpuThresholds {
  /// Used when NVML does not report the GPU's own slowdown threshold, °C.
  unsigned fallback_slowdown_c = 85;
};

/// GPU checks over one NVML snapshot; one "ok" finding per check when all GPUs pass, else
/// one finding per failing GPU:
/// - "gpu.count": count != `expected_count` → soft fault (HyperPod HMA: GPU count mismatch
///   → reboot); expected nullopt → ok, count only;
/// - "gpu.lost": a GPU NVML reports lost (NVML_ERROR_GPU_IS_LOST) → hard fault;
/// - "gpu.ecc": volatile uncorrectable ECC errors > 0 → hard fault (HyperPod replaces on
///   GPU hardware faults);
/// - "gpu.remap": row remapping failed → hard fault (no spare rows: NVIDIA's remedy is an
///   RMA); a remap pending → soft fault (NVIDIA: a GPU reset applies it);
/// - "gpu.retired_pages": retirement pending → soft fault (applied on reset);
/// - "gpu.temperature": at or above the slowdown threshold → warning;
/// - "gpu.throttle": hardware slowdown, hardware thermal, power brake or software thermal
///   clock events → warning.
/// `expected_source` says where `expected_count` came from (for the message).
std::vector<HealthFinding> EvaluateGpus(const GpuSnapshot& snapshot,
                                        std::optional<unsigned> expected_count,
                                        std::string_view expected_source = "",
                                        const GpuThresholds& thresholds = {});

/// One Xid line of the NVIDIA driver in the kernel log.
struct XidEvent {
  std::string pci;  ///< the GPU's PCI address as logged, e.g. "0000:3b:00"
  int xid = 0;
  std::string text;  ///< the log line from "NVRM: Xid" on
};

/// Every "NVRM: Xid (PCI:<addr>): <n>, ..." (also the older "NVRM: Xid (<addr>): <n>, ...")
/// in `kernel_log` (dmesg text or /dev/kmsg records), in order.
std::vector<XidEvent> ParseXids(std::string_view kernel_log);

/// What an Xid means for the node, and why (the table of docs/nodes.md "Health checks").
struct XidRule {
  Severity severity = Severity::kWarning;
  std::string_view meaning;  ///< NVIDIA's name for it
  std::string_view source;   ///< where the rule comes from
};

/// The rule for `xid`: application Xids (13, 31, 43, 45, ...) → ok, logged only (HyperPod
/// HMA: XidUserAppError, no action); GPU hardware Xids → reboot or replace; unknown Xids →
/// warning.
XidRule XidRuleFor(int xid);

/// One finding "gpu.xid" per distinct (GPU, Xid) with its count, severity from XidRuleFor;
/// an empty list gives one ok finding.
std::vector<HealthFinding> EvaluateXids(const std::vector<XidEvent>& events);

/// NVIDIA GPUs on the PCI bus (vendor 0x10de, class 0x0300xx VGA or 0x0302xx 3D controller;
/// NVSwitches are bridges and do not count) below a sysfs devices directory such as
/// /sys/bus/pci/devices. 0 when the directory cannot be read.
unsigned CountPciGpus(const std::string& devices_dir);

// ---------------------------------------------------------------------------------------
// The monitor

/// Runs argv (argv[0] found on a root PATH) with a timeout; see RunCommand.
using CommandRunner = std::function<CommandResult(const std::vector<std::string>& argv,
                                                  std::chrono::milliseconds timeout)>;

/// Runs argv through RunScript (script_runner.h): argv[0] is looked up in /usr/sbin,
/// /usr/bin, /sbin, /bin; stdin /dev/null; output captured (4 KiB). `stop` (may be null)
/// kills it early. Never throws; not started → CommandResult::started false.
CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::atomic<bool>* stop = nullptr);

/// Configuration of a HealthMonitor.
struct HealthMonitorOptions {
  /// Prefix of every node path read (/proc, mount points, /dev/kmsg, /sys): "/" on a node.
  std::string root = "/";
  std::vector<std::string> disk_paths = {"/", "/tmp"};
  DiskThresholds disk;
  MemoryThresholds memory;
  ClockThresholds clock_thresholds;
  GpuThresholds gpu;
  /// Units checked and restarted when their node role enabled them (`systemctl
  /// is-enabled` says "enabled"); others are not this node's business.
  std::vector<std::string> units = {"slurmd", "slurmctld"};
  /// Restarts of one unit before it is a soft fault (counted across rounds until the unit
  /// is found active at the start of a round).
  int max_restarts = 3;
  /// How long a restarted unit may take to become active (polled every `poll_interval`).
  std::chrono::milliseconds restart_settle{10000};
  std::chrono::milliseconds poll_interval{250};
  /// Bound of one systemctl run. A round takes at most about units × (2 + max_restarts ×
  /// (1 + settle/poll)) commands; with the defaults and a healthy node, 4 short commands.
  std::chrono::milliseconds command_timeout{20000};
  /// systemctl (and other commands). Empty: RunCommand when root is "/", otherwise init and
  /// unit checks are skipped (a test root must never restart the host's services).
  CommandRunner run_command;
  /// The init and unit checks spawn systemctl (a few ms of CPU each): they run at most this
  /// often, and rounds in between repeat their last findings. A unit found down keeps being
  /// checked every round until it is active again or a soft fault.
  std::chrono::milliseconds command_interval{30000};
  /// Whether to look for NVML at all; the library is from Nvml::DefaultLibrary() when empty.
  bool nvml = true;
  std::string nvml_library;
  /// GPUs the instance type has; nullopt: the NVIDIA GPUs on the PCI bus (when any).
  std::optional<unsigned> expected_gpus;
  std::string kernel_log = "/dev/kmsg";           ///< under root; read for Xids
  std::string pci_devices = "/sys/bus/pci/devices";  ///< under root
  /// Kernel clock state; empty: adjtimex(2) when root is "/", otherwise not checked.
  std::function<std::optional<ClockSync>()> clock_sync;
  /// Report times, and the monotonic() time that command_interval, restart_settle and a
  /// round's duration are measured in; nullptr: the system clock.
  const Clock* clock = nullptr;
  const std::atomic<bool>* stop = nullptr;  ///< cuts restart waits short (agent Stop())
};

/// A node time and the control plane's time sampled at one moment (e.g. when a heartbeat
/// response arrived).
struct TimeSample {
  SystemTime node;
  SystemTime reference;
};

/// Per-round inputs from the agent.
struct CheckInputs {
  std::optional<TimeSample> control_plane_time;
  /// False while the lifecycle scripts run: they start slurmd themselves, and a restart by
  /// the agent would race them, so units are neither checked nor restarted.
  bool services = true;
};

/// Gathers inputs on the node and evaluates them. One caller at a time (the heartbeat
/// thread); keeps NVML loaded and the kernel log open between rounds.
class HealthMonitor {
 public:
  explicit HealthMonitor(HealthMonitorOptions options = {});
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  /// One round of every check; may restart units (bounded, see HealthMonitorOptions).
  HealthReport Check(const CheckInputs& inputs = {});

 private:
  void CheckCommands(const CheckInputs& inputs, HealthReport* report);
  HealthFinding CheckUnit(const std::string& unit, const CommandRunner& run);
  void CheckGpus(HealthReport* report);
  void ReadKernelLog();

  HealthMonitorOptions options_;
  std::map<std::string, int> restarts_;  ///< unit → restarts since last found active
  std::vector<HealthFinding> command_findings_;  ///< of the last init/unit round
  std::optional<SteadyTime> command_round_;  ///< when it ran (the Clock's monotonic())
  std::map<std::string, int> unit_pids_;  ///< unit -> MainPID seen active (node only)
  std::unique_ptr<Nvml> nvml_;
  int kmsg_fd_ = -1;
  std::string kmsg_error_;
  std::string kmsg_partial_;   ///< an unterminated last line
  std::vector<XidEvent> xids_;  ///< every Xid seen this boot (bounded)
};

}  // namespace hf::agent
