#include "hyperfleet/cli/auto_resume_command.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/slurm/auto_resume.h"

namespace hf::cli {
namespace {

struct Options {
  int window_seconds = slurm::kDefaultAutoResumeWindowSeconds;
  std::string srun;
  std::vector<std::string> argv;
};

void Say(const std::string& level, const std::string& text) {
  std::fprintf(stderr, "[Auto Resume] %s: %s\n", level.c_str(), text.c_str());
  std::fflush(stderr);
}

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr together
};

// Runs argv to completion and collects its output; exit_code -1 if it cannot start.
Output Capture(const std::vector<std::string>& argv) {
  StatusOr<RunResult> r = RunCapture(argv);
  if (!r.ok()) return Output{-1, std::string(r.status().message())};
  return Output{r->exit.exit_code, std::move(r->out)};
}

volatile sig_atomic_t g_child = 0;

// Signals meant for srun (scancel, Ctrl-C, a job's time limit) reach it through us.
void Forward(int sig) {
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};

// Runs the step as srun's own stand-in: same streams, descriptors, signal state and process
// group. Returns its exit code; errors when it cannot start.
StatusOr<int> RunStep(const Options& o) {
  setenv(std::string(slurm::kAutoResumeActiveEnv).c_str(), "1", 1);
  ProcessSpec spec;
  spec.argv = o.argv;
  spec.program = o.srun;  // "": argv[0]
  spec.in = spec.out = spec.err = Stdio::Inherit();
  spec.reset_signals = false;
  spec.close_other_fds = false;
  HF_ASSIGN_OR_RETURN(Subprocess child, Subprocess::Spawn(spec));
  g_child = child.pid();
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
  const ProcessExit exit = child.Wait();
  g_child = 0;
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  return exit.exit_code;
}

// The job's nodes: those it was allocated (SLURM_JOB_NODELIST) and those it holds now (a
// --no-kill job loses a failed node from its NodeList).
std::string JobNodes(const std::string& job_id) {
  const char* env = std::getenv("SLURM_JOB_NODELIST");
  std::vector<std::string> lists = {env ? env : ""};
  const Output job = Capture({"scontrol", "show", "job", "-o", job_id});
  if (job.exit_code == 0) {
    if (auto nodes = slurm::JobField(job.text, "NodeList")) lists.push_back(*nodes);
  }
  return slurm::JoinHostlists(lists);
}

std::vector<std::string> FindFaults(const std::string& job_id) {
  const std::string nodes = JobNodes(job_id);
  if (nodes.empty()) return {};
  const Output sinfo = Capture({"sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%T|%E"});
  if (sinfo.exit_code != 0) return {};
  return slurm::Faults(slurm::ParseSinfoNodes(sinfo.text));
}

// Requeues the job under its id; a job submitted with --no-requeue is first made requeueable.
bool Requeue(const std::string& job_id, std::string* error) {
  Output r = Capture({"scontrol", "requeue", job_id});
  if (r.exit_code != 0) {
    (void)Capture({"scontrol", "update", "jobid=" + job_id, "requeue=1"});
    r = Capture({"scontrol", "requeue", job_id});
  }
  *error = std::string(absl::StripSuffix(r.text, "\n"));
  return r.exit_code == 0;
}

int Run(const Options& o) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') {
    Say("Error", "srun --auto-resume needs an existing allocation (run it inside sbatch or "
                 "salloc): SLURM_JOB_ID is not set");
    return 1;
  }
  const std::string job_id = job;
  const Output config = Capture({"scontrol", "show", "config"});
  if (config.exit_code == 0) {
    const std::string error =
        slurm::TaskPluginError(slurm::ConfigValue(config.text, "TaskPlugin").value_or(""));
    if (!error.empty()) {
      Say("Error", error);
      return 1;
    }
  } else {
    Say("Warning", "cannot read the Slurm configuration (scontrol show config): " +
                       std::string(absl::StripSuffix(config.text, "\n")));
  }
  const StatusOr<int> step_code = RunStep(o);
  if (!step_code.ok()) {
    Say("Error", std::string(step_code.status().message()));
    return 127;  // as a shell says for a command it cannot run
  }
  const int code = *step_code;
  if (code == 0) return 0;
  const std::string step = absl::StrJoin(o.argv, " ");
  Say("Info", absl::StrCat("JobID ", job_id, ": step `", step, "` failed with exit code ", code,
                           "; looking for a faulty node of the job for up to ",
                           o.window_seconds, " s"));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(o.window_seconds);
  std::vector<std::string> faults;
  for (;;) {
    faults = FindFaults(job_id);
    if (!faults.empty() || std::chrono::steady_clock::now() >= deadline) break;
    // Polling Slurm's view of the nodes: there is no event to wait on from here.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (faults.empty()) {
    Say("Info", absl::StrCat("JobID ", job_id, ": no faulty node found within ",
                             o.window_seconds, " s; the step fails with exit code ", code));
    return code;
  }
  Say("Info", absl::StrCat("JobID ", job_id, ": faulty node(s): ", absl::StrJoin(faults, "; "),
                           ". Requeueing job ", job_id,
                           " (same job id): it restarts from the beginning of its batch "
                           "script once healthy nodes are available"));
  std::string error;
  if (!Requeue(job_id, &error)) {
    // A node set DOWN makes Slurm requeue the job itself (JobRequeue): then this batch
    // script is being stopped already, and that is the outcome we wanted.
    if (absl::StrContains(error, "pending execution") ||
        absl::StrContains(error, "already requeued")) {
      Say("Info", absl::StrCat("JobID ", job_id, " was already requeued by Slurm"));
      return code;
    }
    Say("Error", absl::StrCat("cannot requeue job ", job_id, " (", error,
                              "); the step fails with exit code ", code));
    return code;
  }
  Say("Info", absl::StrCat("JobID ", job_id, " requeued"));
  // Slurm now stops the batch script (and us with it); until then the script must not go
  // on to its next command as if the step had finished.
  const auto stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  std::this_thread::sleep_until(stop_deadline);
  Say("Error", absl::StrCat("JobID ", job_id, " was requeued but this step was not stopped"));
  return code;
}

}  // namespace

void AddAutoResumeCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "auto-resume",
      "Run an srun step and requeue its job when it fails on a faulty node (used by the "
      "srun --auto-resume=1 SPANK plugin)");
  cmd->add_option("--window", o->window_seconds,
                  "Seconds to look for a faulty node after the step failed")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  cmd->add_option("--srun", o->srun, "Program to run (default: the first argument, on PATH)");
  cmd->add_option("argv", o->argv, "srun's command line, argv[0] first (after --)")
      ->required();
  cmd->callback([o] { std::exit(Run(*o)); });
}

}  // namespace hf::cli
