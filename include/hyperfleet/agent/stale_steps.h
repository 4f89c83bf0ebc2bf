#pragma once
// Orphaned Slurm step daemons (docs/resiliency.md, "Jobs that resume").
//
// A multi-node step reports its end up a tree of slurmstepds (Slurm 22.05, width 7): each
// one waits for its children's step-complete messages before it exits, for up to 60 s plus
// 3 s per tree level (REVERSE_TREE_CHILDREN_TIMEOUT, hard-coded). When one of the step's
// nodes dies, its parent waits out that whole timeout; slurmd keeps the job COMPLETING on
// that node meanwhile, and a requeued job cannot start again for over a minute. The agent
// ends such a slurmstepd early: its tasks are gone and slurmctld no longer runs the job, so
// the only thing it still waits for is a message that will never come.
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// A slurmstepd process as seen in /proc.
struct StepDaemon {
  int pid = 0;
  uint32_t job_id = 0;
  std::string step;          ///< "0", "1", "batch", "extern", "interactive", …
  bool has_tasks = false;    ///< it has a live (non-zombie) child process
};

/// Parses slurmstepd's process title, "slurmstepd: [<job>.<step>]" (NUL-separated argv as
/// in /proc/<pid>/cmdline is accepted). nullopt for any other command line.
std::optional<std::pair<uint32_t, std::string>> ParseStepDaemonTitle(std::string_view cmdline);

/// The slurmstepd processes under `proc` (a /proc tree). Unreadable entries (processes that
/// exit during the scan) are skipped.
std::vector<StepDaemon> ScanStepDaemons(const std::filesystem::path& proc);

/// Parses `squeue -h -t all -o '%i|%T'` output: job id → state ("RUNNING", "COMPLETING",
/// "PENDING", …). Array and heterogeneous job ids ("12_3", "7+1") are skipped.
std::map<uint32_t, std::string> ParseJobStates(std::string_view text);

/// True when slurmctld still runs the job on its nodes (a step daemon of it may be busy).
/// States from squeue(1), Slurm 22.05.
bool JobStillRunning(std::string_view state);

/// Decides which step daemons are orphaned. Pure apart from the state it keeps: when each
/// daemon was first seen without tasks.
class StaleStepTracker {
 public:
  /// `grace`: how long a daemon must have been without tasks before it is considered
  /// (seconds; Slurm's tree completes within milliseconds when every node is alive).
  explicit StaleStepTracker(Duration grace) : grace_(grace) {}

  /// Records a scan taken at `now`; returns the jobs whose state decides (the jobs of
  /// daemons without tasks for at least `grace`), sorted, without duplicates.
  std::vector<uint32_t> Observe(const std::vector<StepDaemon>& daemons, SystemTime now);

  /// The daemons of the last scan to end: without tasks for at least `grace`, of a job that
  /// `states` (from slurmctld) shows not running, or does not list at all (purged).
  /// `states` must come from a query that succeeded.
  std::vector<StepDaemon> Orphans(const std::map<uint32_t, std::string>& states,
                                  SystemTime now) const;

 private:
  Duration grace_;
  std::vector<StepDaemon> last_;
  std::map<int, SystemTime> idle_since_;  // pid → first scan that saw it without tasks
};

/// Runs the tracker every `interval` on its own thread: scans `proc`, asks slurmctld for its
/// jobs (through `query_jobs`: squeue's `%i|%T` output for every job, or nullopt when
/// slurmctld cannot be asked) only when some daemon has been without tasks for `grace`, and
/// SIGKILLs the orphans, logging each. An `interval` of zero starts no thread (tests call
/// RunOnce).
class StaleStepReaper {
 public:
  using QueryJobs = std::function<std::optional<std::string>()>;
  StaleStepReaper(std::filesystem::path proc, Duration interval, Duration grace,
                  QueryJobs query_jobs, const Clock& clock);
  ~StaleStepReaper();
  StaleStepReaper(const StaleStepReaper&) = delete;
  StaleStepReaper& operator=(const StaleStepReaper&) = delete;

  /// One round (scan, ask, kill); returns the daemons it ended. Used by the thread and
  /// by tests.
  std::vector<StepDaemon> RunOnce();

 private:
  void Loop();
  std::filesystem::path proc_;
  Duration interval_;
  QueryJobs query_jobs_;
  const Clock& clock_;
  StaleStepTracker tracker_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hf::agent
