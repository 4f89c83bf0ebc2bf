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
