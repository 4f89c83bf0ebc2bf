#include "hyperfleet/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace hf {
namespace {

using std::chrono::milliseconds;

constexpr absl::string_view kErrnoPayload = "type.hyperfleet/spawn-errno";

Status SpawnError(Status status, int err) {
  status.SetPayload(kErrnoPayload, absl::Cord(std::to_string(err)));
  return status;
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::access(path.c_str(), X_OK) == 0 && ::stat(path.c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
}

// posix_spawn's file actions and attributes, destroyed with this object.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

// Adds the file actions that connect child descriptor `target` as `stdio` says. For kPipe,
// `*parent_end` gets the parent's end and `*child_end` the child's (closed by the caller
// after the spawn). Returns an errno, 0 on success.
int AddStdio(SpawnSetup& s, const Stdio& stdio, int target, int* parent_end, int* child_end) {
  switch (stdio.kind) {
    case Stdio::Kind::kInherit:
      return 0;
    case Stdio::Kind::kNull:
      return posix_spawn_file_actions_addopen(&s.actions, target, "/dev/null",
                                              target == 0 ? O_RDONLY : O_WRONLY, 0);
    case Stdio::Kind::kFd:
      return posix_spawn_file_actions_adddup2(&s.actions, stdio.fd, target);
    case Stdio::Kind::kStdout:
      return posix_spawn_file_actions_adddup2(&s.actions, 1, target);
    case Stdio::Kind::kPipe: {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
      *parent_end = target == 0 ? fds[1] : fds[0];
      *child_end = target == 0 ? fds[0] : fds[1];
      return posix_spawn_file_actions_adddup2(&s.actions, *child_end, target);
    }
  }
  return EINVAL;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

ProcessExit ProcessExit::FromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return {128 + WTERMSIG(wait_status), WTERMSIG(wait_status)};
  }
  return {WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1, 0};
}

std::optional<std::string> FindProgram(std::string_view name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string path(name);
    return IsExecutableFile(path) ? std::optional(path) : std::nullopt;
  }
  const char* env_path = std::getenv("PATH");
  const std::string dirs = absl::StrCat(env_path ? env_path : "", ":/usr/sbin:/sbin:/usr/bin:/bin");
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", std::string(name));
    if (IsExecutableFile(candidate)) return candidate;
  }
  return std::nullopt;
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

sigset_t BlockSupervisorSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  return mask;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

int SpawnErrno(const Status& status) {
  const absl::optional<absl::Cord> payload = status.GetPayload(kErrnoPayload);
  int err = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &err)) return 0;
  return err;
}

StatusOr<Subprocess> Subprocess::Spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) {
    return SpawnError(absl::InvalidArgumentError("cannot start a process: empty argv"), EINVAL);
  }
  const std::string& name = spec.program.empty() ? spec.argv[0] : spec.program;
  if (spec.in.kind == Stdio::Kind::kStdout || spec.out.kind == Stdio::Kind::kStdout) {
    return SpawnError(absl::InvalidArgumentError(absl::StrCat(
                          "cannot start ", name, ": only stderr may go to stdout")),
                      EINVAL);
  }
  // A path is spawned as given, so that posix_spawn reports why it cannot run (EACCES,
  // ENOEXEC); a name must be found first.
  std::string program = name;
  if (name.find('/') == std::string::npos) {
    std::optional<std::string> found = FindProgram(name);
    if (!found) {
      return SpawnError(absl::NotFoundError(absl::StrCat("cannot run ", name, ": not found")),
                        ENOENT);
    }
    program = *std::move(found);
  }
  std::vector<std::string> args = spec.argv;
  if (spec.umask) {
    char mask[8];
    std::snprintf(mask, sizeof mask, "%04o", *spec.umask & 0777);
    args.insert(args.begin(),
                {"/bin/sh", "-c", absl::StrCat("umask ", mask, " && exec \"$0\" \"$@\"")});
    args[3] = program;
    program = "/bin/sh";
  }
  std::vector<std::string> env_strings = spec.env.value_or(std::vector<std::string>());
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env_strings);

  Subprocess child;
  int child_ends[3] = {-1, -1, -1};
  auto close_child_ends = [&] {
    for (int& fd : child_ends) CloseFd(fd);
  };
  SpawnSetup setup;
  int rc = AddStdio(setup, spec.in, 0, &child.in_, &child_ends[0]);
  if (rc == 0) rc = AddStdio(setup, spec.out, 1, &child.out_, &child_ends[1]);
  if (rc == 0) rc = AddStdio(setup, spec.err, 2, &child.err_, &child_ends[2]);
  if (rc == 0 && !spec.cwd.empty()) {
    rc = posix_spawn_file_actions_addchdir_np(&setup.actions, spec.cwd.c_str());
  }
  if (rc == 0 && spec.close_other_fds) {
    rc = posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);
  }
  short flags = 0;
  if (spec.group == ProcessGroup::kNewGroup) {
    posix_spawnattr_setpgroup(&setup.attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  } else if (spec.group == ProcessGroup::kNewSession) {
    flags |= POSIX_SPAWN_SETSID;
  }
  if (spec.reset_signals) {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&setup.attr, &none);
    posix_spawnattr_setsigdefault(&setup.attr, &all);
    flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(&setup.attr, flags);
  if (rc == 0) {
    rc = posix_spawn(&child.pid_, program.c_str(), &setup.actions, &setup.attr, argv.data(),
                     spec.env ? envp.data() : environ);
  }
  close_child_ends();  // the child has its copies: EOF comes when it and its children close
  if (rc != 0) {
    child.pid_ = -1;
    const std::string where = spec.cwd.empty() ? "" : absl::StrCat(" in ", spec.cwd);
    return SpawnError(absl::InternalError(absl::StrCat("cannot start ", name, where, ": ",
                                                       std::strerror(rc))),
                      rc);
  }
  child.leads_group_ = spec.group != ProcessGroup::kInherit;
  // Without a pidfd (kernel < 5.3) RunProcess polls waitpid instead.
  child.pidfd_ = PidfdOpen(child.pid_);
  return child;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, -1);
    leads_group_ = std::exchange(other.leads_group_, false);
    in_ = std::exchange(other.in_, -1);
    out_ = std::exchange(other.out_, -1);
    err_ = std::exchange(other.err_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
    exit_ = std::exchange(other.exit_, std::nullopt);
  }
  return *this;
}

Subprocess::~Subprocess() { Reset(); }

void Subprocess::Reset() {
  if (pid_ > 0 && !exit_) {
    Kill(SIGKILL);
    Wait();
  }
  CloseFd(in_);
  CloseFd(out_);
  CloseFd(err_);
  CloseFd(pidfd_);
  pid_ = -1;
  exit_.reset();
}

void Subprocess::CloseStdin() { CloseFd(in_); }

pid_t Subprocess::Release() {
  const pid_t pid = exit_ ? -1 : pid_;
  pid_ = -1;  // so Reset() neither kills nor waits
  Reset();
  return pid;
}

void Subprocess::Kill(int sig) {
  if (pid_ <= 0) return;
  if (leads_group_) {
    ::kill(-pid_, sig);
  } else if (!exit_) {
    ::kill(pid_, sig);
  }
}

std::optional<ProcessExit> Subprocess::TryWait() {
  if (exit_ || pid_ <= 0) return exit_;
  int status = 0;
  pid_t w;
  while ((w = ::waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (w == pid_) exit_ = ProcessExit::FromWaitStatus(status);
  return exit_;
}

ProcessExit Subprocess::Wait() {
  if (exit_ || pid_ <= 0) return exit_.value_or(ProcessExit{});
  int status = 0;
  pid_t w;
  while ((w = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  exit_ = w == pid_ ? ProcessExit::FromWaitStatus(status) : ProcessExit{-1, 0};
  return *exit_;
}

WaitStep PlanWait(const RunOptions& options, const WaitState& state, SteadyTime now) {
  WaitStep step;
  if (!state.exited_at && !state.terminating) {
    if (state.stop_requested) {
      step.terminate = RunEnding::kStopped;
    } else if (options.timeout.count() > 0 && now >= state.started + options.timeout) {
      step.terminate = RunEnding::kTimedOut;
    }
  }
  const bool terminating = state.terminating || step.terminate;
  const SteadyTime term_at = state.term_sent_at.value_or(now);
  if (terminating && !state.kill_sent &&
      (state.exited_at || now >= term_at + options.kill_grace)) {
    step.kill = true;
  }
  if (state.exited_at && now >= *state.exited_at + options.drain_after_exit) {
    step.stop_reading = true;
  }
  // Sleep until the next deadline (+1 ms, so that it has passed on waking), 250 ms at most.
  milliseconds sleep{250};
  auto until = [&](SteadyTime t) {
    sleep = std::min(sleep, std::chrono::duration_cast<milliseconds>(t - now) + milliseconds(1));
  };
  if (!terminating && !state.exited_at && options.timeout.count() > 0) {
    until(state.started + options.timeout);
  }
  if (terminating && !state.kill_sent && !step.kill && !state.exited_at) {
    until(term_at + options.kill_grace);
  }
  if (state.exited_at) until(*state.exited_at + options.drain_after_exit);
  step.sleep = std::max(sleep, milliseconds(0));
  return step;
}

namespace {

// One pipe the wait loop reads: the child's stdout or stderr.
struct OutputPipe {
  int fd = -1;
  const std::function<void(std::string_view)>* sink = nullptr;  // null: collect
  std::string* collected = nullptr;
};

// Reads what is there; returns false at EOF or on an error (the pipe is then done).
bool ReadSome(OutputPipe& p, size_t max_bytes, bool* truncated) {
  char buffer[64 * 1024];
  const ssize_t got = ::read(p.fd, buffer, sizeof buffer);
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  if (got == 0) return false;
  const std::string_view bytes(buffer, static_cast<size_t>(got));
  if (p.sink != nullptr && *p.sink) {
    (*p.sink)(bytes);
  } else if (p.collected->size() < max_bytes) {
    const size_t room = max_bytes - p.collected->size();
    p.collected->append(bytes.substr(0, room));
    if (bytes.size() > room) *truncated = true;
  } else {
    *truncated = true;
  }
  return true;
}

}  // namespace

StatusOr<RunResult> RunProcess(const ProcessSpec& spec, const RunOptions& options) {
  if (spec.in.kind == Stdio::Kind::kPipe) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot run ", spec.argv.empty() ? "" : spec.argv[0],
                     ": RunProcess gives no input (stdin as a pipe)"));
  }
  HF_ASSIGN_OR_RETURN(Subprocess child, Subprocess::Spawn(spec));
  RunResult result;
  std::vector<OutputPipe> pipes;
  if (child.stdout_fd() >= 0) pipes.push_back({child.stdout_fd(), &options.on_stdout, &result.out});
  if (child.stderr_fd() >= 0) pipes.push_back({child.stderr_fd(), &options.on_stderr, &result.err});

  static const SystemClock kSystemClock;
  const Clock& clock = options.clock != nullptr ? *options.clock : kSystemClock;
  WaitState state;
  state.started = clock.monotonic();
  while (!pipes.empty() || !state.exited_at) {
    const SteadyTime now = clock.monotonic();
    state.stop_requested = options.stop != nullptr && options.stop->load();
    const WaitStep step = PlanWait(options, state, now);
    if (step.terminate) {
      child.Kill(SIGTERM);
      state.terminating = step.terminate;
      state.term_sent_at = now;
    }
    if (step.kill) {
      child.Kill(SIGKILL);
      state.kill_sent = true;
    }
    if (step.stop_reading) break;
    if (step.terminate || step.kill) continue;  // decide again with the new state

    std::vector<pollfd> pfds;
    for (const OutputPipe& p : pipes) pfds.push_back({p.fd, POLLIN, 0});
    const bool poll_exit = !state.exited_at && child.pidfd() >= 0;
    if (poll_exit) pfds.push_back({child.pidfd(), POLLIN, 0});
    milliseconds sleep = step.sleep;
    if (!state.exited_at && child.pidfd() < 0) sleep = std::min(sleep, milliseconds(50));
    const int ready = ::poll(pfds.data(), pfds.size(), static_cast<int>(sleep.count()));
    if (ready < 0 && errno != EINTR) break;

    for (size_t i = pipes.size(); i-- > 0;) {
      if (ready > 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
          !ReadSome(pipes[i], options.max_output_bytes, &result.truncated)) {
        pipes.erase(pipes.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (!state.exited_at && (!poll_exit || (ready > 0 && pfds.back().revents)) &&
        child.TryWait()) {
      state.exited_at = clock.monotonic();
    }
  }
  if (!state.exited_at) child.Kill(SIGKILL);  // poll failed: the child must not outlive us
  result.exit = child.Wait();
  result.ending = state.terminating.value_or(RunEnding::kExited);
  return result;
}

StatusOr<RunResult> RunCapture(const std::vector<std::string>& argv) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  return RunProcess(spec);
}

}  // namespace hf
