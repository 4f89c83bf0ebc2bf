#pragma once
// The Slurm controller agent's job report, typed for the Governor (docs/governance.md "On
// Slurm"): the heartbeat's "slurm_jobs" as agent/slurm_jobs.h ParseSlurmJobs builds it,
// and how a job's Slurm state and AdminComment read to governance.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"

namespace hf::governance::slurm {

/// How a job stands in Slurm, as far as governance cares.
enum class SlurmPhase {
  kHeld,      ///< pending, held (job_submit.lua, requeuehold, hold)
  kWaiting,   ///< pending, released: Slurm starts it when nodes are free
  kRunning,   ///< holds nodes and runs
  kStopping,  ///< completing or being requeued: its nodes free up by themselves
};

/// The phase of a job in squeue's long `state` with `reason` (Slurm 22.05): a pending job
/// is held when its reason says so (JobHeldAdmin, JobHeldUser, "job requeued in held state").
SlurmPhase PhaseOf(std::string_view state, std::string_view reason);

/// The phase in words, for `hyperfleet jobs why`.
std::string_view PhaseName(SlurmPhase phase);

/// Hyperfleet's mark in a job's AdminComment (agent/slurm_jobs.h kMarkGoverned, kMarkHeld):
/// only root and SlurmUser set it, so a marked hold is ours and an unmarked one an operator's.
enum class Mark : uint8_t {
  kNone,
  kGoverned,  ///< ours; the hold may still be the user's (job_submit.lua, requeuehold)
  kHeld,      ///< ours, and an administrator's hold (set with priority 0 in one update)
};

/// One job of a report. The strings are views into what it was read from (ParseReport's
/// report, or a test's literals).
struct ReportedJob {
  uint64_t id = 0;
  std::string_view account;
  std::string_view state;      ///< squeue's long state, upper case
  std::string_view reason;
  std::string_view qos;        ///< the priority class's QOS; "" for none
  std::string_view partition;  ///< comma-separated when submitted to several
  Mark mark = Mark::kNone;
  double nodes = 1.0;          ///< the most nodes Slurm may give it
  double submit_time = 0.0;    ///< seconds since the epoch
};

/// One report: the jobs of governed accounts, and marked held jobs of any account.
struct Report {
  std::vector<ReportedJob> jobs;
};

/// The mark AdminComment `comment` stands for: kHeld for "hyperfleet-held", kGoverned for
/// "hyperfleet-governed", kNone for anything else.
Mark MarkOf(std::string_view comment);

/// The jobs of the agent's report (the heartbeat's "slurm_jobs", agentapi/protocol.h, whose
/// decoding leaves out entries without an unsigned "id" and reads members of other types as
/// missing). The result views into `slurm_jobs`, which must outlive it.
Report ParseReport(const agentapi::SlurmJobsReport& slurm_jobs);

/// One partition of a report, with the Slurm names of its nodes.
struct ReportedPartition {
  std::string_view name;
  std::vector<std::string_view> hosts;
};

/// The partitions of `slurm_jobs`, in name order. Views into `slurm_jobs`.
std::vector<ReportedPartition> ParsePartitions(const agentapi::SlurmJobsReport& slurm_jobs);

}  // namespace hf::governance::slurm
