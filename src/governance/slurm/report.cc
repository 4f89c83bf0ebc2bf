#include "hyperfleet/governance/slurm/report.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"

namespace hf::governance::slurm {
namespace {

/// Whether `s` contains "held" in any case (JobHeldAdmin, "job requeued in held state").
bool SaysHeld(std::string_view s) {
  constexpr std::string_view kHeld = "held";
  return std::search(s.begin(), s.end(), kHeld.begin(), kHeld.end(), [](char a, char b) {
           return absl::ascii_tolower(static_cast<unsigned char>(a)) == b;
         }) != s.end();
}

}  // namespace

SlurmPhase PhaseOf(std::string_view state, std::string_view reason) {
  if (state == "PENDING") {
    // JobHeldAdmin, JobHeldUser, and after requeuehold "job requeued in held state".
    return SaysHeld(reason) ? SlurmPhase::kHeld : SlurmPhase::kWaiting;
  }
  if (state == "REQUEUE_HOLD" || state == "SPECIAL_EXIT") return SlurmPhase::kHeld;
  if (state == "COMPLETING" || state == "REQUEUED" || state == "REQUEUE_FED" ||
      state == "STAGE_OUT") {
    return SlurmPhase::kStopping;
  }
  return SlurmPhase::kRunning;  // RUNNING, CONFIGURING, SUSPENDED, RESIZING, SIGNALING, ...
}

std::string_view PhaseName(SlurmPhase p) {
  switch (p) {
    case SlurmPhase::kHeld: return "held";
    case SlurmPhase::kWaiting: return "released, waiting for nodes";
    case SlurmPhase::kRunning: return "running";
    case SlurmPhase::kStopping: return "stopping";
  }
  return "?";
}

Mark MarkOf(std::string_view comment) {
  return comment == "hyperfleet-held"       ? Mark::kHeld
         : comment == "hyperfleet-governed" ? Mark::kGoverned
                                            : Mark::kNone;
}

Report ParseReport(const agentapi::SlurmJobsReport& slurm_jobs) {
  Report report;
  report.jobs.reserve(slurm_jobs.jobs.size());
  for (const auto& r : slurm_jobs.jobs) {
    report.jobs.push_back({r.id, r.account, r.state, r.reason, r.qos, r.partition,
                           MarkOf(r.mark), static_cast<double>(r.nodes), r.submit_time});
  }
  return report;
}

std::vector<ReportedPartition> ParsePartitions(const agentapi::SlurmJobsReport& slurm_jobs) {
  std::vector<ReportedPartition> out;
  out.reserve(slurm_jobs.partitions.size());
  for (const auto& [name, hosts] : slurm_jobs.partitions) {
    ReportedPartition& p = out.emplace_back();
    p.name = name;
    p.hosts.assign(hosts.begin(), hosts.end());
  }
  return out;
}

}  // namespace hf::governance::slurm
