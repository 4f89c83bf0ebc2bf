// The process launcher against real processes: exit codes, streams, cwd, environment, groups
// and sessions, signal state, inherited descriptors, umask, timeouts (a child that ignores
// SIGTERM, a grandchild in the group), stop; and the wait loop's decisions as a table.
#include "hyperfleet/common/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fakes/fake_clock.h"

namespace hf {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

ProcessSpec Shell(const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  return spec;
}

RunResult MustRun(const ProcessSpec& spec, const RunOptions& options = {}) {
  auto r = RunProcess(spec, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : RunResult{};
}

std::string Trimmed(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Fields after "(comm)" in /proc/<pid>/stat as the child printed them: state ppid pgrp session.
std::vector<std::string> StatFields(const std::string& stat) {
  return absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
}

// Waits (on a pidfd, no polling) until process `pid` has ended; true when it has.
bool EndsWithin(pid_t pid, milliseconds limit) {
  const int fd = PidfdOpen(pid);
  if (fd < 0) return errno == ESRCH;  // already gone and reaped
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
  ::close(fd);
  return ready == 1;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hf-subprocess-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RunCapture, ExitCodesAndMergedOutput) {
  EXPECT_TRUE(RunCapture({"true"})->ok());
  const auto f = RunCapture({"false"});
  EXPECT_EQ(f->exit, (ProcessExit{1, 0}));
  EXPECT_FALSE(f->ok());
  const auto sh = RunCapture({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(sh->out, "out\nerr\n");
  EXPECT_EQ(sh->exit.exit_code, 3);
  EXPECT_EQ(sh->ending, RunEnding::kExited);
}

TEST(RunProcess, SeparatePipesAndSignals) {
  ProcessSpec spec = Shell("echo o; echo e >&2; kill -USR1 $$");
  spec.err = Stdio::Pipe();
  const RunResult r = MustRun(spec);
  EXPECT_EQ(r.out, "o\n");
  EXPECT_EQ(r.err, "e\n");
  EXPECT_EQ(r.exit, (ProcessExit{128 + SIGUSR1, SIGUSR1}));
  EXPECT_EQ(r.ending, RunEnding::kExited);
}

TEST(RunProcess, OutputToCallbacksAndLimits) {
  std::string streamed;
  RunOptions options;
  options.on_stdout = [&](std::string_view bytes) { streamed.append(bytes); };
  EXPECT_EQ(MustRun(Shell("printf abc"), options).out, "");
  EXPECT_EQ(streamed, "abc");
  RunOptions small;
  small.max_output_bytes = 3;
  const RunResult cut = MustRun(Shell("printf abcdef"), small);
  EXPECT_EQ(cut.out, "abc");
  EXPECT_TRUE(cut.truncated);
}

TEST(Spawn, FailuresCarryTheirErrno) {
  const auto missing = RunCapture({"hf-no-such-program"});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_EQ(SpawnErrno(missing.status()), ENOENT);
  EXPECT_EQ(SpawnErrno(absl::InternalError("other")), 0);

  TempDir dir;
  const std::string plain = dir.path() + "/plain";
  std::ofstream(plain) << "#!/bin/sh\ntrue\n";
  const auto not_executable = RunCapture({plain});
  EXPECT_TRUE(absl::IsInternal(not_executable.status())) << not_executable.status();
  EXPECT_EQ(SpawnErrno(not_executable.status()), EACCES);

  const std::string garbage = dir.path() + "/garbage";
  std::ofstream(garbage) << "not a program\n";
  ::chmod(garbage.c_str(), 0755);
  EXPECT_EQ(SpawnErrno(RunCapture({garbage}).status()), ENOEXEC);  // no #! line

  ProcessSpec in_missing_dir = Shell("true");
  in_missing_dir.cwd = dir.path() + "/nowhere";
  const auto no_cwd = RunProcess(in_missing_dir);
  EXPECT_EQ(SpawnErrno(no_cwd.status()), ENOENT);
  EXPECT_NE(no_cwd.status().message().find("/nowhere"), std::string::npos);

  EXPECT_TRUE(absl::IsInvalidArgument(RunCapture({}).status()));
  ProcessSpec input = Shell("cat");
  input.in = Stdio::Pipe();
  EXPECT_TRUE(absl::IsInvalidArgument(RunProcess(input).status()));
}

TEST(RunProcess, WorkingDirectoryAndEnvironment) {
  TempDir dir;
  ProcessSpec pwd = Shell("pwd");
  pwd.cwd = dir.path();
  EXPECT_EQ(MustRun(pwd).out, dir.path() + "\n");

  ProcessSpec explicit_env = Shell("echo \"[$A][$HOME][$HF_SUBPROCESS_TEST]\"");
  explicit_env.env = std::vector<std::string>{"A=1 2"};
  ::setenv("HF_SUBPROCESS_TEST", "inherited", 1);
  EXPECT_EQ(MustRun(explicit_env).out, "[1 2][][]\n");
  ProcessSpec inherited = Shell("echo \"[$HF_SUBPROCESS_TEST]\"");
  EXPECT_EQ(MustRun(inherited).out, "[inherited]\n");
  ::unsetenv("HF_SUBPROCESS_TEST");
}

TEST(RunProcess, ArgumentsArePassedVerbatim) {
  ProcessSpec spec;
  spec.argv = {"printf", "%s|", "a b", "'q'", "$HOME", "*", ""};
  spec.out = Stdio::Pipe();
  EXPECT_EQ(MustRun(spec).out, "a b|'q'|$HOME|*||");
  ProcessSpec named;  // the program apart from argv[0]
  named.program = "sh";
  named.argv = {"custom zero", "-c", "echo \"$0\""};
  named.out = Stdio::Pipe();
  EXPECT_EQ(MustRun(named).out, "custom zero\n");
}

TEST(RunProcess, GroupsAndSessions) {
  const std::string script = "cat /proc/$$/stat";
  const std::string self_pgrp = std::to_string(::getpgrp());
  const std::string self_sid = std::to_string(::getsid(0));

  const auto inherit = StatFields(MustRun(Shell(script)).out);
  EXPECT_EQ(inherit[2], self_pgrp);
  EXPECT_EQ(inherit[3], self_sid);

  ProcessSpec group = Shell("echo $$; " + script);
  group.group = ProcessGroup::kNewGroup;
  const std::vector<std::string> lines = absl::StrSplit(MustRun(group).out, '\n');
  const auto g = StatFields(lines[1]);
  EXPECT_EQ(g[2], lines[0]);  // leads its group
  EXPECT_EQ(g[3], self_sid);  // in our session

  ProcessSpec session = Shell("echo $$; " + script);
  session.group = ProcessGroup::kNewSession;
  const std::vector<std::string> s_lines = absl::StrSplit(MustRun(session).out, '\n');
  const auto s = StatFields(s_lines[1]);
  EXPECT_EQ(s[2], s_lines[0]);
  EXPECT_EQ(s[3], s_lines[0]);  // leads its session
}

TEST(RunProcess, SignalMaskIsResetUnlessAskedNotTo) {
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  ProcessSpec spec;  // not through sh: dash clears its mask at start
  spec.argv = {"grep", "SigBlk", "/proc/self/status"};
  spec.out = Stdio::Pipe();
  const std::string reset = MustRun(spec).out;
  spec.reset_signals = false;
  const std::string kept = MustRun(spec).out;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(reset, "SigBlk:\t0000000000000000\n");
  EXPECT_EQ(kept, "SigBlk:\t0000000000000200\n");  // bit 9: SIGUSR1 (10)
}

TEST(RunProcess, OtherDescriptorsAreClosedUnlessAskedNotTo) {
  const int fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: it would leak
  ASSERT_GE(fd, 3);
  ProcessSpec spec =
      Shell("test -e /proc/$$/fd/" + std::to_string(fd) + " && echo open || echo closed");
  EXPECT_EQ(MustRun(spec).out, "closed\n");
  spec.close_other_fds = false;
  EXPECT_EQ(MustRun(spec).out, "open\n");
  ::close(fd);
}

TEST(RunProcess, StdioToFilesAndNull) {
  TempDir dir;
  const std::string path = dir.path() + "/out";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ProcessSpec spec = Shell("echo to-file; echo to-null >&2; if read x; then echo got-input; fi");
  spec.out = Stdio::Fd(fd);
  spec.err = Stdio::Null();
  spec.in = Stdio::Null();
  const RunResult r = MustRun(spec);
  ::close(fd);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.exit.exit_code, 0);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(text.str(), "to-file\n");  // `read` saw EOF at once
}

TEST(RunProcess, UmaskIsTheSpecsNotTheCallers) {
  TempDir dir;
  const mode_t old = ::umask(077);
  ProcessSpec spec = Shell("umask; touch f; echo \"$0|$1\"");
  spec.argv.push_back("zero arg");
  spec.argv.push_back("one 'arg'");
  spec.cwd = dir.path();
  spec.umask = 022;
  const RunResult set = MustRun(spec);
  spec.umask.reset();
  spec.argv[2] = "umask";
  const RunResult inherited = MustRun(spec);
  ::umask(old);
  EXPECT_EQ(set.out, "0022\nzero arg|one 'arg'\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(inherited.out, "0077\n");
}

TEST(RunProcess, TimeoutTerminatesTheGroup) {
  // The shell starts a grandchild and waits: SIGTERM to the group ends both.
  ProcessSpec spec = Shell("sleep 30 & echo $!; wait");
  spec.group = ProcessGroup::kNewGroup;
  RunOptions options;
  options.timeout = milliseconds(300);
  const auto start = Steady::now();
  const RunResult r = MustRun(spec, options);
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.ending, RunEnding::kTimedOut);
  EXPECT_EQ(r.exit.signal, SIGTERM);
  int grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Trimmed(r.out), &grandchild)) << r.out;
  EXPECT_TRUE(EndsWithin(grandchild, milliseconds(5000)));
}

TEST(RunProcess, ChildIgnoringSigtermGetsSigkillAfterTheGrace) {
  ProcessSpec spec = Shell("trap '' TERM; echo ready; exec sleep 30");
  spec.group = ProcessGroup::kNewGroup;
  RunOptions options;
  options.timeout = milliseconds(200);
  options.kill_grace = milliseconds(400);
  const auto start = Steady::now();
  const RunResult r = MustRun(spec, options);
  const auto took = Steady::now() - start;
  EXPECT_EQ(r.ending, RunEnding::kTimedOut);
  EXPECT_EQ(r.exit, (ProcessExit{128 + SIGKILL, SIGKILL}));
  EXPECT_EQ(r.out, "ready\n");
  EXPECT_GE(took, milliseconds(600));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(RunProcess, BackgroundChildHoldingThePipeDoesNotHoldTheResult) {
  ProcessSpec spec = Shell("sleep 30 & echo $!");
  spec.group = ProcessGroup::kNewGroup;
  RunOptions options;
  options.drain_after_exit = milliseconds(200);
  const auto start = Steady::now();
  const RunResult r = MustRun(spec, options);
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.ending, RunEnding::kExited);
  EXPECT_EQ(r.exit.exit_code, 0);
  int background = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Trimmed(r.out), &background)) << r.out;
  EXPECT_EQ(::kill(background, 0), 0);  // a normal exit leaves the group alone
  ::kill(background, SIGKILL);
}

TEST(RunProcess, DeadlinesRunOnTheInjectedClock) {
  // An hour's timeout passes as soon as the fake clock says so, not in an hour.
  testing::FakeClock clock;
  RunOptions options;
  options.clock = &clock;
  options.timeout = std::chrono::hours(1);
  options.on_stdout = [&](std::string_view) { clock.advance(std::chrono::hours(2)); };
  ProcessSpec spec = Shell("echo started; exec sleep 30");
  const auto start = Steady::now();
  const RunResult r = MustRun(spec, options);
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.ending, RunEnding::kTimedOut);
  EXPECT_EQ(r.exit.signal, SIGTERM);
}

TEST(RunProcess, StopKillsLikeATimeout) {
  std::atomic<bool> stop{true};
  RunOptions options;
  options.stop = &stop;
  ProcessSpec spec = Shell("exec sleep 30");
  const auto start = Steady::now();
  const RunResult r = MustRun(spec, options);
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.ending, RunEnding::kStopped);
  EXPECT_EQ(r.exit.signal, SIGTERM);
}

TEST(Subprocess, PipesBothWaysAndKillOnDestruction) {
  ProcessSpec spec;
  spec.argv = {"cat"};
  spec.in = Stdio::Pipe();
  spec.out = Stdio::Pipe();
  auto cat = Subprocess::Spawn(spec);
  ASSERT_TRUE(cat.ok()) << cat.status();
  ASSERT_EQ(::write(cat->stdin_fd(), "hello", 5), 5);
  cat->CloseStdin();
  std::string got;
  char buf[64];
  for (ssize_t n; (n = ::read(cat->stdout_fd(), buf, sizeof buf)) > 0;) got.append(buf, n);
  EXPECT_EQ(got, "hello");
  EXPECT_EQ(cat->Wait(), (ProcessExit{0, 0}));
  EXPECT_EQ(cat->Wait(), (ProcessExit{0, 0}));  // reaped once, the same answer after

  pid_t pid = -1;
  {
    ProcessSpec sleeper;
    sleeper.argv = {"sleep", "30"};
    auto s = Subprocess::Spawn(sleeper);
    ASSERT_TRUE(s.ok()) << s.status();
    pid = s->pid();
    EXPECT_FALSE(s->TryWait().has_value());
    Subprocess moved = *std::move(s);
    EXPECT_EQ(moved.pid(), pid);
  }
  EXPECT_EQ(::kill(pid, 0), -1);  // killed and reaped: no zombie left
  EXPECT_EQ(errno, ESRCH);
}

// A released child outlives its Subprocess (a node supervisor outlives the server's record of
// it) and is reaped by whoever waits for its pid.
TEST(Subprocess, ReleasedChildOutlivesTheObject) {
  ProcessSpec spec;
  spec.argv = {"sleep", "30"};
  spec.out = Stdio::Pipe();
  spec.group = ProcessGroup::kNewSession;
  pid_t pid = -1;
  {
    auto s = Subprocess::Spawn(spec);
    ASSERT_TRUE(s.ok()) << s.status();
    const pid_t spawned = s->pid();
    pid = s->Release();
    EXPECT_EQ(pid, spawned);
    EXPECT_EQ(s->pid(), -1);
    EXPECT_EQ(s->stdout_fd(), -1);
    EXPECT_EQ(s->Release(), -1);  // nothing left to give up
  }
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), 0);  // still running: the destructor left it alone
  int status = 0;
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(ProcessExit::FromWaitStatus(status), (ProcessExit{128 + SIGKILL, SIGKILL}));
}

TEST(FindProgram, PathThenTheSbinDirectories) {
  const auto sh = FindProgram("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(sh->front(), '/');
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", "/nonexistent", 1);
  const auto ldconfig = FindProgram("ldconfig");  // libc-bin, in sbin only
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(ldconfig.has_value());
  EXPECT_TRUE(ldconfig->ends_with("sbin/ldconfig")) << *ldconfig;
  EXPECT_FALSE(FindProgram("hf-no-such-program").has_value());
  EXPECT_FALSE(FindProgram("/tmp").has_value());  // a directory is no program
  EXPECT_FALSE(FindProgram("").has_value());
  EXPECT_EQ(FindProgram(*sh), sh);
}

TEST(SignalName, KnownAndUnknown) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(999), "signal 999");
}

// What it blocks is what a supervisor's sigtimedwait then takes (thread-directed here: other
// threads of this test binary do not block them).
TEST(BlockSupervisorSignals, BlocksStopAndChildSignalsForSigtimedwait) {
  sigset_t saved;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &saved), 0);
  ASSERT_EQ(sigismember(&saved, SIGTERM), 0);
  const sigset_t mask = BlockSupervisorSignals();
  sigset_t now;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) {
    EXPECT_EQ(sigismember(&mask, sig), 1) << sig;
    EXPECT_EQ(sigismember(&now, sig), 1) << sig;
  }
  EXPECT_EQ(sigismember(&mask, SIGHUP), 0);
  for (int sig : {SIGCHLD, SIGTERM}) {
    ASSERT_EQ(pthread_kill(pthread_self(), sig), 0);
    siginfo_t info{};
    timespec ts{5, 0};
    EXPECT_EQ(sigtimedwait(&mask, &info, &ts), sig);
  }
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &saved, nullptr), 0);
}

TEST(ProcessExit, FromWaitStatus) {
  EXPECT_EQ(ProcessExit::FromWaitStatus(3 << 8), (ProcessExit{3, 0}));
  EXPECT_EQ(ProcessExit::FromWaitStatus(SIGKILL), (ProcessExit{137, SIGKILL}));
}

// ---- PlanWait ------------------------------------------------------------------------------

struct PlanCase {
  std::string name;
  WaitState state;
  int at_ms;
  WaitStep want;
};

TEST(PlanWait, Table) {
  const SteadyTime t0{};
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  RunOptions o;
  o.timeout = milliseconds(1000);
  o.kill_grace = milliseconds(500);
  o.drain_after_exit = milliseconds(200);
  auto state = [&](bool stop, std::optional<RunEnding> term, std::optional<int> term_at,
                   bool killed, std::optional<int> exited) {
    WaitState s;
    s.started = t0;
    s.stop_requested = stop;
    s.terminating = term;
    if (term_at) s.term_sent_at = at(*term_at);
    s.kill_sent = killed;
    if (exited) s.exited_at = at(*exited);
    return s;
  };
  auto step = [](std::optional<RunEnding> term, bool kill, bool stop_reading, int sleep) {
    WaitStep w;
    w.terminate = term;
    w.kill = kill;
    w.stop_reading = stop_reading;
    w.sleep = milliseconds(sleep);
    return w;
  };
  const auto kT = RunEnding::kTimedOut;
  const auto kS = RunEnding::kStopped;
  const std::vector<PlanCase> cases = {
      {"running, far from the timeout", state(false, {}, {}, false, {}), 0,
       step({}, false, false, 250)},
      {"running, timeout in 100 ms", state(false, {}, {}, false, {}), 900,
       step({}, false, false, 101)},
      {"timeout reached", state(false, {}, {}, false, {}), 1000, step(kT, false, false, 250)},
      {"stop requested", state(true, {}, {}, false, {}), 10, step(kS, false, false, 250)},
      {"terminated, grace running", state(false, kT, 1000, false, {}), 1400,
       step({}, false, false, 101)},
      {"grace over", state(false, kT, 1000, false, {}), 1500, step({}, true, false, 250)},
      {"killed, waiting for the exit", state(false, kT, 1000, true, {}), 1600,
       step({}, false, false, 250)},
      {"terminated child exited: kill its group", state(false, kS, 10, false, 20), 20,
       step({}, true, false, 201)},
      {"exited, draining", state(false, {}, {}, false, 500), 600, step({}, false, false, 101)},
      {"drain over", state(false, {}, {}, false, 500), 700, step({}, false, true, 1)},
      {"exit wins over a late timeout", state(false, {}, {}, false, 900), 1000,
       step({}, false, false, 101)},
      {"stop after exit changes nothing", state(true, {}, {}, false, 900), 950,
       step({}, false, false, 151)},
  };
  for (const auto& c : cases) {
    const WaitStep got = PlanWait(o, c.state, at(c.at_ms));
    EXPECT_EQ(got.terminate, c.want.terminate) << c.name;
    EXPECT_EQ(got.kill, c.want.kill) << c.name;
    EXPECT_EQ(got.stop_reading, c.want.stop_reading) << c.name;
    EXPECT_EQ(got.sleep, c.want.sleep) << c.name;
  }
  RunOptions no_limit;
  EXPECT_FALSE(PlanWait(no_limit, state(false, {}, {}, false, {}), at(1 << 30)).terminate);
}

}  // namespace
}  // namespace hf
