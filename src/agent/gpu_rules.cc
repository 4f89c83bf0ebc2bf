// The pure GPU verdicts (health.h): one NVML snapshot (nvml.h) against the expected count
// and NVIDIA's fault classes, and the driver's Xids in the kernel log against Hyperfleet's
// table (docs/nodes.md "Health checks").
#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperfleet/agent/health.h"
#include "hyperfleet/common/strings.h"

namespace hf::agent {

std::vector<HealthFinding> EvaluateGpus(const GpuSnapshot& snapshot,
                                        std::optional<unsigned> expected,
                                        std::string_view expected_source,
                                        const GpuThresholds& t) {
  std::vector<HealthFinding> out;
  const std::string source = expected_source.empty() ? "" : " (" + std::string(expected_source) + ")";
  if (!snapshot.error.empty()) {
    out.push_back({"gpu.count",
                   expected && *expected > 0 ? Severity::kSoftFault : Severity::kWarning,
                   "cannot count GPUs: " + snapshot.error});
    return out;
  }
  const std::string count = std::to_string(snapshot.count) + " GPU" + (snapshot.count == 1 ? "" : "s");
  if (expected && *expected != snapshot.count) {
    out.push_back({"gpu.count", Severity::kSoftFault,
                   count + " visible to NVML, expected " + std::to_string(*expected) + source});
  } else if (expected) {
    out.push_back({"gpu.count", Severity::kOk, count + ", as expected" + source});
  } else {
    out.push_back({"gpu.count", Severity::kOk, count + " (expected count unknown)"});
  }

  // One check over every GPU: a finding per failing GPU, or one "ok".
  auto each = [&](const std::string& check, const std::string& ok_message,
                  const std::function<std::optional<HealthFinding>(const GpuStatus&)>& rule) {
    bool any = false;
    for (const auto& gpu : snapshot.gpus) {
      if (auto finding = rule(gpu)) {
        finding->check = check;
        finding->message = "gpu" + std::to_string(gpu.index) + ": " + finding->message;
        out.push_back(std::move(*finding));
        any = true;
      }
    }
    if (!any) out.push_back({check, Severity::kOk, ok_message});
  };
  each("gpu.lost", "no GPU lost", [](const GpuStatus& g) -> std::optional<HealthFinding> {
    if (!g.lost) return std::nullopt;
    std::string why;
    for (const auto& e : g.errors) why += (why.empty() ? "" : "; ") + e;
    return HealthFinding{"", Severity::kHardFault, "lost (" + why + ")"};
  });
  each("gpu.ecc", "no uncorrectable ECC errors", [](const GpuStatus& g) -> std::optional<HealthFinding> {
    if (!g.ecc_uncorrected || *g.ecc_uncorrected == 0) return std::nullopt;
    return HealthFinding{"", Severity::kHardFault,
                         std::to_string(*g.ecc_uncorrected) +
                             " uncorrectable ECC errors since the driver loaded"};
  });
  each("gpu.remap", "no row remapping failed or pending",
       [](const GpuStatus& g) -> std::optional<HealthFinding> {
         if (g.remap_failed.value_or(false)) {
           return HealthFinding{"", Severity::kHardFault, "row remapping failed (no spare rows)"};
         }
         if (g.remap_pending.value_or(false)) {
           return HealthFinding{"", Severity::kSoftFault,
                                "row remapping pending (applied by a GPU reset)"};
         }
         return std::nullopt;
       });
  each("gpu.retired_pages", "no page retirement pending",
       [](const GpuStatus& g) -> std::optional<HealthFinding> {
         if (!g.retired_pages_pending.value_or(false)) return std::nullopt;
         return HealthFinding{"", Severity::kSoftFault,
                              "page retirement pending (applied by a GPU reset)"};
       });
  each("gpu.temperature", "temperatures below the slowdown thresholds",
       [&](const GpuStatus& g) -> std::optional<HealthFinding> {
         if (!g.temperature_c) return std::nullopt;
         const unsigned limit = g.slowdown_c.value_or(t.fallback_slowdown_c);
         if (*g.temperature_c < limit) return std::nullopt;
         return HealthFinding{"", Severity::kWarning,
                              std::to_string(*g.temperature_c) + " °C, at or above the slowdown "
                              "threshold " + std::to_string(limit) + " °C"};
       });
  each("gpu.throttle", "no hardware or thermal slowdown",
       [](const GpuStatus& g) -> std::optional<HealthFinding> {
         if (!g.throttle_reasons) return std::nullopt;
         const uint64_t r = *g.throttle_reasons;
         std::string why;
         auto add = [&](uint64_t bit, const char* name) {
           if (r & bit) why += (why.empty() ? "" : ", ") + std::string(name);
         };
         add(kThrottleHwSlowdown, "hardware slowdown");
         add(kThrottleHwThermal, "hardware thermal slowdown");
         add(kThrottleHwPowerBrake, "power brake");
         add(kThrottleSwThermal, "software thermal slowdown");
         if (why.empty()) return std::nullopt;
         return HealthFinding{"", Severity::kWarning, "clocks reduced: " + why};
       });
  return out;
}

std::vector<XidEvent> ParseXids(std::string_view log) {
  std::vector<XidEvent> out;
  constexpr std::string_view kMarker = "NVRM: Xid (";
  std::size_t pos = 0;
  while ((pos = log.find(kMarker, pos)) != std::string_view::npos) {
    const std::size_t start = pos;
    pos += kMarker.size();
    const std::size_t close = log.find("):", pos);
    const std::size_t eol = std::min(log.find('\n', start), log.size());
    if (close == std::string_view::npos || close > eol) continue;
    std::string_view pci = log.substr(pos, close - pos);
    if (pci.starts_with("PCI:")) pci.remove_prefix(4);
    std::string_view rest = StripAsciiWhitespace(log.substr(close + 2, eol - close - 2));
    int xid = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), xid);
    if (ec != std::errc() || xid <= 0) continue;
    out.push_back(
        {std::string(pci), xid, std::string(StripAsciiWhitespace(log.substr(start, eol - start)))});
    pos = eol;
  }
  return out;
}

XidRule XidRuleFor(int xid) {
  constexpr std::string_view kNvidia = "NVIDIA Xid catalog";
  constexpr std::string_view kHmaApp =
      "HyperPod's health monitoring agent logs application Xids without action "
      "(docs/hyperpod-contract.md)";
  constexpr std::string_view kReplace =
      "NVIDIA Xid catalog; HyperPod replaces on GPU hardware faults (docs/hyperpod-contract.md)";
  switch (xid) {
    // Application errors: the job is at fault, not the node.
    case 13: return {Severity::kOk, "graphics engine exception (application)", kHmaApp};
    case 31: return {Severity::kOk, "GPU memory page fault (application)", kHmaApp};
    case 43: return {Severity::kOk, "GPU stopped processing (application)", kHmaApp};
    case 45: return {Severity::kOk, "preemptive cleanup after earlier errors", kHmaApp};
    // The GPU needs a reset: a reboot of the node.
    case 61: return {Severity::kSoftFault, "internal micro-controller breakpoint/warning", kNvidia};
    case 62: return {Severity::kSoftFault, "internal micro-controller halt", kNvidia};
    case 63: return {Severity::kSoftFault, "ECC page retirement or row remapping recorded", kNvidia};
    case 73: return {Severity::kSoftFault, "NVENC2 error",
                     "AWS's fault-injection example: Xid 73 → reboot "
                     "(docs/hyperpod-contract.md)"};
    case 94: return {Severity::kSoftFault, "contained ECC error", kNvidia};
    case 119: return {Severity::kSoftFault, "GSP RPC timeout", kNvidia};
    case 120: return {Severity::kSoftFault, "GSP error", kNvidia};
    // Hardware faults: replace the node.
    case 48: return {Severity::kHardFault, "double-bit ECC error", kReplace};
    case 64: return {Severity::kHardFault, "ECC page retirement or row remapping failure", kReplace};
    case 74: return {Severity::kHardFault, "NVLink error",
                     "AWS's fault-injection example: Xid 74 → replace "
                     "(docs/hyperpod-contract.md)"};
    case 79: return {Severity::kHardFault, "GPU has fallen off the bus", kReplace};
    case 95: return {Severity::kHardFault, "uncontained ECC error", kReplace};
    default: return {Severity::kWarning, "not in Hyperfleet's table", "Hyperfleet: logged for a human"};
  }
}

std::vector<HealthFinding> EvaluateXids(const std::vector<XidEvent>& events) {
  struct Seen {
    int count = 0;
    std::string first;
  };
  std::map<std::pair<std::string, int>, Seen> seen;  // ordered: stable reports
  for (const auto& e : events) {
    Seen& s = seen[{e.pci, e.xid}];
    if (s.count++ == 0) s.first = e.text;
  }
  std::vector<HealthFinding> out;
  for (const auto& [key, s] : seen) {
    const XidRule rule = XidRuleFor(key.second);
    std::string message = "Xid " + std::to_string(key.second) + " (" + std::string(rule.meaning) +
                          ") on " + key.first + ", " + std::to_string(s.count) + " time" +
                          (s.count == 1 ? "" : "s") + " this boot";
    message += rule.severity == Severity::kOk ? ": logged only" : "";
    message += "; first: " + s.first;
    out.push_back({"gpu.xid", rule.severity, std::move(message)});
  }
  if (out.empty()) out.push_back({"gpu.xid", Severity::kOk, "no Xid this boot"});
  return out;
}

}  // namespace hf::agent
