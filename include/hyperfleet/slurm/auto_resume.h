#pragma once
// The pure parts of `srun --auto-resume=1` (docs/slurm.md "Auto-resume"): which Slurm nodes
// count as faulty, read from the text that sinfo and scontrol print, and how the supervisor's
// command line and the step's wait status are interpreted. The SPANK plugin
// (src/slurm/spank/auto_resume_spank.c) execs `hyperfleet auto-resume`, whose I/O lives in
// src/cli/auto_resume_command.cc.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hf::slurm {

/// Reason prefix with which the control plane marks a node it found faulty (DOWN or FAIL).
inline constexpr std::string_view kHyperfleetReasonPrefix = "Hyperfleet:";
/// Environment variable set by the supervisor for the srun it runs, so the plugin inside that
/// srun does not exec another supervisor.
inline constexpr std::string_view kAutoResumeActiveEnv = "HYPERFLEET_AUTO_RESUME_ACTIVE";
/// Default seconds the supervisor looks for a faulty node after a failed step: the control
/// plane marks a hung node within 15 s of the fault, a dead one within 3 s.
inline constexpr int kDefaultAutoResumeWindowSeconds = 20;

/// One node as `sinfo -h -N -o '%N|%T|%E'` prints it: name, long state (e.g. "down*",
/// "failing", "allocated") and the reason (free text, may contain '|'; "none" when unset).
struct NodeHealth {
  std::string name;
  std::string state;
  std::string reason;
};

/// Parses `sinfo -h -N -o '%N|%T|%E'` output (one node per line; a node in several
/// partitions appears once, first line wins). Lines without two '|' are skipped.
std::vector<NodeHealth> ParseSinfoNodes(std::string_view text);

/// True when `reason` is one that marks a fault under Hyperfleet's contract: it starts with
/// "Hyperfleet:" (the control plane's detection) or is exactly "Action:Replace" or
/// "Action:Reboot" (a user's or a health check's request, case-sensitive as on HyperPod).
bool IsFaultReason(std::string_view reason);

/// Why `node` is faulty ("ip-10-1-0-7 is down (reason \"Hyperfleet: dead\")"), or nullopt:
/// faulty means a fault reason (IsFaultReason) on a node that is down, failing/fail or
/// draining/drained. A node that Slurm itself found not responding ("down*", reason "Not
/// responding") without such a reason is not counted: Hyperfleet has not diagnosed it.
std::optional<std::string> FaultOf(const NodeHealth& node);

/// The faults among `nodes` (FaultOf of each, in order, only the faulty ones).
std::vector<std::string> Faults(const std::vector<NodeHealth>& nodes);

/// The value of `key` in `scontrol show config` output ("TaskPlugin = task/none"), or
/// nullopt when the key is absent.
std::optional<std::string> ConfigValue(std::string_view show_config, std::string_view key);

/// The value of `field` in `scontrol show job -o` (or multi-line) output, e.g. "NodeList",
/// "JobState", "Requeue", "BatchFlag"; nullopt when absent. Values end at whitespace.
std::optional<std::string> JobField(std::string_view show_job, std::string_view field);

/// Empty when auto-resume can work with this TaskPlugin value, else the configuration error
/// to print (it names the value and says only task/none is supported).
std::string TaskPluginError(std::string_view task_plugin);

/// Parses the option value of --auto-resume: "1" → true, "0" → false, anything else nullopt.
std::optional<bool> ParseAutoResumeValue(std::string_view value);

/// Joins hostlist expressions (each may itself be a list: "ip-1,ip-[2-3]") with ',' for sinfo
/// -n, dropping empty ones and exact duplicates; empty when none is left.
std::string JoinHostlists(const std::vector<std::string>& lists);

}  // namespace hf::slurm
