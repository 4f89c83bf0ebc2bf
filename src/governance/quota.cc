// Quota resolution (HyperPod's ComputeQuotaResources and borrow limits in engine units)
// and the effective quotas and cohort aggregates of a configuration (Recompute).
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "governance/engine_impl.h"

namespace hf::governance {

Resources PerInstance(const InstanceTypeCapacity& t) {
  return {t.accelerators, int64_t{t.vcpus} * 1000,
          static_cast<int64_t>(std::llround(t.memory_gib * 1024.0))};
}

StatusOr<Resources> ResolveQuotaResource(const QuotaResource& q, const Resources& inst,
                                         std::string_view field) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", std::string(what)));
  };
  for (auto [v, name] : {std::pair{q.accelerators, "Accelerators"}, {q.vcpu, "VCpu"},
                         {q.memory_gib, "MemoryInGiB"}}) {
    if (v && (*v < 0 || !std::isfinite(*v))) return bad(absl::StrCat(name, " must be ≥ 0"));
  }
  if (q.count && *q.count < 0) return bad("Count must be ≥ 0");
  if (q.accelerators && *q.accelerators > 0 && inst[kAccelerators] == 0)
    return bad(absl::StrCat("Accelerators: ", q.instance_type, " has no accelerators"));
  Resources out{};
  const double acc = static_cast<double>(inst[kAccelerators]);
  const double cpu = static_cast<double>(inst[kVCpuMilli]);
  const double mem = static_cast<double>(inst[kMemoryMiB]);
  if (q.count) {
    for (int r = 0; r < kNumResources; ++r) out[r] = *q.count * inst[r];
  } else if (q.accelerators) {
    const double frac = acc > 0 ? *q.accelerators / acc : 0;
    out = {0, static_cast<int64_t>(frac * cpu), static_cast<int64_t>(frac * mem)};
  } else if (q.vcpu) {
    const double frac = cpu > 0 ? *q.vcpu * 1000 / cpu : 0;
    out = {0, 0, static_cast<int64_t>(frac * mem)};
  } else if (q.memory_gib) {
    const double frac = mem > 0 ? *q.memory_gib * 1024 / mem : 0;
    out = {0, static_cast<int64_t>(frac * cpu), 0};
  } else {
    return bad("one of Count, Accelerators, VCpu or MemoryInGiB is required");
  }
  // Fields given explicitly override what Count or the ratio derived.
  if (q.accelerators) out[kAccelerators] = static_cast<int64_t>(std::floor(*q.accelerators));
  if (q.vcpu) out[kVCpuMilli] = static_cast<int64_t>(std::floor(*q.vcpu * 1000));
  if (q.memory_gib) out[kMemoryMiB] = static_cast<int64_t>(std::floor(*q.memory_gib * 1024));
  return out;
}

StatusOr<std::pair<std::vector<Resources>, std::vector<Resources>>> Engine::Impl::ResolveQuota(
    const TeamQuota& q) const {
  if (q.resources.size() > 15)
    return absl::InvalidArgumentError("ComputeQuotaResources: at most 15 entries");
  if (q.absolute_borrow_limits.size() > 15)
    return absl::InvalidArgumentError("AbsoluteBorrowLimits: at most 15 entries");
  if (q.fair_share_weight < 0 || q.fair_share_weight > 100)
    return absl::InvalidArgumentError("FairShareWeight: must be 0..100");
  if (q.borrow_limit_percent < 0 || q.borrow_limit_percent > 10000)
    return absl::InvalidArgumentError("BorrowLimit: must be 0..10000");
  if (q.team.empty()) return absl::InvalidArgumentError("TeamName: required");
  std::vector<Resources> nominal(flavors.size()), borrow(flavors.size());
  std::vector<bool> seen(flavors.size());
  for (size_t i = 0; i < q.resources.size(); ++i) {
    const QuotaResource& qr = q.resources[i];
    const std::string field = absl::StrCat("ComputeQuotaResources[", i, "]");
    auto it = flavor_index.find(qr.instance_type);
    if (it == flavor_index.end())
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".InstanceType: ", qr.instance_type, " is not in the cluster"));
    if (seen[it->second])
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".InstanceType: ", qr.instance_type, " appears twice"));
    seen[it->second] = true;
    HF_ASSIGN_OR_RETURN(nominal[it->second],
                        ResolveQuotaResource(qr, flavors[it->second].per_instance, field));
  }
  for (size_t f = 0; f < flavors.size(); ++f) {
    for (int r = 0; r < kNumResources; ++r) {
      borrow[f][r] = q.strategy == SharingStrategy::kLendAndBorrow
                         ? nominal[f][r] * q.borrow_limit_percent / 100
                         : 0;
    }
  }
  for (size_t i = 0; i < q.absolute_borrow_limits.size(); ++i) {
    const QuotaResource& qr = q.absolute_borrow_limits[i];
    const std::string field = absl::StrCat("AbsoluteBorrowLimits[", i, "]");
    auto it = flavor_index.find(qr.instance_type);
    if (it == flavor_index.end())
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".InstanceType: ", qr.instance_type, " is not in the cluster"));
    HF_ASSIGN_OR_RETURN(Resources abs,
                        ResolveQuotaResource(qr, flavors[it->second].per_instance, field));
    if (q.strategy != SharingStrategy::kLendAndBorrow) continue;  // cannot borrow at all
    Resources& b = borrow[it->second];
    // Only the resources the entry sets (directly or via Count) replace the percentage.
    if (qr.count) {
      b = abs;
    } else {
      if (qr.accelerators) b[kAccelerators] = abs[kAccelerators];
      if (qr.vcpu) b[kVCpuMilli] = abs[kVCpuMilli];
      if (qr.memory_gib) b[kMemoryMiB] = abs[kMemoryMiB];
    }
  }
  return std::pair{nominal, borrow};
}

void Engine::Impl::Recompute() {
  for (Flavor& fl : flavors) {
    fl.subtree = fl.usage = Resources{};
    fl.any_local = false;
  }
  std::vector<Resources> nominal_sum(flavors.size());
  for (Team& t : teams) {
    t.active = t.exists && t.quota.active;
    t.borrowed = {};
    ++t.version;
    for (size_t f = 0; f < flavors.size(); ++f) {
      TeamFlavor& x = t.tf[f];
      for (int r = 0; r < kNumResources; ++r) {
        x.nominal[r] = t.active && x.has_quota ? x.configured[r] : 0;
        x.borrow_limit[r] = t.active && x.has_quota ? x.configured_borrow[r] : 0;
        x.local[r] =
            t.active && t.quota.strategy == SharingStrategy::kDontLend ? x.nominal[r] : 0;
        if (x.local[r] > 0) flavors[f].any_local = true;
        flavors[f].subtree[r] += x.nominal[r] - x.local[r];
        flavors[f].usage[r] += Sat0(x.usage[r] - x.local[r]);
        t.borrowed[r] += Sat0(x.usage[r] - x.nominal[r]);
        nominal_sum[f][r] += x.nominal[r];
      }
    }
  }
  Resources lendable{};
  for (size_t f = 0; f < flavors.size(); ++f) {
    Flavor& fl = flavors[f];
    for (int r = 0; r < kNumResources; ++r) {
      fl.cohort_nominal[r] =
          policy.idle_resource_sharing ? Sat0(fl.capacity[r] - nominal_sum[f][r]) : 0;
      fl.subtree[r] += fl.cohort_nominal[r];
      lendable[r] += fl.subtree[r];
    }
    ++fl.gen;
  }
  lendable_.Set(lendable);
  for (Team& t : teams)
    for (uint16_t f = 0; f < flavors.size(); ++f)
      for (int r = 0; r < kNumResources; ++r) t.tf[f].potential[r] = Potential(t, f, r);
  RebuildBorrowers();
  // A configuration change may make never-fit workloads fit: put them back in the queues;
  // every queue is scanned whole at the next round (never-fit classification).
  for (uint32_t ti = 0; ti < teams.size(); ++ti) {
    for (uint16_t f = 0; f < flavors.size(); ++f) {
      TeamFlavor& x = teams[ti].tf[f];
      for (uint32_t wi : x.never_fit) {
        Wl& w = wls[wi];
        w.pos = kNone;
        w.queued_cycle = static_cast<int32_t>(cycle);
        InsertPending(wi);
      }
      x.never_fit.clear();
      x.force = true;
    }
  }
}

}  // namespace hf::governance
