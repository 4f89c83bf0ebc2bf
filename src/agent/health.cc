// The health report, and HealthMonitor::Check: which checks run in a round and when (the
// files of each concern are listed in health_internal.h).
#include "hyperfleet/agent/health.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "health_internal.h"

namespace hf::agent {

using json = nlohmann::json;
using std::chrono::milliseconds;


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

agentapi::HealthReport HealthReport::ToWire() const {
  agentapi::HealthReport out;
  const Severity worst = verdict();
  out.verdict = SeverityName(worst);
  out.action = SeverityAction(worst);
  out.checked_at = ToEpochSeconds(checked_at);
  out.duration_ms = duration.count();
  out.findings.reserve(findings.size());
  for (const auto& f : findings) {
    out.findings.push_back({f.check, std::string(SeverityName(f.severity)),
                            std::string(SeverityAction(f.severity)), f.message});
  }
  return out;
}

json HealthReport::ToJson() const { return json(ToWire()); }
// ---------------------------------------------------------------------------------------
// The monitor

HealthMonitor::HealthMonitor(HealthMonitorOptions options) : options_(std::move(options)) {
  static const SystemClock kSystemClock;
  if (options_.clock == nullptr) options_.clock = &kSystemClock;
  if (options_.max_restarts < 0) options_.max_restarts = 0;
  if (options_.poll_interval <= milliseconds(0)) options_.poll_interval = milliseconds(50);
}

HealthMonitor::~HealthMonitor() {
  if (kmsg_fd_ >= 0) close(kmsg_fd_);
}

HealthReport HealthMonitor::Check(const CheckInputs& inputs) {
  const Clock& clock = *options_.clock;
  const SteadyTime started = clock.monotonic();
  HealthReport report;
  report.checked_at = clock.now();
  for (auto& f : health_internal::ProbeDisks(options_)) report.findings.push_back(std::move(f));
  report.findings.push_back(health_internal::ProbeMemory(options_));
  report.findings.push_back(health_internal::ProbeClock(options_, clock, inputs));
  CheckCommands(inputs, &report);
  CheckGpus(&report);
  report.duration = std::chrono::duration_cast<milliseconds>(clock.monotonic() - started);
  return report;
}

void HealthMonitor::CheckCommands(const CheckInputs& inputs, HealthReport* report) {
  CommandRunner run = options_.run_command;
  if (!run && options_.root == "/") {
    const std::atomic<bool>* stop = options_.stop;
    run = [stop](const std::vector<std::string>& argv, milliseconds timeout) {
      return RunCommand(argv, timeout, stop);
    };
  }
  if (!run) return;  // a test root must never run the host's systemctl
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
  const SteadyTime now = options_.clock->monotonic();
  const bool command_round_due = !command_round_ || unit_trouble || unit_died ||
                                 now - *command_round_ >= options_.command_interval;
  if (command_round_due) {
    command_findings_.clear();
    command_round_ = now;
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
  report->findings.insert(report->findings.end(), command_findings_.begin(),
                          command_findings_.end());
}

}  // namespace hf::agent
