#pragma once
// Task governance on Slurm, the deciding part (docs/governance.md "On Slurm"): one cluster's
// admission engine and the jobs its controller's agent reported. Each Step takes the
// configuration, the partition map and a report, turns the report into workload events
// (submit, finish, changed request), runs a cycle and answers what Slurm must do so that it
// runs exactly what the engine admitted. No I/O, no clock, no logging: control::
// GovernanceLoop reads the store, locks, logs and renders the answer for the agent.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/governance/engine.h"
#include "hyperfleet/governance/slurm/config.h"
#include "hyperfleet/governance/slurm/report.h"

namespace hf::governance::slurm {

/// What the agent does to a job (agent/slurm_jobs.h SlurmJobActionCommands).
enum class JobActionKind {
  kRelease,      ///< admitted, held: `scontrol release`
  kRequeueHold,  ///< runs without admission (a preemption victim): `scontrol requeuehold`
  kHold,         ///< not admitted and unheld, or held without our kHeld mark (the user's)
  kDisown,       ///< held with a mark, but its account is no longer governed: released
};

/// The wire name of `kind`: "release", "requeuehold", "hold", "disown".
std::string_view JobActionName(JobActionKind kind);

/// One job action.
struct JobAction {
  uint64_t job = 0;
  JobActionKind action = JobActionKind::kHold;
  bool operator==(const JobAction&) const = default;
};

/// A Step's answer.
struct Actions {
  /// Jobs whose Slurm state differs from the engine's decision, in id order, then the
  /// disowned jobs in id order.
  std::vector<JobAction> jobs;
  /// This step's admissions, each with the victims it preempted (the shell logs them).
  std::vector<Admission> admitted;
  /// Quotas the engine refused when it was rebuilt: (team, why). The others still count.
  std::vector<std::pair<std::string, std::string>> refused_quotas;
};

/// One cluster's engine and jobs. Not thread-safe: the caller serializes Step and the
/// accessors. A Step's work beyond reading the report is proportional to what changed since
/// the previous one (new, ended and changed jobs; bench/governance_loop_bench.cc).
class Governor {
 public:
  /// A governed job as last reported, and the engine's decision on it.
  struct Job {
    WorkloadSpec spec;
    bool in_engine = false;
    bool admitted = false;      ///< the engine's decision
    std::string problem;        ///< why the engine cannot take it (held meanwhile)
    std::string state, reason;  ///< Slurm's, as last reported
    SlurmPhase phase = SlurmPhase::kHeld;
    Mark mark = Mark::kNone;    ///< AdminComment, as last reported
    std::string partition;
    uint64_t seen = 0;          ///< the report (counted by the Governor) that last listed it
  };

  Governor();
  ~Governor();
  Governor(Governor&&) noexcept;
  Governor& operator=(Governor&&) noexcept;

  /// One heartbeat: `config` (ConfigOf), `partitions` (PartitionsOf, of this report's
  /// partitions), `report` (null when the agent sent none: only governance changes are
  /// handled), `now_ms` (the cycle's time, ms since the epoch). Jobs of teams that left
  /// `config.teams` are dropped; a changed config.key rebuilds the engine from the known
  /// jobs (admitted ones keep their quota, pending ones queue by submission time); the
  /// report's new jobs are submitted, changed ones decided anew, unlisted ones removed; a
  /// cycle runs. Before the first report a job that runs or waits released counts as
  /// admitted (a restarted control plane), later only one that runs. Errors: the engine's
  /// InvalidArgument when it refuses the capacity or the policy (nothing is decided; jobs of
  /// departed teams are dropped all the same).
  StatusOr<Actions> Step(const Config& config, const PartitionMap& partitions,
                         const Report* report, int64_t now_ms);

  /// The job with id `id`, or null when no report listed it (or it ended).
  const Job* job(uint64_t id) const;
  /// The engine's explanation of job `id` (Engine::Explain). FailedPrecondition before the
  /// first successful Step; NotFound when the engine does not hold it.
  StatusOr<WhyPending> Explain(uint64_t id) const;
  /// The configuration the engine was built from (empty before the first successful Step).
  const Config& config() const { return config_; }
  /// Whether an engine was built (a Step succeeded).
  bool configured() const { return engine_ != nullptr; }
  /// Whether a Step has handled a report.
  bool seen_report() const { return seen_report_; }

 private:
  std::map<uint64_t, Job> DropUngoverned(const std::set<std::string, std::less<>>& teams);
  Status Rebuild(const Config& config, Actions& out);
  void Observe(const Report& report, bool partitions_changed,
               std::map<uint64_t, Job>& departed, std::set<uint64_t>& disowned);
  void ObserveJob(const ReportedJob& rj, uint64_t report, bool partitions_changed,
                  size_t& listed);
  void Place(Job& job);
  void EndUnlisted(uint64_t report, size_t listed);
  void Decide(int64_t now_ms, Actions& out);
  void Track(uint64_t id, const Job& job);

  std::unique_ptr<Engine> engine_;
  Config config_;
  std::set<std::string, std::less<>> teams_;  ///< governed accounts
  PartitionMap partitions_;                   ///< the partition map jobs were placed with
  std::unordered_map<uint64_t, Job> jobs_;
  /// Jobs whose Slurm state differs from the decision (an action is due): the answer's job
  /// actions, kept up to date as jobs change so that no step scans every job.
  std::set<uint64_t> discordant_;
  uint64_t reports_ = 0;       ///< reports handled
  bool seen_report_ = false;   ///< a report arrived since this Governor was made
};

}  // namespace hf::governance::slurm
