#pragma once
// The Slurm controller node's duties, as HyperPod's cluster agent does them
// (docs/slurm.md, docs/resiliency.md): reload Slurm when the control plane changes
// slurm.conf, report the Slurm nodes' states (`sinfo`), and set the states the control plane
// asks for (`scontrol update`). The pure parts are here; the thread that does them beside
// the heartbeat is src/agent/slurm_controller_hook.h.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// Where the control plane puts slurm.conf on the controller node (only there: configless
/// slurmds fetch it from slurmctld).
inline constexpr std::string_view kSlurmConfPath = "/opt/slurm/etc/slurm.conf";

/// What Slurm's controller does after its slurm.conf changed. Slurm 22.05 semantics: adding
/// or removing nodes (any NodeName= line) or moving the controller (SlurmctldHost=) needs a
/// slurmctld restart; other changes a `scontrol reconfigure`, which also hands configless
/// slurmds the new file.
enum class SlurmReload { kNone, kReconfigure, kRestart };

/// The reload `before` → `after` (whole slurm.conf texts; `before` empty: first write,
/// nothing runs yet to reload). Pure.
SlurmReload SlurmReloadFor(std::string_view before, std::string_view after);

/// The program that applies a reload on the controller node: data/slurm/reload-slurmctld.sh,
/// embedded at build time, run with /bin/sh as root with SlurmReloadArguments' arguments.
std::string_view SlurmReloadProgram();

/// SlurmReloadProgram()'s arguments for `reload` (not kNone) from slurm.conf `before` to
/// `after`: "restart" or "reconfigure", then the names of the nodes `before` defines and
/// `after` no longer does (in name order). Pure.
std::vector<std::string> SlurmReloadArguments(SlurmReload reload, std::string_view before,
                                              std::string_view after);

/// Seconds since the epoch of a Slurm time stamp ("2026-11-30T10:00:00" in the node's local
/// time, as sinfo and squeue print it); 0 for anything else ("Unknown", "None").
double SlurmTimeToEpoch(std::string_view stamp);

/// Parses `sinfo -N -h -o '%N|%T|%H|%C|%E'` output (node, long state, reason time in the
/// node's local time or "Unknown"/"None", CPUs "alloc/idle/other/total", reason exactly as
/// set) into the heartbeat's "slurm_nodes" (state in lower case, reason_time 0 when none).
/// Lines that do not parse are skipped; a node listed twice (in two partitions) appears
/// once.
std::vector<agentapi::SlurmNode> ParseSinfoNodes(std::string_view text);

/// The scontrol commands (one per line, for a root shell) that carry out the control
/// plane's `marks` (docs/resiliency.md) given Slurm's current `nodes` (ParseSinfoNodes):
/// "down" only for a node not already down or fail; "resume" only for a node that is still
/// marked with exactly the given reason. Unknown nodes and actions are skipped. Reasons are
/// single-quoted for the shell.
std::string SlurmMarkCommands(const std::vector<agentapi::SlurmMark>& marks,
                              const std::vector<agentapi::SlurmNode>& nodes);

/// The commands the Slurm controller's duties run; an empty one is not run (nothing is
/// reported, nothing changes).
struct SlurmCommands {
  /// Applies a reload from slurm.conf `before` to `after`; whether it worked.
  std::function<bool(SlurmReload, const std::string& before, const std::string& after)> reload;
  /// `sinfo -N -h -o '%N|%T|%H|%C|%E'` output, or nullopt when Slurm does not answer.
  std::function<std::optional<std::string>()> query_nodes;
  /// Runs a root-shell script (scontrol lines); whether it worked.
  std::function<bool(const std::string& script)> run;
  /// SlurmJobsQuery() output (slurm_jobs.h), or nullopt.
  std::function<std::optional<std::string>()> query_jobs;
  /// `squeue -h -t all -o '%i|%T'` output for the stale step reaper (stale_steps.h), or
  /// nullopt; empty: no reaper.
  std::function<std::optional<std::string>()> query_steps;
};

/// The real commands of a node: sinfo, scontrol, squeue and the reload program under
/// /bin/sh as root with Slurm's directories on PATH (each bounded: 10 s for queries, 120 s
/// for scripts and reloads), logging what scripts print.
SlurmCommands NodeSlurmCommands(const Clock& clock);

}  // namespace hf::agent
