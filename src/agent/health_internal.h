#pragma once
// Internal to the agent's health checks (include/hyperfleet/agent/health.h), one concern a
// file:
//   health.cc        the report, and HealthMonitor::Check: what runs in a round and when
//   health_rules.cc  the pure verdicts on disk, memory, clock, init and units (Evaluate*)
//   health_probes.cc what a round reads on the node (statvfs, /proc, adjtimex), RunCommand
//                    and the unit restarts (HealthMonitor::CheckUnit)
//   gpu_rules.cc     the pure GPU verdicts: NVML snapshots and Xids (EvaluateGpus, ParseXids,
//                    XidRuleFor, EvaluateXids)
//   gpu_probe.cc     NVIDIA GPUs on the PCI bus, NVML (nvml.cc) and the kernel log for Xids
//                    (HealthMonitor::CheckGpus)
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agent/health.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/strings.h"

namespace hf::agent::health_internal {

/// The first line of `text` without surrounding whitespace; "" for blank text.
inline std::string FirstLine(std::string_view text) {
  text = StripAsciiWhitespace(text);
  return std::string(StripAsciiWhitespace(text.substr(0, text.find('\n'))));
}

/// One "disk:<mount>" finding per mount of `options.disk_paths` under `options.root`
/// (statvfs); a mount that does not exist there is skipped, another statvfs error is a
/// warning.
std::vector<HealthFinding> ProbeDisks(const HealthMonitorOptions& options);

/// The "memory" finding from /proc/meminfo and /proc/pressure/memory under `options.root`
/// (an unreadable file reads as empty).
HealthFinding ProbeMemory(const HealthMonitorOptions& options);

/// The "clock" finding: `clock`'s time, or the sample of `inputs` when there is one, against
/// the control plane's; the kernel's sync state from `options.clock_sync`, else adjtimex(2)
/// when the root is "/".
HealthFinding ProbeClock(const HealthMonitorOptions& options, const Clock& clock,
                         const CheckInputs& inputs);

}  // namespace hf::agent::health_internal
