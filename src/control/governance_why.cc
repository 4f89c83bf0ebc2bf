#include "governance_why.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace hf::control {
namespace {

using nlohmann::json;
namespace gov = hf::governance;
namespace gs = hf::governance::slurm;

/// Slurm's state with its reason, as `hyperfleet jobs why` shows it.
std::string SlurmState(const gs::Governor::Job& job) {
  return absl::StrCat(job.state, job.reason.empty() || job.reason == "None"
                                     ? std::string()
                                     : " (" + job.reason + ")");
}

/// The engine's view of each resource, also in instances of the job's type (`per`).
json ResourcesJson(const gov::WhyPending& w, const gov::Resources& per) {
  json resources = json::array();
  for (int r = 0; r < gov::kNumResources; ++r) {
    const auto& v = w.resources[r];
    json e = {{"Resource", std::string(gov::ResourceName(r))},
              {"Request", v.request},
              {"Nominal", v.nominal},
              {"Usage", v.usage},
              {"BorrowLimit", v.borrow_limit},
              {"Borrowable", v.borrowable},
              {"IdleInCohort", v.idle_in_cohort},
              {"Available", v.available},
              {"Potential", v.potential}};
    if (per[r] > 0) {
      auto inst = [&](int64_t x) { return static_cast<double>(x) / static_cast<double>(per[r]); };
      e["Instances"] = {{"Request", inst(v.request)},
                        {"Nominal", inst(v.nominal)},
                        {"Usage", inst(v.usage)},
                        {"BorrowLimit", inst(v.borrow_limit)},
                        {"Borrowable", inst(v.borrowable)},
                        {"IdleInCohort", inst(v.idle_in_cohort)},
                        {"Available", inst(v.available)},
                        {"Potential", inst(v.potential)}};
    }
    resources.push_back(std::move(e));
  }
  return resources;
}

// Whole instances are what a Slurm job takes: say it in instances first, on the resource
// that binds (accelerators when the type has them, else vCPU); "" when the type is unknown.
std::string InstancesLine(const gov::WhyPending& w, const gov::Resources& per,
                          const std::string& type) {
  const int r = per[gov::kAccelerators] > 0 ? gov::kAccelerators : gov::kVCpuMilli;
  if (per[r] <= 0) return "";
  const auto& v = w.resources[r];
  auto n = [&](int64_t x) {
    const double d = static_cast<double>(x) / static_cast<double>(per[r]);
    return std::floor(d) == d ? absl::StrCat(static_cast<int64_t>(d)) : absl::StrCat(d);
  };
  return absl::StrCat("  instances of ", type, ": request ", n(v.request), ", nominal ",
                      n(v.nominal), ", in use ", n(v.usage), ", borrow limit ",
                      n(v.borrow_limit), ", may borrow now ", n(v.borrowable),
                      ", idle in the cluster ", n(v.idle_in_cohort), ", available ",
                      n(v.available), ", at most ever ", n(v.potential), "\n");
}

}  // namespace

StatusOr<json> RenderWhy(const gs::Governor* governor, uint64_t id) {
  const gs::Governor::Job* job = governor ? governor->job(id) : nullptr;
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "Job ", id, " is not a governed job of this cluster as its Slurm controller last "
        "reported: Hyperfleet governs the pending and running jobs of Slurm accounts that have "
        "a ComputeQuota (sbatch --account=<team>). A job submitted in the last few seconds "
        "appears with the controller's next report; an ended job is governed no more."));
  }
  json out = {{"JobId", std::to_string(id)},
              {"Team", job->spec.team},
              {"InstanceType", job->spec.instance_type},
              {"Partition", job->partition},
              {"PriorityClass", job->spec.priority_class},
              {"SlurmState", SlurmState(*job)}};
  if (!job->in_engine) {
    out["Verdict"] = "Unaccounted";
    out["Reason"] = job->problem;
    out["Text"] = absl::StrCat("job ", id, " (team ", job->spec.team, "): held, Hyperfleet "
                               "cannot account it: ", job->problem, "\n");
    return out;
  }
  HF_ASSIGN_OR_RETURN(gov::WhyPending w, governor->Explain(id));
  out["Verdict"] = std::string(gov::VerdictName(w.verdict));
  out["Reason"] = w.reason;
  out["PriorityClass"] = w.priority_class;
  out["Priority"] = w.priority;
  out["JobsAhead"] = w.jobs_ahead;
  out["FirstAhead"] = json::array();
  for (uint64_t a : w.first_ahead) out["FirstAhead"].push_back(std::to_string(a));
  gov::Resources per{};
  for (const auto& t : governor->config().capacity) {
    if (t.name == job->spec.instance_type) per = gov::PerInstance(t);
  }
  out["Resources"] = ResourcesJson(w, per);
  out["Text"] = absl::StrCat(gov::RenderWhyPending(w),
                             InstancesLine(w, per, job->spec.instance_type),
                             "  slurm: ", SlurmState(*job),
                             job->phase == gs::SlurmPhase::kRunning
                                 ? std::string()
                                 : ", " + std::string(gs::PhaseName(job->phase)),
                             "\n");
  return out;
}

}  // namespace hf::control
