// What a health round reads and runs on the node: statvfs of the mounts, /proc/meminfo and
// memory pressure, the kernel's clock sync state, commands (RunCommand) and the units the
// monitor restarts (HealthMonitor::CheckUnit). The verdicts are health_rules.cc's.
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "health_internal.h"
#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/health.h"
#include "hyperfleet/agent/script_runner.h"
#include "hyperfleet/common/fs.h"

namespace hf::agent {
namespace {

using health_internal::FirstLine;
using std::chrono::milliseconds;

constexpr std::size_t kMaxCommandOutput = 4096;

// Sleeps `d` in steps of at most 50 ms; false when `stop` became true. Waiting only: what
// the waits add up to is decided on the monitor's Clock.
bool Pause(milliseconds d, const std::atomic<bool>* stop) {
  for (milliseconds left = d; left > milliseconds(0); left -= milliseconds(50)) {
    if (stop != nullptr && stop->load()) return false;
    std::this_thread::sleep_for(std::min(left, milliseconds(50)));
  }
  return stop == nullptr || !stop->load();
}

// `name` itself when it holds a '/', else the first executable `name` in root's program
// directories (never the agent's own PATH); "" when there is none.
std::string RootProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
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

namespace health_internal {

std::vector<HealthFinding> ProbeDisks(const HealthMonitorOptions& options) {
  std::vector<HealthFinding> out;
  for (const auto& mount : options.disk_paths) {
    struct statvfs st {};
    if (statvfs(NodePath(options.root, mount).c_str(), &st) != 0) {
      const int e = errno;
      if (e == ENOENT) continue;  // e.g. no separate /tmp under a test root
      out.push_back({"disk:" + mount, Severity::kWarning,
                     mount + ": statvfs failed: " + std::strerror(e)});
      continue;
    }
    DiskSpace space;
    space.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
    space.available_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    space.total_inodes = st.f_files;
    space.available_inodes = st.f_favail;
    out.push_back(EvaluateDisk(mount, space, options.disk));
  }
  return out;
}

HealthFinding ProbeMemory(const HealthMonitorOptions& options) {
  const auto meminfo = ReadFile(NodePath(options.root, "/proc/meminfo"));
  const auto pressure = ReadFile(NodePath(options.root, "/proc/pressure/memory"));
  return EvaluateMemory(meminfo.ok() ? *meminfo : "", pressure.ok() ? *pressure : "",
                        options.memory);
}

HealthFinding ProbeClock(const HealthMonitorOptions& options, const Clock& clock,
                         const CheckInputs& inputs) {
  std::optional<ClockSync> sync;
  if (options.clock_sync) {
    sync = options.clock_sync();
  } else if (options.root == "/") {
    sync = KernelClockSync();
  }
  std::optional<SystemTime> reference;
  SystemTime node_time = clock.now();
  if (inputs.control_plane_time) {
    node_time = inputs.control_plane_time->node;
    reference = inputs.control_plane_time->reference;
  }
  return EvaluateClock(node_time, reference, sync, options.clock_thresholds);
}

}  // namespace health_internal

CommandResult RunCommand(const std::vector<std::string>& argv, milliseconds timeout,
                         const std::atomic<bool>* stop) {
  CommandResult result;
  if (argv.empty()) {
    result.started = false;
    return result;
  }
  const std::string path = RootProgram(argv[0]);
  if (path.empty()) {
    result.started = false;
    result.output = argv[0] + ": not found";
    return result;
  }
  static const SystemClock kClock;
  ScriptSpec spec;
  spec.path = path;
  spec.argv = argv;
  spec.working_directory = std::string("/");  // (a literal trips GCC 12's -Wrestrict)
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
  // Polls until active or `restart_settle` passed on the monitor's clock; the last state
  // seen. A poll waits `poll_interval` first, so a real clock allows at most settle/poll
  // polls; the cap holds that bound for a clock that does not move (a test's).
  auto settle = [&](std::string state) {
    const Clock& clock = *options_.clock;
    const SteadyTime deadline = clock.monotonic() + options_.restart_settle;
    const milliseconds poll = options_.poll_interval;  // > 0 (the constructor sees to it)
    const int64_t max_polls = (options_.restart_settle + poll - milliseconds(1)) / poll;
    for (int64_t polls = 0; state != "active" && polls < max_polls && clock.monotonic() < deadline;
         ++polls) {
      if (!Pause(poll, options_.stop)) break;
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

}  // namespace hf::agent
