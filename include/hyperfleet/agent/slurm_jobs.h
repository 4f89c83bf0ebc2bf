#pragma once
// Task governance on the Slurm controller node (docs/governance.md "On Slurm"): the agent
// reports the jobs of governed accounts (squeue) with each heartbeat ("slurm_jobs"), keeps the
// list of governed accounts that job_submit.lua reads, creates the accounts and QOS in
// slurmdbd when accounting is in use, and carries out the control plane's job actions
// ("slurm_job_actions": release on admission, requeuehold on preemption, hold for a job
// that waits without admission, be it unheld or held by the user, and disown for a marked
// held job whose account left governance). Slurm work runs on a thread of its own, as the
// node marks do: the heartbeat never waits for slurmctld.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// Where job_submit.lua looks for the governed accounts (one per line), on the controller.
inline constexpr std::string_view kGovernedAccountsPath =
    "/opt/slurm/etc/hyperfleet-governed-accounts";

/// The marks Hyperfleet keeps in a governed job's AdminComment (only root and SlurmUser may
/// set it, so users cannot forge one). kMarkGoverned: a job held for the admission engine,
/// whose hold may still be the user's (job_submit's priority 0 and requeuehold give
/// JobHeldUser in Slurm 22.05); kMarkHeld: held by the agent as root, an administrator's
/// hold (JobHeldAdmin) that the user cannot release. A job without either is not ours to
/// release once its account is no longer governed (an operator's own hold stays).
inline constexpr char kMarkGoverned[] = "hyperfleet-governed";
inline constexpr char kMarkHeld[] = "hyperfleet-held";
/// What a job released because its account left governance carries instead (no mark).
inline constexpr char kMarkReleased[] = "hyperfleet-released";

/// The shell command whose output ParseSlurmJobs reads: every active job (`squeue -h -a -O`
/// job id, account, QOS, partition, nodes, max nodes, state, submit time, reason,
/// AdminComment; \037 between fields, \036 and a newline after each job, so that an
/// operator's comment holding '|' or newlines stays in its own job), a "#partitions" line,
/// then each node's partitions (`sinfo -h -N -o '%N|%R'`). The program is
/// data/slurm/query-jobs.sh, embedded at build time.
std::string SlurmJobsQuery();

/// Parses SlurmJobsQuery() output into the heartbeat's "slurm_jobs": each job with its qos
/// ("" for none or "normal"), nodes (the most nodes Slurm may give it: for a pending
/// `-N min-max` job the maximum, bounded by the nodes of its partitions, never below
/// squeue's count), state (squeue's long state, upper case), submit_time (epoch seconds;
/// squeue prints the node's local time) and mark (kMarkGoverned or kMarkHeld; "" when the
/// AdminComment is neither), and each partition's nodes. Kept: the jobs of `accounts`, and
/// the held pending jobs of any account that carry a mark (their account may have left
/// governance: the control plane releases them). Array jobs and records that do not parse
/// are skipped.
agentapi::SlurmJobsReport ParseSlurmJobs(std::string_view text,
                                         const std::set<std::string>& accounts);

/// The root-shell script for the control plane's job actions ("release", "hold",
/// "requeuehold", "disown"; others are skipped): per action,
/// release: `scontrol release`; hold: mark kMarkHeld and priority 0 in one update (an
/// administrator's hold, also for a job held by the user); requeuehold: mark kMarkGoverned,
/// then `scontrol requeuehold` (Slurm makes it the user's hold; the next hold action makes
/// it an administrator's); disown: release, then mark kMarkReleased (the account left
/// governance). Each line may fail (a job that ended meanwhile) without stopping the others.
std::string SlurmJobActionCommands(const std::vector<agentapi::SlurmJobAction>& actions);

/// The root-shell script run when `accounts` left governance: job_submit.lua may have held
/// jobs of theirs that the control plane has not seen yet (no mark); each pending job of
/// theirs held by the user (JobHeldUser) without an AdminComment gets kMarkGoverned, so that
/// it is reported and released. Exits non-zero when squeue fails (tried again later). Names
/// that are not [a-z0-9-] are left out; "" when none is left.
std::string MarkUngovernedHeldJobsCommands(const std::set<std::string>& accounts);

/// The root-shell script that creates the governance's accounts and QOS in slurmdbd
/// (`sacctmgr -i add account <team>`, every user slurmdbd knows added to it, `sacctmgr -i
/// add qos <class>-priority Priority=<weight>`) from the heartbeat's "governance"; it exits
/// 0 at once where accounting.conf does not use slurmdbd. Names that are not [a-z0-9-] and
/// priorities outside 0..1,000,000 are left out.
std::string SacctmgrCommands(const agentapi::Governance& governance);

/// The Slurm side of task governance on the controller node. Thread-safe.
class SlurmJobs {
 public:
  struct Options {
    std::string root = "/";  ///< node file prefix (see AgentOptions::root)
    Duration interval = std::chrono::seconds(1);
    /// SlurmJobsQuery() output, or nullopt when Slurm does not answer. Empty: no report.
    std::function<std::optional<std::string>()> query;
    /// Runs a root-shell script; false when it failed. Empty: nothing runs.
    std::function<bool(const std::string& script)> run;
    /// Whether this node runs slurmctld and its lifecycle scripts are over.
    std::function<bool()> active;
  };
  /// Slurm queries after the start and after the last governed account left before the
  /// agent stops querying (an empty report instead); it queries on while the last report
  /// had a job (a marked held job of a departed account, reported until released).
  static constexpr int kMarkedQueries = 3;

  SlurmJobs(Options options, const Clock& clock);
  ~SlurmJobs();
  SlurmJobs(const SlurmJobs&) = delete;
  SlurmJobs& operator=(const SlurmJobs&) = delete;

  /// The last "slurm_jobs" report if taken within 3 intervals.
  std::optional<agentapi::SlurmJobsReport> report();
  /// Takes a heartbeat response's "governance" and "slurm_job_actions" (when present) and
  /// wakes the Slurm thread to apply them. Each response supersedes what earlier ones asked
  /// and the thread has not applied yet: one without actions cancels pending ones, and one
  /// whose governance is the applied one cancels a pending change.
  void onResponse(const agentapi::HeartbeatResponse& response);

 private:
  void Loop();
  /// Writes the governed accounts file and runs sacctmgr when the governance changed.
  void ApplyGovernance(const agentapi::Governance& governance);
  /// Runs MarkUngovernedHeldJobsCommands for the accounts that left governance, until it
  /// succeeds once after they left.
  void MarkUngovernedHeldJobs();

  const Options options_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::string> accounts_;           ///< governed accounts as last applied
  std::set<std::string> ungoverned_;  ///< left governance; their held jobs not yet marked
  int marked_queries_left_ = kMarkedQueries;  ///< see kMarkedQueries (Loop only)
  size_t last_report_jobs_ = 0;  ///< jobs in the last report (Loop only)
  std::optional<agentapi::Governance> governance_;  ///< received, not yet applied
  std::optional<agentapi::Governance> applied_governance_;  ///< the last applied one
  /// Received, not yet applied.
  std::optional<std::vector<agentapi::SlurmJobAction>> actions_;
  std::optional<agentapi::SlurmJobsReport> report_;
  SystemTime report_at_{};
  std::thread thread_;
};

}  // namespace hf::agent
