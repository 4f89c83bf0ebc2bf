#pragma once
// Runs one lifecycle script the way HyperPod does (docs/hyperpod-contract.md "Bring-up"): executed
// directly (its #! line picks the interpreter), in its own process group, stdin /dev/null,
// stdout and stderr merged into one pipe that is read line by line; started and waited for
// by the common launcher (hyperfleet/common/subprocess.h).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/subprocess.h"  // hf::SignalName names ScriptOutcome::signal

namespace hf::agent {

/// One line of a script's output, without its line terminator ("\n" or "\r\n").
struct OutputLine {
  SystemTime time;   ///< when the agent read it (the injected Clock)
  std::string text;  ///< at most ScriptSpec::max_line_bytes bytes
};

/// What to run and how.
struct ScriptSpec {
  std::string path;               ///< the executable, as a path on this machine
  std::vector<std::string> argv;  ///< argv[0..]; empty: {path}
  std::string working_directory;  ///< chdir here before exec; "" keeps the agent's
  std::vector<std::string> environment;  ///< the whole environment, "KEY=VALUE" entries
  /// Wall time the script may run; after it the process group gets SIGTERM, then SIGKILL
  /// after `kill_grace`. Zero or negative: no limit.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{5000};
  /// Longer lines are split into pieces of at most this many bytes (never inside a UTF-8
  /// sequence), so one event stays well under CloudWatch's 256 KiB event limit.
  std::size_t max_line_bytes = 16 * 1024;
  /// After the script exits, its output pipe is read until EOF or for this long at most
  /// (background children that keep the pipe open must not hold the result back).
  std::chrono::milliseconds drain_after_exit{2000};
};

/// How a script ended.
struct ScriptOutcome {
  enum class Kind {
    kExited,       ///< exit_code holds its status
    kSignaled,     ///< killed by `signal` (not by us)
    kTimedOut,     ///< we killed it after ScriptSpec::timeout
    kSpawnFailed,  ///< it could not be started; spawn_errno says why
    kStopped,      ///< the caller asked to stop; we killed it
  };
  Kind kind = Kind::kExited;
  int exit_code = 0;    ///< kExited: its status; kSignaled/kTimedOut: 128 + signal
  int signal = 0;       ///< the terminating signal, when there is one
  int spawn_errno = 0;  ///< kSpawnFailed: errno of posix_spawn (e.g. ENOEXEC, ENOENT)
};

/// Runs `spec` and blocks until the script has ended. Calls `on_line` from the calling
/// thread, in output order, for each complete line (and for a last unterminated one).
/// `stop` (may be null) is checked at least every 250 ms; when it becomes true the process
/// group is killed as on a timeout and kStopped is returned. Never throws.
ScriptOutcome RunScript(const ScriptSpec& spec, const Clock& clock,
                        const std::function<void(OutputLine)>& on_line,
                        const std::atomic<bool>* stop);

}  // namespace hf::agent
