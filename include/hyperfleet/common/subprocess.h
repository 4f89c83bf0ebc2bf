#pragma once
// The one way the project starts programs: posix_spawn from an argument vector (never a
// shell), with the environment, working directory, standard streams, process group or
// session, signal state and umask spelled out, so what a child does depends on none of the
// caller's accidents. RunProcess adds waiting with a timeout (SIGTERM, then SIGKILL after a
// grace period, to the whole process group) and output capture.
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf {

/// Where one standard stream of a child comes from or goes to.
struct Stdio {
  enum class Kind {
    kInherit,  ///< the parent's own descriptor
    kNull,     ///< /dev/null
    kFd,       ///< `fd`, a descriptor of the parent's (which keeps its copy)
    kPipe,     ///< a new pipe; the parent holds the other end (Subprocess::stdin_fd() ...)
    kStdout,   ///< stderr only: wherever the child's stdout goes (merged output)
  };
  Kind kind = Kind::kInherit;
  int fd = -1;

  static Stdio Inherit() { return {Kind::kInherit, -1}; }
  static Stdio Null() { return {Kind::kNull, -1}; }
  static Stdio Fd(int fd) { return {Kind::kFd, fd}; }
  static Stdio Pipe() { return {Kind::kPipe, -1}; }
  static Stdio Stdout() { return {Kind::kStdout, -1}; }
};

/// The process group and session a child is started in.
enum class ProcessGroup {
  kInherit,     ///< the parent's: terminal signals (Ctrl-C) reach it with the parent
  kNewGroup,    ///< leads a new group (setpgid 0): Kill() reaches everything it starts
  kNewSession,  ///< leads a new session and group (setsid): detached from any terminal
};

/// What to start and how.
struct ProcessSpec {
  /// The arguments, argv[0] first; argv[0] also names the program unless `program` does.
  std::vector<std::string> argv;
  /// The program: a path when it holds a '/', else found by FindProgram; "" is argv[0].
  std::string program;
  /// The whole environment, "NAME=value" entries; nullopt: the parent's (environ).
  std::optional<std::vector<std::string>> env;
  std::string cwd;  ///< working directory; "" keeps the parent's
  Stdio in = Stdio::Null();
  Stdio out = Stdio::Inherit();
  Stdio err = Stdio::Inherit();
  ProcessGroup group = ProcessGroup::kInherit;
  /// Empty signal mask and default dispositions in the child (a parent that blocks signals
  /// for a signal thread must not pass that on).
  bool reset_signals = true;
  /// Only descriptors 0, 1 and 2 reach the child (libraries do not all open with O_CLOEXEC).
  bool close_other_fds = true;
  /// The child's umask; nullopt: the parent's. posix_spawn cannot set one, so the program is
  /// then started through `/bin/sh -c 'umask M && exec "$0" "$@"'` (argv[0] becomes its path).
  std::optional<unsigned> umask;
};

/// How a child ended.
struct ProcessExit {
  int exit_code = 0;  ///< its exit status, or 128 + signal
  int signal = 0;     ///< the signal that ended it; 0 when it exited
  /// From a waitpid() status.
  static ProcessExit FromWaitStatus(int wait_status);
  bool operator==(const ProcessExit&) const = default;
};

/// The executable `name`: `name` itself when it holds a '/', else the first match in $PATH
/// then /usr/sbin, /sbin, /usr/bin, /bin (a caller's PATH without the sbin directories, as
/// under su or cron, must not hide ip or nft). nullopt when there is none.
std::optional<std::string> FindProgram(std::string_view name);

/// "SIGKILL"-style name of a signal number ("signal N" when unknown).
std::string SignalName(int signal);

/// For a single-threaded supervisor of children: blocks SIGTERM, SIGINT and SIGCHLD
/// (sigprocmask) and returns that set, to be taken synchronously with sigtimedwait(2), so a
/// stop request and a child's end wake the same wait. Children started with reset_signals
/// get an empty mask.
sigset_t BlockSupervisorSignals();

/// pidfd_open(2), by raw syscall (glibc 2.36's <sys/pidfd.h> lacks C linkage for C++): a
/// close-on-exec descriptor of `pid` that polls readable once it has ended; -1 with errno
/// (ESRCH when there is no such process, ENOSYS before Linux 5.3).
int PidfdOpen(pid_t pid);

/// The errno (ENOENT, EACCES, ENOEXEC, ...) that made Subprocess::Spawn or RunProcess fail
/// to start a program; 0 when `status` is no such failure.
int SpawnErrno(const Status& status);

/// A started child. Move-only; destroying one that was not waited for kills it (SIGKILL, to
/// its group when it leads one) and reaps it. Not thread-safe.
class Subprocess {
 public:
  /// Starts `spec`. Errors (SpawnErrno tells the errno): InvalidArgument for an empty argv or
  /// stdin/stdout given as kStdout; NotFound when FindProgram finds no program; Internal
  /// naming the program (and cwd) with errno text when it cannot be started (ENOENT,
  /// EACCES, ENOEXEC for a script without a #! line).
  static StatusOr<Subprocess> Spawn(const ProcessSpec& spec);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  /// The parent's ends of kPipe streams (write end for stdin); -1 when not a pipe or closed.
  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  int stderr_fd() const { return err_; }
  /// Closes the parent's end of the stdin pipe: the child reads EOF.
  void CloseStdin();
  /// A descriptor that polls readable once the child has ended (pidfd; -1 before Linux 5.3).
  int pidfd() const { return pidfd_; }
  /// True when the child leads its own process group (kNewGroup or kNewSession).
  bool leads_group() const { return leads_group_; }

  /// Sends `sig` to the child's whole process group when it leads one (even after it was
  /// reaped: what it started may live on), else to the child until it is reaped.
  void Kill(int sig);
  /// The exit when the child has ended (reaping it), else nullopt. Never blocks.
  std::optional<ProcessExit> TryWait();
  /// Blocks until the child has ended and reaps it; the same exit on later calls.
  ProcessExit Wait();
  /// Gives the child up, for one that must outlive this object (a node supervisor): closes
  /// the parent's pipe ends and pidfd, forgets the child (no kill or reap at destruction) and
  /// returns its pid (-1 when there was none, or it was already reaped). Whoever calls
  /// waitpid for that pid reaps it; init does once this process has exited.
  pid_t Release();

 private:
  Subprocess() = default;
  void Reset();

  pid_t pid_ = -1;
  bool leads_group_ = false;
  int in_ = -1, out_ = -1, err_ = -1;
  int pidfd_ = -1;
  std::optional<ProcessExit> exit_;
};

/// Why RunProcess returned.
enum class RunEnding {
  kExited,    ///< the child ended by itself (exit.signal tells whether by a signal)
  kTimedOut,  ///< RunOptions::timeout passed and we killed it
  kStopped,   ///< RunOptions::stop became true and we killed it
};

/// How RunProcess waits and what it does with output.
struct RunOptions {
  /// Wall time the child may run; then its group (or itself) gets SIGTERM, and SIGKILL after
  /// `kill_grace`. Zero or negative: no limit.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{5000};
  /// After the child ends, its pipes are read until EOF or this long at most (background
  /// processes that keep them open must not hold the result back).
  std::chrono::milliseconds drain_after_exit{2000};
  /// Checked at least every 250 ms (may be null); true: killed as on a timeout.
  const std::atomic<bool>* stop = nullptr;
  /// Whose monotonic() time the deadlines above are measured in; null: the system's.
  const Clock* clock = nullptr;
  /// Receive a kPipe stdout/stderr's bytes as they come; when empty they are collected in
  /// RunResult::out / err.
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  /// Collected bytes kept per stream; the rest is read and dropped (RunResult::truncated).
  size_t max_output_bytes = 16 << 20;
};

/// A finished RunProcess.
struct RunResult {
  RunEnding ending = RunEnding::kExited;
  ProcessExit exit;
  std::string out;  ///< collected stdout (stdout and stderr when merged)
  std::string err;  ///< collected stderr
  bool truncated = false;
  /// Ended by itself with status 0.
  bool ok() const { return ending == RunEnding::kExited && exit.exit_code == 0; }
};

/// Starts `spec` and blocks until it has ended, reading its kPipe stdout/stderr (stdin may
/// not be kPipe). Errors: as Subprocess::Spawn, and InvalidArgument for a kPipe stdin.
StatusOr<RunResult> RunProcess(const ProcessSpec& spec, const RunOptions& options = {});

/// Runs `argv` with stdin from /dev/null and stdout and stderr merged into RunResult::out,
/// without a time limit. Errors: as RunProcess.
StatusOr<RunResult> RunCapture(const std::vector<std::string>& argv);

// ---- The wait loop's decisions (pure, table-tested) ----------------------------------------

/// What the wait loop knows when it decides.
struct WaitState {
  SteadyTime started;
  bool stop_requested = false;             ///< RunOptions::stop read true
  std::optional<RunEnding> terminating;    ///< SIGTERM went out, for this reason
  std::optional<SteadyTime> term_sent_at;  ///< when
  bool kill_sent = false;                  ///< SIGKILL went out
  std::optional<SteadyTime> exited_at;     ///< when the child was reaped
};

/// What to do at `now`.
struct WaitStep {
  std::optional<RunEnding> terminate;  ///< send SIGTERM now, for this reason
  bool kill = false;                   ///< send SIGKILL now
  bool stop_reading = false;           ///< the drain time is over: leave the pipes
  std::chrono::milliseconds sleep{0};  ///< wait this long for output or exit, at most
};

/// The decision at `now`: terminate on stop or timeout (once), SIGKILL `kill_grace` after
/// SIGTERM or at once when a terminated child has exited (its group may live on), leave
/// the pipes `drain_after_exit` after the exit; sleep until the next deadline, at most 250 ms.
WaitStep PlanWait(const RunOptions& options, const WaitState& state, SteadyTime now);

}  // namespace hf
