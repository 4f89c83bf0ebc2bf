#include "hyperfleet/agent/health.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/script_runner.h"

namespace hf::agent {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr std::size_t kMaxCommandOutput = 4096;
constexpr std::size_t kMaxXidEvents = 4096;  // bounds memory on a GPU spewing Xids

std::string Format(const char* format, double a) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, a);
  return buffer;
}

std::string Gib(uint64_t bytes) {
  return Format("%.1f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
}

std::string Percent(double p) { return Format("%.1f%%", p); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string FirstLine(std::string_view text) {
  text = Trim(text);
  return std::string(Trim(text.substr(0, text.find('\n'))));
}

// The number after "<key>" at the start of a line of `text` ("MemTotal:" → kB value).
std::optional<double> NumberAfter(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with(key)) continue;
    line = Trim(line.substr(key.size()));
    double value = 0;
    const auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (ec != std::errc()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

// "avg10=<x>" of the PSI line starting with `kind` ("some" or "full").
std::optional<double> PsiAvg10(std::string_view text, std::string_view kind) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with(kind)) continue;
    const std::size_t at = line.find("avg10=");
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = line.substr(at + 6);
    double value = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

std::optional<std::string> ReadText(const std::string& path, std::size_t limit = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

// Sleeps `d` in short steps; false when `stop` became true.
bool Pause(milliseconds d, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (stop != nullptr && stop->load()) return false;
    std::this_thread::sleep_for(std::min<milliseconds>(
        milliseconds(50), std::chrono::duration_cast<milliseconds>(
                              until - std::chrono::steady_clock::now()) + milliseconds(1)));
  }
  return stop == nullptr || !stop->load();
}

std::optional<ClockSync> KernelClockSync() {
  struct timex tx {};
  tx.modes = 0;  // read only
  const int state = adjtimex(&tx);
  if (state < 0) return std::nullopt;
  return ClockSync{state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0,
                   static_cast<int64_t>(tx.maxerror)};
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Report

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk: return "ok";
    case Severity::kWarning: return "warning";
    case Severity::kSoftFault: return "soft_fault";
    case Severity::kHardFault: return "hard_fault";
  }
  return "unknown";
}

std::string_view SeverityAction(Severity severity) {
  switch (severity) {
    case Severity::kSoftFault: return "reboot";
    case Severity::kHardFault: return "replace";
    default: return "none";
  }
}

Severity HealthReport::verdict() const {
  Severity worst = Severity::kOk;
  for (const auto& f : findings) worst = std::max(worst, f.severity);
  return worst;
}

const HealthFinding* HealthReport::Find(std::string_view check) const {
  for (const auto& f : findings) {
    if (f.check == check) return &f;
  }
  return nullptr;
}

json HealthReport::ToJson() const {
  json list = json::array();
  for (const auto& f : findings) {
    list.push_back({{"check", f.check},
                    {"severity", SeverityName(f.severity)},
                    {"action", SeverityAction(f.severity)},
                    {"message", f.message}});
  }
  const Severity worst = verdict();
  return {{"verdict", SeverityName(worst)},
          {"action", SeverityAction(worst)},
          {"checked_at", ToEpochSeconds(checked_at)},
          {"duration_ms", duration.count()},
          {"findings", std::move(list)}};
}

// ---------------------------------------------------------------------------------------
// Pure checks

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
  if (!problems.empty()) {
    f.severity = Severity::kWarning;
    std::string joined;
    for (const auto& p : problems) joined += (joined.empty() ? "" : ", ") + p;
    f.message += ": " + joined;
  }
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
  if (!problems.empty()) {
    f.severity = Severity::kWarning;
    std::string joined;
    for (const auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    f.message += ": " + joined;
  }
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
  for (const auto& p : parts) f.message += (f.message.empty() ? "" : ", ") + p;
  if (f.message.empty()) f.message = "no reference";
  if (!problems.empty()) {
    f.severity = Severity::kWarning;
    std::string joined;
    for (const auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    f.message += ": " + joined;
  }
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
    std::string_view rest = Trim(log.substr(close + 2, eol - close - 2));
    int xid = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), xid);
    if (ec != std::errc() || xid <= 0) continue;
    out.push_back({std::string(pci), xid, std::string(Trim(log.substr(start, eol - start)))});
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

unsigned CountPciGpus(const std::string& devices_dir) {
  DIR* dir = opendir(devices_dir.c_str());
  if (dir == nullptr) return 0;
  unsigned count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string base = devices_dir + "/" + entry->d_name;
    const auto vendor = ReadText(base + "/vendor", 64);
    const auto klass = ReadText(base + "/class", 64);
    if (!vendor || !klass || Trim(*vendor) != "0x10de") continue;
    const std::string_view c = Trim(*klass);
    if (c.starts_with("0x0300") || c.starts_with("0x0302")) ++count;
  }
  closedir(dir);
  return count;
}

// ---------------------------------------------------------------------------------------
// Commands

CommandResult RunCommand(const std::vector<std::string>& argv, milliseconds timeout,
                         const std::atomic<bool>* stop) {
  CommandResult result;
  if (argv.empty()) {
    result.started = false;
    return result;
  }
  std::string path = argv[0];
  if (path.find('/') == std::string::npos) {
    path.clear();
    for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
      const std::string candidate = std::string(dir) + "/" + argv[0];
      if (access(candidate.c_str(), X_OK) == 0) {
        path = candidate;
        break;
      }
    }
  }
  if (path.empty()) {
    result.started = false;
    result.output = argv[0] + ": not found";
    return result;
  }
  static const SystemClock kClock;
  ScriptSpec spec;
  spec.path = path;
  spec.argv = argv;
  spec.working_directory = "/";
  spec.environment = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "LANG=C", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"};
  spec.timeout = timeout;
  spec.kill_grace = milliseconds(1000);
  spec.drain_after_exit = milliseconds(500);
  const ScriptOutcome outcome = RunScript(
      spec, kClock,
      [&](OutputLine line) {
        if (result.output.size() >= kMaxCommandOutput) return;
        if (!result.output.empty()) result.output += '\n';
        result.output += line.text.substr(0, kMaxCommandOutput - result.output.size());
      },
      stop);
  switch (outcome.kind) {
    case ScriptOutcome::Kind::kExited:
    case ScriptOutcome::Kind::kSignaled:
      result.exit_code = outcome.exit_code;
      break;
    case ScriptOutcome::Kind::kTimedOut:
      result.timed_out = true;
      result.exit_code = outcome.exit_code;
      break;
    case ScriptOutcome::Kind::kSpawnFailed:
      result.started = false;
      result.output = path + ": " + std::strerror(outcome.spawn_errno);
      break;
    case ScriptOutcome::Kind::kStopped:
      result.exit_code = -1;
      break;
  }
  return result;
}

// ---------------------------------------------------------------------------------------
// The monitor

HealthMonitor::HealthMonitor(HealthMonitorOptions options) : options_(std::move(options)) {
  if (options_.max_restarts < 0) options_.max_restarts = 0;
  if (options_.poll_interval <= milliseconds(0)) options_.poll_interval = milliseconds(50);
}

HealthMonitor::~HealthMonitor() {
  if (kmsg_fd_ >= 0) close(kmsg_fd_);
}

HealthReport HealthMonitor::Check(const CheckInputs& inputs) {
  static const SystemClock kSystemClock;
  const Clock& clock = options_.clock != nullptr ? *options_.clock : kSystemClock;
  const auto started = std::chrono::steady_clock::now();
  HealthReport report;
  report.checked_at = clock.now();
  const bool on_node = options_.root == "/";

  for (const auto& mount : options_.disk_paths) {
    struct statvfs st {};
    if (statvfs(NodePath(options_.root, mount).c_str(), &st) != 0) {
      const int e = errno;
      if (e == ENOENT) continue;  // e.g. no separate /tmp under a test root
      report.findings.push_back({"disk:" + mount, Severity::kWarning,
                                 mount + ": statvfs failed: " + std::strerror(e)});
      continue;
    }
    DiskSpace space;
    space.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
    space.available_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    space.total_inodes = st.f_files;
    space.available_inodes = st.f_favail;
    report.findings.push_back(EvaluateDisk(mount, space, options_.disk));
  }

  const auto meminfo = ReadText(NodePath(options_.root, "/proc/meminfo"));
  const auto pressure = ReadText(NodePath(options_.root, "/proc/pressure/memory"));
  report.findings.push_back(
      EvaluateMemory(meminfo.value_or(""), pressure.value_or(""), options_.memory));

  std::optional<ClockSync> sync;
  if (options_.clock_sync) {
    sync = options_.clock_sync();
  } else if (on_node) {
    sync = KernelClockSync();
  }
  std::optional<SystemTime> reference;
  SystemTime node_time = clock.now();
  if (inputs.control_plane_time) {
    node_time = inputs.control_plane_time->node;
    reference = inputs.control_plane_time->reference;
  }
  report.findings.push_back(EvaluateClock(node_time, reference, sync, options_.clock_thresholds));

  CommandRunner run = options_.run_command;
  if (!run && on_node) {
    const std::atomic<bool>* stop = options_.stop;
    run = [stop](const std::vector<std::string>& argv, milliseconds timeout) {
      return RunCommand(argv, timeout, stop);
    };
  }
  bool unit_trouble = false;  // a unit restarted or down: follow it every round
  for (const auto& f : command_findings_) {
    unit_trouble |= f.severity != Severity::kOk &&
                    std::find(options_.units.begin(), options_.units.end(), f.check) !=
                        options_.units.end();
  }
  // A unit's main process that died is noticed every round without running systemctl (a
  // cheap kill(pid, 0)); the systemctl round then comes at once instead of within
  // command_interval.
  bool unit_died = false;
  for (const auto& [unit, pid] : unit_pids_) {
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) unit_died = true;
  }
  const bool command_round_due =
      !command_round_ || unit_trouble || unit_died ||
      std::chrono::steady_clock::now() - *command_round_ >= options_.command_interval;
  if (run && command_round_due) {
    command_findings_.clear();
    command_round_ = std::chrono::steady_clock::now();
    command_findings_.push_back(
        EvaluateInit(run({"systemctl", "is-system-running"}, options_.command_timeout)));
    if (inputs.services) {
      for (const auto& unit : options_.units) {
        HealthFinding f = CheckUnit(unit, run);
        if (!f.check.empty()) command_findings_.push_back(std::move(f));
      }
    } else if (!options_.units.empty()) {
      command_findings_.push_back(
          {"services", Severity::kOk, "not checked while the lifecycle scripts run"});
      command_round_.reset();  // check them as soon as the scripts are done
    }
  }
  if (run) {
    report.findings.insert(report.findings.end(), command_findings_.begin(),
                           command_findings_.end());
  }

  CheckGpus(&report);
  report.duration = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                             started);
  return report;
}

HealthFinding HealthMonitor::CheckUnit(const std::string& unit, const CommandRunner& run) {
  const CommandResult enabled = run({"systemctl", "is-enabled", unit}, options_.command_timeout);
  const std::string enabled_state = FirstLine(enabled.output);
  if (!enabled.started || enabled.exit_code != 0 ||
      (enabled_state != "enabled" && enabled_state != "enabled-runtime")) {
    return {};  // not this node's role (or not installed)
  }
  auto state_of = [&]() {
    const CommandResult r = run({"systemctl", "is-active", unit}, options_.command_timeout);
    if (r.timed_out) return std::string("not answering");
    const std::string s = FirstLine(r.output);
    return s.empty() ? std::string("unknown") : s;
  };
  // Polls until active or `settle` passed; the last state seen.
  auto settle = [&](std::string state) {
    const auto deadline = std::chrono::steady_clock::now() + options_.restart_settle;
    while (state != "active" && std::chrono::steady_clock::now() < deadline) {
      if (!Pause(options_.poll_interval, options_.stop)) break;
      state = state_of();
    }
    return state;
  };

  ServiceObservation o;
  o.max_restarts = options_.max_restarts;
  std::string state = state_of();
  if (state == "activating" || state == "reloading") state = settle(state);
  o.state_before = state;
  int& restarts = restarts_[unit];
  // The main process to watch between rounds (only on the node itself).
  auto remember_pid = [&] {
    unit_pids_[unit] = 0;
    if (options_.root != "/") return;
    const CommandResult r =
        run({"systemctl", "show", "-p", "MainPID", "--value", unit}, options_.command_timeout);
    int pid = 0;
    if (r.exit_code == 0 && absl::SimpleAtoi(FirstLine(r.output), &pid)) unit_pids_[unit] = pid;
  };
  if (state == "active") {
    restarts = 0;
    remember_pid();
    return EvaluateService(unit, o);
  }
  bool stopped = false;
  while (state != "active" && restarts < options_.max_restarts && !stopped) {
    ++restarts;
    ++o.restarts_this_round;
    spdlog::warn("health: {} is {}; restarting it (restart {} of {})", unit, o.state_before,
                 restarts, options_.max_restarts);
    const CommandResult r = run({"systemctl", "restart", unit}, options_.command_timeout);
    o.last_output = r.output;
    state = state_of();
    if (state != "active") state = settle(state);
    stopped = options_.stop != nullptr && options_.stop->load();
  }
  o.restarts_total = restarts;
  o.active_after = state == "active";
  if (o.active_after) remember_pid();
  if (!o.active_after && o.last_output.empty()) o.last_output = "still " + state;
  HealthFinding f = EvaluateService(unit, o);
  if (f.severity != Severity::kOk) spdlog::warn("health: {}", f.message);
  return f;
}

void HealthMonitor::CheckGpus(HealthReport* report) {
  if (!options_.nvml) return;
  const unsigned pci_gpus = CountPciGpus(NodePath(options_.root, options_.pci_devices));
  if (!nvml_) {
    auto opened = Nvml::Open(options_.nvml_library);
    if (!opened.ok()) {
      const std::string why(opened.status().message());
      if (absl::IsNotFound(opened.status())) {
        if (pci_gpus > 0) {
          report->findings.push_back(
              {"nvml", Severity::kWarning,
               "not present, but " + std::to_string(pci_gpus) +
                   " NVIDIA GPUs are on the PCI bus: GPU checks skipped (" + why + ")"});
        } else {
          report->findings.push_back({"nvml", Severity::kOk, "not present (" + why + ")"});
          return;  // not a GPU node
        }
      } else {
        // The library is there but cannot talk to the driver: with GPUs on the bus that is a
        // broken GPU stack (HyperPod HMA: NvidiaErrorReboot).
        report->findings.push_back({"nvml", pci_gpus > 0 ? Severity::kSoftFault : Severity::kWarning,
                                    "present but unusable: " + why});
      }
    } else {
      nvml_ = std::move(*opened);
    }
  }
  if (nvml_) {
    report->findings.push_back({"nvml", Severity::kOk, "loaded " + nvml_->library()});
    std::optional<unsigned> expected = options_.expected_gpus;
    std::string source = "instance type";
    if (!expected && pci_gpus > 0) {
      expected = pci_gpus;
      source = "NVIDIA GPUs on the PCI bus";
    }
    for (auto& f : EvaluateGpus(nvml_->Query(), expected, source, options_.gpu)) {
      report->findings.push_back(std::move(f));
    }
  }
  ReadKernelLog();
  if (kmsg_fd_ < 0 && xids_.empty()) {
    report->findings.push_back(
        {"gpu.xid", Severity::kWarning, "kernel log not readable: Xids not checked (" + kmsg_error_ + ")"});
    return;
  }
  for (auto& f : EvaluateXids(xids_)) report->findings.push_back(std::move(f));
}

void HealthMonitor::ReadKernelLog() {
  if (kmsg_fd_ < 0) {
    const std::string path = NodePath(options_.root, options_.kernel_log);
    kmsg_fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (kmsg_fd_ < 0) {
      const int e = errno;
      kmsg_error_ = path + ": " + std::strerror(e);
      return;
    }
  }
  char buffer[8192];  // a /dev/kmsg read returns one record, at most about 1 KiB
  for (;;) {
    const ssize_t n = read(kmsg_fd_, buffer, sizeof buffer);
    if (n == 0) break;  // end of a regular file (tests); more may be appended later
    if (n < 0) {
      if (errno == EINTR || errno == EPIPE) continue;  // EPIPE: records overwritten
      if (errno == EAGAIN) break;                       // no new record
      kmsg_error_ = options_.kernel_log + ": " + std::strerror(errno);
      close(kmsg_fd_);
      kmsg_fd_ = -1;
      break;
    }
    kmsg_partial_.append(buffer, static_cast<std::size_t>(n));
    const std::size_t last = kmsg_partial_.rfind('\n');
    if (last == std::string::npos) {
      if (kmsg_partial_.size() > 65536) kmsg_partial_.clear();  // no line end: garbage
      continue;
    }
    for (auto& e : ParseXids(std::string_view(kmsg_partial_).substr(0, last + 1))) {
      if (xids_.size() >= kMaxXidEvents) break;
      if (e.xid > 0) spdlog::warn("health: {}", e.text);
      xids_.push_back(std::move(e));
    }
    kmsg_partial_.erase(0, last + 1);
  }
}

}  // namespace hf::agent
