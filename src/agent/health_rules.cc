// The pure verdicts on disk, memory, clock, init and units (health.h "Pure checks"): plain
// inputs in, one finding out; the rules and their sources are tabled in docs/nodes.md.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "health_internal.h"
#include "hyperfleet/agent/health.h"
#include "hyperfleet/common/strings.h"

namespace hf::agent {
namespace {

using health_internal::FirstLine;

std::string Format(const char* format, double a) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, a);
  return buffer;
}

std::string Gib(uint64_t bytes) {
  return Format("%.1f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
}

std::string Percent(double p) { return Format("%.1f%%", p); }

// The number at the start of `text` (after leading whitespace); nullopt when there is none.
std::optional<double> LeadingNumber(std::string_view text) {
  text = StripAsciiWhitespace(text);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc()) return std::nullopt;
  return value;
}

// The number after "<key>" at the start of a line of `text` ("MemTotal:" → kB value).
std::optional<double> NumberAfter(std::string_view text, std::string_view key) {
  for (const absl::string_view piece : absl::StrSplit(AbslView(text), '\n')) {
    const std::string_view line = StdView(piece);
    if (line.starts_with(key)) return LeadingNumber(line.substr(key.size()));
  }
  return std::nullopt;
}

// "avg10=<x>" of the PSI line starting with `kind` ("some" or "full").
std::optional<double> PsiAvg10(std::string_view text, std::string_view kind) {
  for (const absl::string_view piece : absl::StrSplit(AbslView(text), '\n')) {
    const std::string_view line = StdView(piece);
    if (!line.starts_with(kind)) continue;
    const std::size_t at = line.find("avg10=");
    if (at == std::string_view::npos) return std::nullopt;
    const std::string_view rest = line.substr(at + 6);
    double value = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

// `f` becomes a warning whose message ends with the problems, when there are any.
void WarnOf(HealthFinding& f, const std::vector<std::string>& problems,
            std::string_view separator) {
  if (problems.empty()) return;
  f.severity = Severity::kWarning;
  f.message += ": " + absl::StrJoin(problems, AbslView(separator));
}

}  // namespace

HealthFinding EvaluateDisk(std::string_view mount, const DiskSpace& space,
                           const DiskThresholds& t) {
  HealthFinding f{"disk:" + std::string(mount), Severity::kOk, ""};
  if (space.total_bytes == 0) {
    f.message = std::string(mount) + ": size 0 (not checked)";
    return f;
  }
  const double free_pct =
      100.0 * static_cast<double>(space.available_bytes) / static_cast<double>(space.total_bytes);
  f.message = std::string(mount) + ": " + Gib(space.available_bytes) + " free of " +
              Gib(space.total_bytes) + " (" + Percent(free_pct) + ")";
  std::vector<std::string> problems;
  if (space.available_bytes == 0) {
    problems.push_back("full");
  } else if (space.available_bytes < t.min_free_bytes || free_pct < t.min_free_percent) {
    problems.push_back("low on space (floor " + Gib(t.min_free_bytes) + " or " +
                       Percent(t.min_free_percent) + ")");
  }
  if (space.total_inodes > 0) {
    const double inode_pct = 100.0 * static_cast<double>(space.available_inodes) /
                             static_cast<double>(space.total_inodes);
    f.message += ", inodes " + Percent(inode_pct) + " free";
    if (inode_pct < t.min_free_inodes_percent) {
      problems.push_back(space.available_inodes == 0 ? "out of inodes" : "low on inodes");
    }
  }
  WarnOf(f, problems, ", ");
  return f;
}

HealthFinding EvaluateMemory(std::string_view meminfo, std::string_view pressure,
                             const MemoryThresholds& t) {
  HealthFinding f{"memory", Severity::kOk, ""};
  const auto total_kb = NumberAfter(meminfo, "MemTotal:");
  const auto available_kb = NumberAfter(meminfo, "MemAvailable:");
  if (!total_kb || !available_kb || *total_kb <= 0) {
    f.severity = Severity::kWarning;
    f.message = "cannot read MemTotal/MemAvailable from /proc/meminfo";
    return f;
  }
  const double pct = 100.0 * *available_kb / *total_kb;
  f.message = Gib(static_cast<uint64_t>(*available_kb * 1024)) + " available of " +
              Gib(static_cast<uint64_t>(*total_kb * 1024)) + " (" + Percent(pct) + ")";
  std::vector<std::string> problems;
  if (pct < t.min_available_percent) {
    problems.push_back("available memory below " + Percent(t.min_available_percent));
  }
  if (const auto some = PsiAvg10(pressure, "some")) {
    f.message += ", pressure some avg10 " + Percent(*some);
    if (*some > t.max_some_avg10) {
      problems.push_back("tasks stalled on memory more than " + Percent(t.max_some_avg10) +
                         " of the last 10 s");
    }
  }
  WarnOf(f, problems, "; ");
  return f;
}

HealthFinding EvaluateClock(SystemTime node_time, std::optional<SystemTime> reference_time,
                            std::optional<ClockSync> sync, const ClockThresholds& t) {
  HealthFinding f{"clock", Severity::kOk, ""};
  std::vector<std::string> parts, problems;
  if (node_time < t.not_before) {
    problems.push_back("the node's clock is before " +
                       Format("%.0f", ToEpochSeconds(t.not_before)) +
                       " (epoch s): was the real-time clock reset?");
  }
  if (reference_time) {
    const double skew = std::chrono::duration<double>(node_time - *reference_time).count();
    parts.push_back(Format("%+.3f s from the control plane", skew));
    if (std::fabs(skew) > static_cast<double>(t.max_skew.count())) {
      problems.push_back(Format("skew beyond %.0f s", static_cast<double>(t.max_skew.count())));
    }
  }
  if (sync) {
    parts.push_back(sync->synchronized
                        ? Format("synchronised (max error %.3f s)",
                                 static_cast<double>(sync->max_error_us) / 1e6)
                        : std::string("not synchronised"));
    if (!sync->synchronized) problems.push_back("no time synchronisation (NTP) according to the kernel");
  }
  f.message = parts.empty() ? std::string("no reference") : absl::StrJoin(parts, ", ");
  WarnOf(f, problems, "; ");
  return f;
}

HealthFinding EvaluateInit(const CommandResult& r) {
  HealthFinding f{"init", Severity::kOk, ""};
  if (!r.started) {
    f.message = "no systemd (systemctl cannot run)";
    return f;
  }
  if (r.timed_out) {
    f.severity = Severity::kSoftFault;
    f.message = "init (PID 1) does not answer: systemctl is-system-running timed out";
    return f;
  }
  const std::string state = FirstLine(r.output);
  if (state == "running" || state == "starting" || state == "initializing") {
    f.message = "systemd " + state;
  } else {
    f.severity = Severity::kWarning;
    f.message = "systemd " + (state.empty() ? std::string("state unknown") : state) +
                (state == "degraded" ? " (a unit failed: systemctl --failed)" : "");
  }
  return f;
}

HealthFinding EvaluateService(std::string_view unit, const ServiceObservation& o) {
  HealthFinding f{std::string(unit), Severity::kOk, ""};
  const std::string name(unit);
  if (o.state_before == "active") {
    f.message = name + " active";
  } else if (o.active_after) {
    f.severity = Severity::kWarning;
    f.message = name + " was " + o.state_before + "; restarted by the agent (restart " +
                std::to_string(o.restarts_total) + " of " + std::to_string(o.max_restarts) + ")";
  } else if (o.restarts_total >= o.max_restarts) {
    f.severity = Severity::kSoftFault;
    f.message = name + " cannot be restarted: " + o.state_before + " after " +
                std::to_string(o.restarts_total) + " restart" +
                (o.restarts_total == 1 ? "" : "s");
    const std::string why = FirstLine(o.last_output);
    if (!why.empty()) f.message += " (" + why + ")";
  } else {
    f.severity = Severity::kWarning;
    f.message = name + " is " + o.state_before + "; not yet restarted";
  }
  return f;
}

}  // namespace hf::agent
