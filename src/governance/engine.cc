// The engine's public façade (include/hyperfleet/governance/engine.h): configuration and
// workload events, queries. The decisions are in the files engine_impl.h lists.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "governance/engine_impl.h"

namespace hf::governance {

std::string_view ResourceName(int r) {
  switch (r) {
    case kAccelerators: return "accelerators";
    case kVCpuMilli: return "vcpu";
    case kMemoryMiB: return "memory";
  }
  return "?";
}

std::string_view PreemptionReasonName(PreemptionReason r) {
  switch (r) {
    case PreemptionReason::kInClusterQueue: return "InClusterQueue";
    case PreemptionReason::kReclaim: return "InCohortReclamation";
    case PreemptionReason::kFairSharing: return "InCohortFairSharing";
  }
  return "?";
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAdmitted: return "Admitted";
    case Verdict::kNeverFits: return "NeverFits";
    case Verdict::kTeamInactive: return "TeamInactive";
    case Verdict::kWaiting: return "Waiting";
    case Verdict::kNotConsidered: return "NotConsidered";
  }
  return "?";
}

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Status Engine::SetCapacity(const std::vector<InstanceTypeCapacity>& types) {
  Impl& m = *impl_;
  absl::flat_hash_map<std::string, uint16_t> index;
  for (size_t i = 0; i < types.size(); ++i) {
    const auto& t = types[i];
    if (t.name.empty()) return absl::InvalidArgumentError("instance type: empty name");
    if (t.vcpus < 0 || t.memory_gib < 0 || t.accelerators < 0 || t.instances < 0)
      return absl::InvalidArgumentError(absl::StrCat(t.name, ": negative capacity"));
    if (!index.emplace(t.name, static_cast<uint16_t>(i)).second)
      return absl::InvalidArgumentError(absl::StrCat(t.name, ": listed twice"));
  }
  // Existing flavors keep their slot; new ones are appended; in-use ones may not vanish.
  for (size_t f = 0; f < m.flavors.size(); ++f) {
    if (index.contains(m.flavors[f].cap.name)) continue;
    for (const Team& t : m.teams) {
      const TeamFlavor& x = t.tf[f];
      if (x.has_quota || x.npending > 0 || !x.admitted.empty() || !x.never_fit.empty())
        return absl::FailedPreconditionError(
            absl::StrCat(m.flavors[f].cap.name, " is in use by team ", t.name));
    }
  }
  for (const auto& t : types) {
    auto it = m.flavor_index.find(t.name);
    uint16_t f;
    if (it == m.flavor_index.end()) {
      f = static_cast<uint16_t>(m.flavors.size());
      m.flavors.emplace_back();
      m.flavor_index.emplace(t.name, f);
      for (Team& team : m.teams) team.tf.emplace_back();
    } else {
      f = it->second;
    }
    Flavor& fl = m.flavors[f];
    fl.cap = t;
    fl.per_instance = PerInstance(t);
    for (int r = 0; r < kNumResources; ++r) fl.capacity[r] = fl.per_instance[r] * t.instances;
  }
  // Re-resolve every quota against the new per-instance figures.
  for (Team& team : m.teams) {
    if (!team.exists) continue;
    auto resolved = m.ResolveQuota(team.quota);
    if (!resolved.ok()) return resolved.status();
    for (size_t f = 0; f < m.flavors.size(); ++f) {
      team.tf[f].configured = resolved->first[f];
      team.tf[f].configured_borrow = resolved->second[f];
    }
  }
  m.Recompute();
  return absl::OkStatus();
}

Status Engine::SetPolicy(const SchedulerPolicy& policy) {
  Impl& m = *impl_;
  if (policy.priority_classes.size() > 10)
    return absl::InvalidArgumentError("PriorityClasses: at most 10");
  absl::flat_hash_map<std::string, uint8_t> index;
  std::vector<int> weights;
  for (size_t i = 0; i < policy.priority_classes.size(); ++i) {
    const auto& pc = policy.priority_classes[i];
    if (pc.weight < 0 || pc.weight > 100)
      return absl::InvalidArgumentError(
          absl::StrCat("PriorityClasses[", i, "].Weight: must be 0..100"));
    if (pc.name.empty())
      return absl::InvalidArgumentError(absl::StrCat("PriorityClasses[", i, "].Name: empty"));
    if (!index.emplace(pc.name, static_cast<uint8_t>(i)).second)
      return absl::InvalidArgumentError(
          absl::StrCat("PriorityClasses[", i, "].Name: ", pc.name, " appears twice"));
    index.emplace(pc.name + "-priority", static_cast<uint8_t>(i));
    weights.push_back(pc.weight);
  }
  // Workloads naming a class that disappears fall back to priority 0; others follow their
  // class by name.
  std::vector<uint8_t> remap(m.class_weight.size(), kNoClass);
  for (const auto& [name, old] : m.class_index) {
    auto it = index.find(name);
    if (it != index.end()) remap[old] = it->second;
  }
  m.policy = policy;
  m.class_index = std::move(index);
  m.class_weight = std::move(weights);
  for (Team& t : m.teams) {
    for (TeamFlavor& x : t.tf) {
      // Classes are renumbered: rebuild the buckets.
      std::vector<uint32_t> pend;
      for (const auto& b : x.buckets) pend.insert(pend.end(), b->q.begin(), b->q.end());
      x.buckets.clear();
      x.info.clear();
      x.npending = 0;
      x.summary_dirty = true;
      for (uint32_t wi : pend) {
        Wl& w = m.wls[wi];
        w.cls = w.cls == kNoClass ? kNoClass : remap[w.cls];
        w.prio = w.cls == kNoClass ? 0 : m.class_weight[w.cls];
        m.InsertPending(wi);
      }
      x.admitted_by_class = {};
      x.min_admitted_prio = std::numeric_limits<int32_t>::max();
      x.admitted_usage_by_class = {};
      x.admitted_shapes.clear();
      for (size_t k = 0; k < x.admitted.size(); ++k) {
        Wl& w = m.wls[x.admitted[k]];
        w.cls = w.cls == kNoClass ? kNoClass : remap[w.cls];
        w.prio = w.cls == kNoClass ? 0 : m.class_weight[w.cls];
        x.admitted_keys[k].prio = w.prio;
        m.CountAdmitted(x, w, +1);
      }
      for (uint32_t wi : x.never_fit) {
        Wl& w = m.wls[wi];
        w.cls = w.cls == kNoClass ? kNoClass : remap[w.cls];
        w.prio = w.cls == kNoClass ? 0 : m.class_weight[w.cls];
      }
    }
  }
  m.Recompute();
  return absl::OkStatus();
}

Status Engine::UpsertQuota(const TeamQuota& quota) {
  Impl& m = *impl_;
  HF_ASSIGN_OR_RETURN(auto resolved, m.ResolveQuota(quota));
  auto it = m.team_index.find(quota.team);
  uint32_t ti;
  if (it == m.team_index.end()) {
    ti = static_cast<uint32_t>(m.teams.size());
    m.teams.emplace_back();
    m.teams.back().tf.resize(m.flavors.size());
    m.team_index.emplace(quota.team, ti);
  } else {
    ti = it->second;
  }
  Team& t = m.teams[ti];
  t.name = quota.team;
  t.quota = quota;
  t.exists = true;
  t.weight = quota.fair_share_weight;
  t.preempt = quota.preempt_team_tasks;
  std::vector<bool> listed(m.flavors.size());
  for (const auto& qr : quota.resources) listed[m.flavor_index.at(qr.instance_type)] = true;
  for (size_t f = 0; f < m.flavors.size(); ++f) {
    t.tf[f].has_quota = listed[f];
    t.tf[f].configured = resolved.first[f];
    t.tf[f].configured_borrow = resolved.second[f];
  }
  m.Recompute();
  return absl::OkStatus();
}

Status Engine::RemoveQuota(std::string_view team) {
  Impl& m = *impl_;
  auto it = m.team_index.find(std::string(team));
  if (it == m.team_index.end() || !m.teams[it->second].exists)
    return absl::NotFoundError(absl::StrCat("team ", std::string(team), " has no compute quota"));
  Team& t = m.teams[it->second];
  t.exists = false;
  for (TeamFlavor& x : t.tf) x.has_quota = false;
  m.Recompute();
  return absl::OkStatus();
}

Status Engine::Submit(const WorkloadSpec& spec) {
  HF_ASSIGN_OR_RETURN(uint32_t wi, impl_->NewWorkload(spec));
  impl_->Enqueue(wi);
  return absl::OkStatus();
}

Status Engine::RestoreAdmitted(const WorkloadSpec& spec) {
  Impl& m = *impl_;
  HF_ASSIGN_OR_RETURN(uint32_t wi, m.NewWorkload(spec));
  Wl& w = m.wls[wi];
  TeamFlavor& x = m.teams[w.team].tf[w.flavor];
  w.state = WlState::kAdmitted;
  w.admit_seq = ++m.admit_seq;
  m.PushAdmitted(x, wi);
  m.CountAdmitted(x, w, +1);
  m.AddUsage(w.team, w.flavor, m.ReqOf(w), +1);
  ++m.admitted_count;
  return absl::OkStatus();
}

Status Engine::Remove(uint64_t id) {
  Impl& m = *impl_;
  auto it = m.by_id.find(id);
  if (it == m.by_id.end()) return absl::NotFoundError(absl::StrCat("workload ", id));
  m.Release(it->second);
  return absl::OkStatus();
}

CycleResult Engine::RunCycle(int64_t now_ms) { return impl_->RunCycle(now_ms); }

StatusOr<WhyPending> Engine::Explain(uint64_t id) const {
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return absl::NotFoundError(absl::StrCat("workload ", id));
  return impl_->Explain(it->second);
}

Resources Engine::Usage(std::string_view team, std::string_view type) const {
  const TeamFlavor* x = impl_->FindTf(team, type);
  return x ? x->usage : Resources{};
}

Resources Engine::Nominal(std::string_view team, std::string_view type) const {
  const TeamFlavor* x = impl_->FindTf(team, type);
  return x ? x->nominal : Resources{};
}

std::vector<QuotaExcess> Engine::QuotaExcessReport() const {
  const Impl& m = *impl_;
  std::vector<QuotaExcess> out;
  for (size_t f = 0; f < m.flavors.size(); ++f) {
    Resources sum{};
    for (const Team& t : m.teams)
      for (int r = 0; r < kNumResources; ++r) sum[r] += t.tf[f].nominal[r];
    bool over = false;
    for (int r = 0; r < kNumResources; ++r) over |= sum[r] > m.flavors[f].capacity[r];
    if (over) out.push_back({m.flavors[f].cap.name, sum, m.flavors[f].capacity});
  }
  return out;
}

int64_t Engine::PendingCount() const { return impl_->pending_count; }
int64_t Engine::AdmittedCount() const { return impl_->admitted_count; }

int64_t Engine::ApproxWorkloadBytes() const {
  const Impl& m = *impl_;
  // Workload slots + id index + one red-black node (4-byte key + 4 words, rounded to the
  // allocator's 48 bytes) per pending workload; buckets and shapes are per class, few.
  int64_t bytes = static_cast<int64_t>(m.wls.capacity() * sizeof(Wl));
  bytes += static_cast<int64_t>(m.by_id.capacity() * (sizeof(uint64_t) + sizeof(uint32_t) + 1));
  bytes += m.pending_count * 48;
  bytes += static_cast<int64_t>(m.shapes.capacity() * sizeof(Resources));
  return bytes;
}

const TeamFlavor* Engine::Impl::FindTf(std::string_view team, std::string_view type) const {
  auto ti = team_index.find(std::string(team));
  auto fi = flavor_index.find(std::string(type));
  if (ti == team_index.end() || fi == flavor_index.end()) return nullptr;
  return &teams[ti->second].tf[fi->second];
}

}  // namespace hf::governance

// ---- explain (its own file in a following commit) ----

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

// ---- consistency (its own file in a following commit) ----

// Engine::CheckConsistency: the engine's incremental indexes against a recomputation from
// scratch (tests only: O(workloads + teams² × types)).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "governance/engine_impl.h"

namespace hf::governance {
namespace {
template <class... Parts>
Status Bad(const Parts&... parts) {
  return absl::InternalError(absl::StrCat(parts...));
}
}  // namespace

Status Engine::CheckConsistency() const {
  const Impl& m = *impl_;
  Resources lendable{};
  for (const Flavor& fl : m.flavors)
    for (int r = 0; r < kNumResources; ++r) lendable[r] += fl.subtree[r];
  if (lendable != m.lendable_.total) return Bad("lendable total is stale");
  for (size_t f = 0; f < m.flavors.size(); ++f) HF_RETURN_IF_ERROR(m.CheckFlavor(f));
  int64_t pending = 0, admitted = 0;
  for (uint32_t ti = 0; ti < m.teams.size(); ++ti) {
    const Team& t = m.teams[ti];
    Resources borrowed{};
    for (size_t f = 0; f < m.flavors.size(); ++f) {
      HF_RETURN_IF_ERROR(m.CheckQueue(ti, f, pending));
      HF_RETURN_IF_ERROR(m.CheckAdmitted(ti, f, admitted));
      const TeamFlavor& x = t.tf[f];
      for (int r = 0; r < kNumResources; ++r) borrowed[r] += Sat0(x.usage[r] - x.nominal[r]);
    }
    if (borrowed != t.borrowed) return Bad("team ", t.name, ": borrowed total is stale");
    if (Share::Cmp(t.share, m.ShareOf(t, -1, Resources{})) != 0)
      return Bad("team ", t.name, ": cached share is stale");
  }
  if (pending != m.pending_count) return Bad("pending count ", m.pending_count, " vs ", pending);
  if (admitted != m.admitted_count)
    return Bad("admitted count ", m.admitted_count, " vs ", admitted);
  return absl::OkStatus();
}

// Flavor f's cohort usage, cached potentials, borrower flags, borrower set (members and
// order) and the largest other share, against a brute-force recount.
Status Engine::Impl::CheckFlavor(size_t f) const {
  const Flavor& fl = flavors[f];
  Resources cohort_usage{};
  // Borrowers of f by brute force, in the order the set must have: share descending,
  // then team index.
  std::vector<std::pair<Share, uint32_t>> want;
  for (uint32_t ti = 0; ti < teams.size(); ++ti) {
    const Team& t = teams[ti];
    const TeamFlavor& x = t.tf[f];
    for (int r = 0; r < kNumResources; ++r) cohort_usage[r] += Sat0(x.usage[r] - x.local[r]);
    bool borrowing = false;
    for (int r = 0; r < kNumResources; ++r) borrowing |= x.usage[r] > x.nominal[r];
    if (borrowing) want.emplace_back(ShareOf(t, -1, Resources{}), ti);
    if (borrowing != x.in_borrowers)
      return Bad("team ", t.name, " on ", fl.cap.name, ": borrower flag is stale");
    for (int r = 0; r < kNumResources; ++r)
      if (x.potential[r] != Potential(t, static_cast<uint16_t>(f), r))
        return Bad("team ", t.name, " on ", fl.cap.name, ": cached potential is stale");
  }
  if (cohort_usage != fl.usage) return Bad(fl.cap.name, ": cohort usage is stale");
  std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
    const int c = Share::Cmp(a.first, b.first);
    return c != 0 ? c > 0 : a.second < b.second;
  });
  if (want.size() != fl.borrowers.size())
    return Bad(fl.cap.name, ": ", fl.borrowers.size(), " teams in the borrower set, ",
               want.size(), " borrow");
  size_t i = 0;
  for (const ShareKey& k : fl.borrowers) {
    if (k.team != want[i].second || Share::Cmp(k.share, want[i].first) != 0)
      return Bad(fl.cap.name, ": borrower set position ", i, " holds team ", k.team,
                 ", brute force says team ", want[i].second);
    ++i;
  }
  // The largest other share, as the admission filter reads it.
  for (uint32_t ti = 0; ti < teams.size(); ++ti) {
    std::optional<Share> brute;
    for (const auto& [sh, u] : want)
      if (u != ti && (!brute || *brute < sh)) brute = sh;
    const auto got = MaxOtherBorrowerShare(static_cast<uint16_t>(f), ti);
    if (brute.has_value() != got.has_value() || (brute && Share::Cmp(*brute, *got) != 0))
      return Bad(fl.cap.name, ": largest borrower share other than team ", ti, " is wrong");
  }
  return absl::OkStatus();
}

// Team ti's queue on f: buckets and their info, head keys, classes, the summary, the
// pending count (added to `pending` with the never-fit ones) and the queue's listing.
Status Engine::Impl::CheckQueue(uint32_t ti, size_t f, int64_t& pending) const {
  const Team& t = teams[ti];
  const TeamFlavor& x = t.tf[f];
  const std::string where = absl::StrCat("team ", t.name, " on ", flavors[f].cap.name);
  int64_t n = 0;
  bool any = false;
  Resources min_req{};
  int32_t max_prio = 0;
  if (x.info.size() != x.buckets.size()) return Bad(where, ": bucket info out of step");
  if (x.min_admitted_prio != CountMinAdmittedPrio(x))
    return Bad(where, ": lowest admitted priority is stale");
  for (size_t a = 0; a < x.buckets.size(); ++a) {
    const Bucket& b = *x.buckets[a];
    const BucketInfo& bi = x.info[a];
    if (!b.q.empty() && (bi.head_id != wls[*b.q.begin()].id ||
                         bi.head_ts != wls[*b.q.begin()].ts ||
                         bi.head_evicted_cycle != wls[*b.q.begin()].evicted_cycle))
      return Bad(where, ": bucket head keys are stale");
    if (b.slot != a || bi.size != b.q.size())
      return Bad(where, ": bucket info differs from its bucket");
    if (b.q.empty()) continue;
    const int32_t prio = bi.cls == kNoClass ? 0 : class_weight[bi.cls];
    if (bi.prio != prio) return Bad(where, ": bucket priority is stale");
    for (size_t c = a + 1; c < x.buckets.size(); ++c)
      if (x.info[c].size > 0 && x.info[c].cls == bi.cls && x.info[c].shape == bi.shape)
        return Bad(where, ": two buckets for one class and request");
    for (uint32_t wi : b.q) {
      const Wl& w = wls[wi];
      if (w.state != WlState::kPending || w.team != ti || w.flavor != f ||
          w.cls != bi.cls || w.shape != bi.shape || w.prio != bi.prio)
        return Bad(where, ": workload ", w.id, " is in the wrong bucket");
      ++n;
    }
    const Resources& req = shapes[bi.shape];
    if (!any) {
      min_req = req;
      max_prio = bi.prio;
    }
    for (int r = 0; r < kNumResources; ++r) min_req[r] = std::min(min_req[r], req[r]);
    max_prio = std::max(max_prio, bi.prio);
    any = true;
  }
  if (n != x.npending) return Bad(where, ": ", x.npending, " pending counted, ", n, " queued");
  if (any && !x.summary_dirty && (min_req != x.min_req || max_prio != x.max_prio))
    return Bad(where, ": queue summary is stale");
  if (n > 0) {
    const auto& q = flavors[f].queued;
    if (!x.listed || std::find(q.begin(), q.end(), ti) == q.end())
      return Bad(where, ": queue with pending workloads is not listed");
  }
  pending += n + static_cast<int64_t>(x.never_fit.size());
  return absl::OkStatus();
}

// Team ti's admitted workloads on f: states, positions, keys, usage, per-class and
// per-shape tallies (their number is added to `admitted`).
Status Engine::Impl::CheckAdmitted(uint32_t ti, size_t f, int64_t& admitted) const {
  const Team& t = teams[ti];
  const TeamFlavor& x = t.tf[f];
  const std::string where = absl::StrCat("team ", t.name, " on ", flavors[f].cap.name);
  admitted += static_cast<int64_t>(x.admitted.size());
  std::array<uint32_t, kClassSlots> by_class{};
  std::array<Resources, kClassSlots> usage_by_class{};
  std::vector<std::pair<uint32_t, uint32_t>> by_shape;
  Resources usage{};
  if (x.admitted_keys.size() != x.admitted.size())
    return Bad(where, ": admitted keys out of step");
  for (size_t k = 0; k < x.admitted.size(); ++k) {
    const Wl& w = wls[x.admitted[k]];
    if (w.state != WlState::kAdmitted || w.pos != k)
      return Bad(where, ": admitted workload ", w.id, " has a stale state or position");
    const AdmittedKey& key = x.admitted_keys[k];
    if (key.admit_seq != w.admit_seq || key.prio != w.prio || key.shape != w.shape)
      return Bad(where, ": admitted workload ", w.id, " has stale keys");
    const int slot = ClassSlot(w.cls);
    ++by_class[slot];
    for (int r = 0; r < kNumResources; ++r) {
      usage_by_class[slot][r] += shapes[w.shape][r];
      usage[r] += shapes[w.shape][r];
    }
    auto it = std::find_if(by_shape.begin(), by_shape.end(),
                           [&](const auto& e) { return e.first == w.shape; });
    if (it == by_shape.end()) by_shape.push_back({w.shape, 1});
    else ++it->second;
  }
  if (usage != x.usage) return Bad(where, ": usage differs from the admitted workloads");
  if (by_class != x.admitted_by_class || usage_by_class != x.admitted_usage_by_class)
    return Bad(where, ": per-class admitted counts are stale");
  auto sorted = x.admitted_shapes;
  std::sort(sorted.begin(), sorted.end());
  std::sort(by_shape.begin(), by_shape.end());
  if (sorted != by_shape) return Bad(where, ": admitted shapes are stale");
  return absl::OkStatus();
}

}  // namespace hf::governance
