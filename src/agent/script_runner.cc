#include "hyperfleet/agent/script_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hf::agent {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Splits the pipe's byte stream into lines, cutting over-long ones at a UTF-8 boundary.
class LineSplitter {
 public:
  LineSplitter(std::size_t max_line_bytes, const Clock& clock,
               const std::function<void(OutputLine)>& on_line)
      : max_(std::max<std::size_t>(max_line_bytes, 4)), clock_(clock), on_line_(on_line) {}

  void Feed(const char* data, std::size_t n) {
    buffer_.append(data, n);
    std::size_t start = 0;
    for (;;) {
      const std::size_t nl = buffer_.find('\n', start);
      if (nl == std::string::npos) break;
      EmitPieces(std::string_view(buffer_).substr(start, nl - start), true);
      start = nl + 1;
    }
    buffer_.erase(0, start);
    // An unterminated line longer than the limit goes out in pieces now.
    while (buffer_.size() > max_) {
      const std::size_t cut = Cut(buffer_);
      Emit(buffer_.substr(0, cut));
      buffer_.erase(0, cut);
    }
  }

  void Finish() {
    if (!buffer_.empty()) EmitPieces(buffer_, true);
    buffer_.clear();
  }

 private:
  // Longest prefix of at most max_ bytes that does not end inside a UTF-8 sequence.
  std::size_t Cut(std::string_view s) const {
    std::size_t cut = std::min(max_, s.size());
    if (cut == s.size()) return cut;
    std::size_t back = cut;
    // Step back over continuation bytes (10xxxxxx) to the lead byte, at most 3.
    while (back > 0 && cut - back < 3 &&
           (static_cast<unsigned char>(s[back]) & 0xC0) == 0x80) {
      --back;
    }
    return back > 0 ? back : cut;
  }

  void EmitPieces(std::string_view line, bool terminated) {
    if (terminated && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      Emit(std::string());
      return;
    }
    while (!line.empty()) {
      const std::size_t cut = Cut(line);
      Emit(std::string(line.substr(0, cut)));
      line.remove_prefix(cut);
    }
  }

  void Emit(std::string text) { on_line_(OutputLine{clock_.now(), std::move(text)}); }

  const std::size_t max_;
  const Clock& clock_;
  const std::function<void(OutputLine)>& on_line_;
  std::string buffer_;
};

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbrev;
}

ScriptOutcome RunScript(const ScriptSpec& spec, const Clock& clock,
                        const std::function<void(OutputLine)>& on_line,
                        const std::atomic<bool>* stop) {
  ScriptOutcome outcome;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    outcome.kind = ScriptOutcome::Kind::kSpawnFailed;
    outcome.spawn_errno = errno;
    return outcome;
  }
  const int read_fd = fds[0];
  const int write_fd = fds[1];

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, write_fd, STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, spec.working_directory.c_str());
  // Nothing else of the agent's (sockets to the control plane, files) reaches the script:
  // libraries do not all open with O_CLOEXEC, and a daemon the script starts would keep
  // them open.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (so a timeout kills everything it started), default signal
  // dispositions and an empty mask: the agent blocks SIGTERM/SIGINT for its signal thread.
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_strings = spec.argv.empty()
                                              ? std::vector<std::string>{spec.path}
                                              : spec.argv;
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = spec.environment;
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  int rc = 0;
  // ETXTBSY: a child another thread spawns while the agent writes the bundle holds a copy of
  // the write descriptor until its own exec (O_CLOEXEC closes it only then), so a script
  // written a moment ago can be "busy" for a few milliseconds. Try again briefly.
  for (int attempt = 1;; ++attempt) {
    rc = posix_spawn(&pid, spec.path.c_str(), &actions, &attr, argv.data(), envp.data());
    if (rc != ETXTBSY || attempt == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(write_fd);  // our copy: EOF comes when every writer in the script is gone
  if (rc != 0) {
    close(read_fd);
    outcome.kind = ScriptOutcome::Kind::kSpawnFailed;
    outcome.spawn_errno = rc;
    return outcome;
  }

  // Without pidfd (kernel < 5.3) the exit is noticed by polling waitpid every 50 ms.
  const int pid_fd = PidfdOpen(pid);
  LineSplitter splitter(spec.max_line_bytes, clock, on_line);
  const auto started = SteadyClock::now();
  std::optional<SteadyClock::time_point> deadline;
  if (spec.timeout.count() > 0) deadline = started + spec.timeout;
  std::optional<SteadyClock::time_point> kill_at;  // SIGKILL due (after SIGTERM)
  std::optional<ScriptOutcome::Kind> killed_for;
  bool pipe_open = true;
  bool exited = false;
  int wait_status = 0;
  std::optional<SteadyClock::time_point> drain_until;
  char buffer[64 * 1024];

  auto kill_group = [&](int sig) { kill(-pid, sig); };

  while (pipe_open || !exited) {
    const auto now = SteadyClock::now();
    if (!exited && !killed_for) {
      if (stop != nullptr && stop->load()) {
        killed_for = ScriptOutcome::Kind::kStopped;
      } else if (deadline && now >= *deadline) {
        killed_for = ScriptOutcome::Kind::kTimedOut;
      }
      if (killed_for) {
        kill_group(SIGTERM);
        kill_at = now + spec.kill_grace;
      }
    }
    if (kill_at && now >= *kill_at) {
      kill_group(SIGKILL);
      kill_at.reset();
    }
    if (exited && pipe_open && drain_until && now >= *drain_until) break;

    // Sleep until output, exit, or the next deadline; wake at least every 250 ms to
    // check `stop`.
    milliseconds wait{250};
    auto bound = [&](SteadyClock::time_point t) {
      wait = std::min(wait, std::chrono::duration_cast<milliseconds>(t - now) + milliseconds(1));
    };
    if (deadline && !killed_for) bound(*deadline);
    if (kill_at) bound(*kill_at);
    if (drain_until) bound(*drain_until);
    if (pid_fd < 0 && !exited) wait = std::min(wait, milliseconds(50));
    wait = std::max(wait, milliseconds(0));

    pollfd pfds[2];
    int n = 0;
    int pipe_index = -1, pid_index = -1;
    if (pipe_open) {
      pfds[n] = {read_fd, POLLIN, 0};
      pipe_index = n++;
    }
    if (!exited && pid_fd >= 0) {
      pfds[n] = {pid_fd, POLLIN, 0};
      pid_index = n++;
    }
    const int ready = poll(pfds, n, static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) break;

    if (pipe_index >= 0 && ready > 0 && (pfds[pipe_index].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t got = read(read_fd, buffer, sizeof buffer);
      if (got > 0) {
        splitter.Feed(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        pipe_open = false;
      }
    }
    if (!exited && (pid_fd < 0 || (pid_index >= 0 && ready > 0 && pfds[pid_index].revents))) {
      const pid_t w = waitpid(pid, &wait_status, WNOHANG);
      if (w == pid) {
        exited = true;
        kill_at.reset();
        if (killed_for) {
          // Whatever is left of the group goes too; it was asked to end.
          kill_group(SIGKILL);
        }
        drain_until = SteadyClock::now() + spec.drain_after_exit;
      }
    }
  }
  splitter.Finish();
  close(read_fd);
  if (pid_fd >= 0) close(pid_fd);
  if (!exited) {  // poll failed: make sure the child is gone and reaped
    kill_group(SIGKILL);
    waitpid(pid, &wait_status, 0);
  }

  if (killed_for) {
    outcome.kind = *killed_for;
    outcome.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
    outcome.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + outcome.signal;
  } else if (WIFSIGNALED(wait_status)) {
    outcome.kind = ScriptOutcome::Kind::kSignaled;
    outcome.signal = WTERMSIG(wait_status);
    outcome.exit_code = 128 + outcome.signal;
  } else {
    outcome.kind = ScriptOutcome::Kind::kExited;
    outcome.exit_code = WEXITSTATUS(wait_status);
  }
  return outcome;
}

}  // namespace hf::agent
