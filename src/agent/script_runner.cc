#include "hyperfleet/agent/script_runner.h"

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hyperfleet/common/line_splitter.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::agent {
namespace {

// The launcher's spec for a script: executed directly (posix_spawn, no PATH search: a bare
// name is relative to the working directory), its own process group, stdin /dev/null,
// stdout and stderr merged into one pipe, exactly `spec.environment`, signals reset (the
// agent blocks SIGTERM/SIGINT for its signal thread), no other descriptor of the agent's.
ProcessSpec LaunchSpecOf(const ScriptSpec& spec) {
  ProcessSpec p;
  p.program = spec.path;
  if (!spec.path.empty() && spec.path.find('/') == std::string::npos) {
    p.program = "./" + spec.path;
  }
  p.argv = spec.argv.empty() ? std::vector<std::string>{spec.path} : spec.argv;
  p.env = spec.environment;
  p.cwd = spec.working_directory;
  p.in = Stdio::Null();
  p.out = Stdio::Pipe();
  p.err = Stdio::Stdout();
  p.group = ProcessGroup::kNewGroup;
  p.reset_signals = true;
  p.close_other_fds = true;
  return p;
}

// Runs `launch`, retrying briefly on ETXTBSY: a child another thread spawns while the agent
// writes the bundle holds a copy of the write descriptor until its own exec (O_CLOEXEC
// closes it only then), so a script written a moment ago can be "busy" for a few
// milliseconds.
StatusOr<RunResult> RunRetryingBusy(const ProcessSpec& launch, const RunOptions& options) {
  for (int attempt = 1;; ++attempt) {
    StatusOr<RunResult> result = RunProcess(launch, options);
    if (result.ok() || SpawnErrno(result.status()) != ETXTBSY || attempt == 20) return result;
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
  }
}

ScriptOutcome OutcomeOf(const RunResult& run) {
  ScriptOutcome outcome;
  outcome.exit_code = run.exit.exit_code;
  outcome.signal = run.exit.signal;
  switch (run.ending) {
    case RunEnding::kTimedOut:
      outcome.kind = ScriptOutcome::Kind::kTimedOut;
      break;
    case RunEnding::kStopped:
      outcome.kind = ScriptOutcome::Kind::kStopped;
      break;
    case RunEnding::kExited:
      outcome.kind = run.exit.signal != 0 ? ScriptOutcome::Kind::kSignaled
                                          : ScriptOutcome::Kind::kExited;
      break;
  }
  return outcome;
}

}  // namespace

ScriptOutcome RunScript(const ScriptSpec& spec, const Clock& clock,
                        const std::function<void(OutputLine)>& on_line,
                        const std::atomic<bool>* stop) {
  LineSplitter splitter(spec.max_line_bytes, [&](std::string text) {
    on_line(OutputLine{clock.now(), std::move(text)});
  });
  RunOptions options;
  options.timeout = spec.timeout;
  options.kill_grace = spec.kill_grace;
  options.drain_after_exit = spec.drain_after_exit;
  options.stop = stop;
  options.on_stdout = [&](std::string_view bytes) { splitter.Feed(bytes); };
  // Deadlines are on the system's steady clock; `clock` only stamps the lines.
  const StatusOr<RunResult> run = RunRetryingBusy(LaunchSpecOf(spec), options);
  if (!run.ok()) {
    ScriptOutcome failed;
    failed.kind = ScriptOutcome::Kind::kSpawnFailed;
    failed.spawn_errno = SpawnErrno(run.status());
    if (failed.spawn_errno == 0) failed.spawn_errno = EINVAL;
    return failed;
  }
  splitter.Finish();
  return OutcomeOf(*run);
}

}  // namespace hf::agent
