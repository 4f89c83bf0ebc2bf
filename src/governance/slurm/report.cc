#include "hyperfleet/governance/slurm/report.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"

namespace hf::governance::slurm {
namespace {

using nlohmann::json;

/// Whether `s` contains "held" in any case (JobHeldAdmin, "job requeued in held state").
bool SaysHeld(std::string_view s) {
  constexpr std::string_view kHeld = "held";
  return std::search(s.begin(), s.end(), kHeld.begin(), kHeld.end(), [](char a, char b) {
           return absl::ascii_tolower(static_cast<unsigned char>(a)) == b;
         }) != s.end();
}

/// One job entry, its members read in one pass (the hot path: every governed job, every
/// second); false when it has no unsigned id.
bool ReadJob(const json& r, ReportedJob& j) {
  bool has_id = false;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (key == "account") j.account = s;
      else if (key == "state") j.state = s;
      else if (key == "reason") j.reason = s;
      else if (key == "qos") j.qos = s;
      else if (key == "partition") j.partition = s;
      else if (key == "mark")
        j.mark = s == "hyperfleet-held"       ? Mark::kHeld
                 : s == "hyperfleet-governed" ? Mark::kGoverned
                                              : Mark::kNone;
    } else if (v.is_number()) {
      if (key == "id") {
        has_id = v.is_number_unsigned();
        if (has_id) j.id = v.get<uint64_t>();
      } else if (key == "nodes") {
        j.nodes = v.get<double>();
      } else if (key == "submit_time") {
        j.submit_time = v.get<double>();
      }
    }
  }
  return has_id;
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

std::optional<Report> ParseReport(const json& slurm_jobs) {
  if (!slurm_jobs.is_object()) return std::nullopt;
  auto jobs = slurm_jobs.find("jobs");
  if (jobs == slurm_jobs.end() || !jobs->is_array()) return std::nullopt;
  Report report;
  report.jobs.reserve(jobs->size());
  for (const auto& r : *jobs) {
    if (!r.is_object()) continue;
    ReportedJob j;
    if (ReadJob(r, j)) report.jobs.push_back(j);
  }
  return report;
}

std::vector<ReportedPartition> ParsePartitions(const json& slurm_jobs) {
  std::vector<ReportedPartition> out;
  if (!slurm_jobs.is_object()) return out;
  auto partitions = slurm_jobs.find("partitions");
  if (partitions == slurm_jobs.end() || !partitions->is_object()) return out;
  for (auto it = partitions->begin(); it != partitions->end(); ++it) {
    if (!it.value().is_array()) continue;
    ReportedPartition& p = out.emplace_back();
    p.name = it.key();
    for (const auto& h : it.value()) {
      if (h.is_string()) p.hosts.push_back(h.get_ref<const std::string&>());
    }
  }
  return out;
}

}  // namespace hf::governance::slurm
