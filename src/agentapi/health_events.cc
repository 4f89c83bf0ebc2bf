#include "hyperfleet/agentapi/health_events.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hf::agentapi {
namespace {

using model::HealthReport;
using model::HealthSeverity;

bool IsFault(HealthSeverity severity) {
  return severity == HealthSeverity::kSoftFault || severity == HealthSeverity::kHardFault;
}

/// The findings of services the agent restarted (a killed slurmd).
std::set<std::string> Restarts(const HealthReport& report) {
  std::set<std::string> out;
  for (const auto& f : report.findings) {
    if (absl::StrContains(f.message, "restarted by the agent")) out.insert(f.message);
  }
  return out;
}

}  // namespace

std::vector<model::EventText> HealthEvents(const model::Node& node, const HealthReport& before,
                                           const HealthReport& after) {
  std::vector<model::EventText> events;
  const nlohmann::json metadata = {{"Instance", {{"NodeLogicalId", node.logical_id}}}};
  const std::set<std::string> seen = Restarts(before);
  for (const auto& message : Restarts(after)) {
    if (seen.count(message)) continue;
    events.push_back({"Instance", "Warn", absl::StrCat("Instance ", node.instance_id, ": ", message),
                      node.group, node.instance_id, metadata});
  }
  const HealthSeverity verdict = after.verdict;
  if (IsFault(verdict) == IsFault(before.verdict) &&
      (verdict == before.verdict || !IsFault(verdict))) {
    return events;
  }
  std::string description;
  if (IsFault(verdict)) {
    // What failed, in the agent's words.
    std::vector<std::string> failing;
    for (const auto& f : after.findings) {
      if (IsFault(f.severity)) failing.push_back((f.check.empty() ? "?" : f.check) + ": " + f.message);
    }
    const char* kind = verdict == HealthSeverity::kHardFault ? "hardware fault, replace"
                                                             : "soft fault, reboot";
    description = absl::StrCat("Instance ", node.instance_id, " failed its health checks (",
                               kind, "): ", absl::StrJoin(failing, "; "));
  } else {
    description = absl::StrCat("Instance ", node.instance_id, " passes its health checks again");
  }
  events.push_back({"Instance", IsFault(verdict) ? "Error" : "Info", std::move(description),
                    node.group, node.instance_id, metadata});
  return events;
}

}  // namespace hf::agentapi
