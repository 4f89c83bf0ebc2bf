// Why a workload is (not) admitted: Engine::Explain's figures and verdict, and their
// rendering for `hyperfleet jobs why` (docs/governance.md "Why pending").
#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "governance/engine_impl.h"

namespace hf::governance {

namespace {
// One resource amount in the unit people read: vCPU and GiB rather than milli and MiB.
std::string Human(int r, int64_t v) {
  switch (r) {
    case kVCpuMilli: return absl::StrCat(v / 1000.0);
    case kMemoryMiB: return absl::StrCat(v / 1024.0, " GiB");
    default: return absl::StrCat(v);
  }
}

// What the request needs beyond what can be admitted now, per resource ("vcpu needs 8000
// but 4000 can be admitted now, ..."); empty when it fits.
std::string NeedText(const WhyPending& why) {
  std::string out;
  for (int r = 0; r < kNumResources; ++r) {
    const auto& v = why.resources[r];
    if (v.request > v.available)
      absl::StrAppend(&out, out.empty() ? "" : ", ", std::string(ResourceName(r)), " needs ",
                      v.request, " but ", v.available, " can be admitted now");
  }
  return out;
}
}  // namespace

std::string RenderWhyPending(const WhyPending& w) {
  std::string out = absl::StrCat("job ", w.id, " (team ", w.team, ", ", w.instance_type,
                                 ", priority ", w.priority_class.empty() ? "none" : w.priority_class,
                                 " = ", w.priority, "): ", std::string(VerdictName(w.verdict)),
                                 "\n  why: ", w.reason, "\n");
  absl::StrAppend(&out, "  resource       request    nominal      usage  borrow-limit  "
                        "borrowable  idle-in-cohort  available  max-ever\n");
  for (int r = 0; r < kNumResources; ++r) {
    const ResourceQuotaView& v = w.resources[r];
    if (v.request == 0 && v.nominal == 0) continue;
    char line[256];
    std::snprintf(line, sizeof line, "  %-12s %9s  %9s  %9s  %12s  %10s  %14s  %9s  %8s\n",
                  std::string(ResourceName(r)).c_str(), Human(r, v.request).c_str(),
                  Human(r, v.nominal).c_str(), Human(r, v.usage).c_str(),
                  Human(r, v.borrow_limit).c_str(), Human(r, v.borrowable).c_str(),
                  Human(r, v.idle_in_cohort).c_str(), Human(r, v.available).c_str(),
                  Human(r, v.potential).c_str());
    absl::StrAppend(&out, line);
  }
  if (w.verdict != Verdict::kAdmitted) {
    absl::StrAppend(&out, "  jobs of the team ahead of it: ", w.jobs_ahead);
    if (!w.first_ahead.empty()) {
      absl::StrAppend(&out, " (");
      for (size_t i = 0; i < w.first_ahead.size(); ++i)
        absl::StrAppend(&out, i ? ", " : "", w.first_ahead[i]);
      absl::StrAppend(&out, w.jobs_ahead > static_cast<int64_t>(w.first_ahead.size()) ? ", ...)" : ")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

WhyPending Engine::Impl::Explain(uint32_t wi) const {
  const Wl& w = wls[wi];
  WhyPending why;
  why.id = w.id;
  why.team = teams[w.team].name;
  why.instance_type = flavors[w.flavor].cap.name;
  why.priority = w.prio;
  if (w.cls != kNoClass) {
    for (const auto& pc : policy.priority_classes)
      if (class_index.at(pc.name) == w.cls) why.priority_class = pc.name;
  }
  ExplainQuota(w, why);
  if (w.state == WlState::kPending) ExplainJobsAhead(w, why);
  ExplainVerdict(w, why);
  return why;
}

// The quota arithmetic of w's team and type, per resource.
void Engine::Impl::ExplainQuota(const Wl& w, WhyPending& why) const {
  const Team& t = teams[w.team];
  const uint16_t f = w.flavor;
  const TeamFlavor& x = t.tf[f];
  const Flavor& fl = flavors[f];
  for (int r = 0; r < kNumResources; ++r) {
    ResourceQuotaView& v = why.resources[r];
    v.request = ReqOf(w)[r];
    v.nominal = x.nominal[r];
    v.usage = x.usage[r];
    v.borrow_limit = x.borrow_limit[r];
    // Idle in the cohort excluding the team's own unused nominal: what others lend.
    const int64_t own_unused =
        Sat0((x.nominal[r] - x.local[r]) - Sat0(x.usage[r] - x.local[r]));
    v.idle_in_cohort = Sat0(fl.subtree[r] - fl.usage[r] - own_unused);
    const int64_t borrowed = Sat0(x.usage[r] - x.nominal[r]);
    v.borrowable = std::min(Sat0(x.borrow_limit[r] - borrowed), v.idle_in_cohort);
    v.available = Available(t, f, r);
    v.potential = Potential(t, f, r);
  }
}

// The team's pending jobs (of every type) ahead of pending workload w in queue order:
// higher priority, then earlier submission, then id. Counts them and lists the first 10.
void Engine::Impl::ExplainJobsAhead(const Wl& w, WhyPending& why) const {
  auto ahead = [&](const Wl& o) {
    if (o.prio != w.prio) return o.prio > w.prio;
    if (o.ts != w.ts) return o.ts < w.ts;
    return o.id < w.id;
  };
  std::vector<const Wl*> before;
  for (const TeamFlavor& y : teams[w.team].tf)
    for (const auto& b : y.buckets)
      for (uint32_t k : b->q) {
        const Wl& o = wls[k];
        if (!ahead(o)) break;  // a bucket is in (ts, id) order with one priority
        before.push_back(&o);
      }
  why.jobs_ahead = static_cast<int64_t>(before.size());
  const size_t n = std::min<size_t>(10, before.size());
  std::partial_sort(before.begin(), before.begin() + n, before.end(),
                    [&](const Wl* a, const Wl* b) {
                      if (a->prio != b->prio) return a->prio > b->prio;
                      if (a->ts != b->ts) return a->ts < b->ts;
                      return a->id < b->id;
                    });
  for (size_t i = 0; i < n; ++i) why.first_ahead.push_back(before[i]->id);
  std::sort(why.first_ahead.begin(), why.first_ahead.end());
}

// The verdict and its sentence, from w's state and its class's last outcome (Skip); reads
// the resources ExplainQuota filled.
void Engine::Impl::ExplainVerdict(const Wl& w, WhyPending& why) const {
  const Team& t = teams[w.team];
  const TeamFlavor& x = t.tf[w.flavor];
  switch (w.state) {
    case WlState::kAdmitted:
      why.verdict = Verdict::kAdmitted;
      why.reason = "admitted";
      break;
    case WlState::kNeverFit:
      why.verdict = Verdict::kNeverFits;
      why.reason = x.has_quota
                       ? "the request exceeds the most the team could ever be admitted "
                         "(nominal + borrow limit, bounded by the cohort) on this "
                         "instance type; it will not run unless the quota changes"
                       : "the team has no quota for this instance type";
      break;
    case WlState::kPending:
      if (!t.active) {
        why.verdict = Verdict::kTeamInactive;
        why.reason = t.exists ? "the team's compute quota is disabled (ActivationState)"
                              : "the team's compute quota was deleted";
      } else if (w.queued_cycle >= cycle) {
        why.verdict = Verdict::kNotConsidered;
        why.reason = "submitted after the last scheduling cycle";
      } else {
        why.verdict = Verdict::kWaiting;
        const Bucket* b = FindBucket(x, w);
        switch (b ? x.info[b->slot].skip : Skip::kNone) {
          case Skip::kNeedsBorrow:
            why.reason = absl::StrCat(
                "it needs to borrow and the cohort has not enough idle quota to lend (",
                NeedText(why), "); borrowers are not preempted for a borrowing job");
            break;
          case Skip::kNoQuota:
          case Skip::kNoCandidates:
            why.reason = absl::StrCat("not enough free quota (", NeedText(why),
                                      ") and no workload may be preempted for it");
            break;
          default:
            why.reason = "waiting for quota to be released";
        }
      }
      break;
    case WlState::kFree:
      break;
  }
}

}  // namespace hf::governance
