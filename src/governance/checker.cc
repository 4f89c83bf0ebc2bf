// The invariant checker. Deliberately written apart from engine.cc: its quota arithmetic
// is the "lending" formulation of the same rules (what borrowers use ≤ what lenders leave
// idle), not the engine's available()/potential() tree, so that a shared mistake is
// unlikely.
#include "hyperfleet/governance/checker.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace hf::governance {

namespace {
constexpr int kR = 3;
}

InvariantChecker::InvariantChecker(std::vector<InstanceTypeCapacity> types,
                                   SchedulerPolicy policy)
    : policy_(std::move(policy)) {
  for (auto& t : types) types_[t.name] = t;
}

void InvariantChecker::SetPolicy(const SchedulerPolicy& policy) {
  policy_ = policy;
  ConfigChanged();
}

// A configuration change may make never-fit jobs fit: they are pending again.
void InvariantChecker::ConfigChanged() {
  for (auto& [type, seq] : changed_) ++seq;
  for (auto& [id, j] : jobs_)
    if (j.state == 2) j.state = 0;
}

int InvariantChecker::PriorityOf(const std::string& cls) const {
  for (const auto& pc : policy_.priority_classes)
    if (pc.name == cls || pc.name + "-priority" == cls) return pc.weight;
  return 0;
}

// One instance type's quota entry in accelerators, milli-vCPU and MiB (HyperPod's Count or
// ratio fill; explicit fields win).
InvariantChecker::Amount InvariantChecker::Converted(const QuotaResource& q) const {
  const InstanceTypeCapacity& it = types_.at(q.instance_type);
  const double inst[kR] = {static_cast<double>(it.accelerators), it.vcpus * 1000.0,
                           std::round(it.memory_gib * 1024.0)};
  Amount out;
  double frac = -1;
  if (q.count) {
    for (int r = 0; r < kR; ++r) out.a[r] = *q.count * static_cast<int64_t>(inst[r]);
  } else if (q.accelerators) {
    frac = inst[0] > 0 ? *q.accelerators / inst[0] : 0;
    out.a[1] = static_cast<int64_t>(frac * inst[1]);
    out.a[2] = static_cast<int64_t>(frac * inst[2]);
  } else if (q.vcpu) {
    frac = inst[1] > 0 ? *q.vcpu * 1000 / inst[1] : 0;
    out.a[2] = static_cast<int64_t>(frac * inst[2]);
  } else if (q.memory_gib) {
    frac = inst[2] > 0 ? *q.memory_gib * 1024 / inst[2] : 0;
    out.a[1] = static_cast<int64_t>(frac * inst[1]);
  }
  if (q.accelerators) out.a[0] = static_cast<int64_t>(std::floor(*q.accelerators));
  if (q.vcpu) out.a[1] = static_cast<int64_t>(std::floor(*q.vcpu * 1000));
  if (q.memory_gib) out.a[2] = static_cast<int64_t>(std::floor(*q.memory_gib * 1024));
  return out;
}

void InvariantChecker::UpsertQuota(const TeamQuota& q) {
  ConfigChanged();
  Quota& t = teams_[q.team];
  t.exists = true;
  t.active = q.active;
  t.strategy = q.strategy;
  t.preempt = q.preempt_team_tasks;
  t.weight = q.fair_share_weight;
  t.nominal.clear();
  t.borrow.clear();
  for (const auto& qr : q.resources) {
    const Amount n = Converted(qr);
    t.nominal[qr.instance_type] = n;
    Amount b;
    if (q.strategy == SharingStrategy::kLendAndBorrow)
      for (int r = 0; r < kR; ++r) b.a[r] = n.a[r] * q.borrow_limit_percent / 100;
    t.borrow[qr.instance_type] = b;
  }
  if (q.strategy == SharingStrategy::kLendAndBorrow) {
    for (const auto& qr : q.absolute_borrow_limits) {
      const Amount abs = Converted(qr);
      Amount& b = t.borrow[qr.instance_type];
      if (qr.count || qr.accelerators) b.a[0] = abs.a[0];
      if (qr.count || qr.vcpu) b.a[1] = abs.a[1];
      if (qr.count || qr.memory_gib) b.a[2] = abs.a[2];
    }
  }
}

void InvariantChecker::RemoveQuota(const std::string& team) {
  ConfigChanged();
  Quota& t = teams_[team];
  t.exists = false;
  t.nominal.clear();
  t.borrow.clear();
}

void InvariantChecker::Submitted(const WorkloadSpec& s) {
  Job j;
  j.team = s.team;
  j.type = s.instance_type;
  const InstanceTypeCapacity& it = types_.at(s.instance_type);
  const int64_t inst[kR] = {it.accelerators, int64_t{it.vcpus} * 1000,
                            static_cast<int64_t>(std::round(it.memory_gib * 1024.0))};
  for (int r = 0; r < kR; ++r) j.req.a[r] = (s.per_pod ? (*s.per_pod)[r] : inst[r]) * s.count;
  j.prio = PriorityOf(s.priority_class);
  j.ts = s.submit_time_ms;
  jobs_[s.id] = j;
  ++teams_[s.team].pending;
  pending_[{s.team, s.instance_type}].insert(s.id);
}

void InvariantChecker::Removed(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Fail(absl::StrCat("removed unknown job ", id));
  if (it->second.state == 1) {
    Add(it->second.team, it->second.type, it->second.req, -1);
    ++changed_[""];
  } else {
    --teams_[it->second.team].pending;
  }
  pending_[{it->second.team, it->second.type}].erase(id);
  jobs_.erase(it);
}

void InvariantChecker::Fail(std::string msg) {
  ++violations_;
  if (messages_.size() < 50) messages_.push_back(absl::StrCat("cycle ", cycle_, ": ", msg));
}

InvariantChecker::Amount InvariantChecker::NominalOf(const std::string& team,
                                                     const std::string& type) const {
  auto t = teams_.find(team);
  if (t == teams_.end() || !t->second.exists || !t->second.active) return {};
  auto n = t->second.nominal.find(type);
  return n == t->second.nominal.end() ? Amount{} : n->second;
}

InvariantChecker::Amount InvariantChecker::BorrowOf(const std::string& team,
                                                    const std::string& type) const {
  auto t = teams_.find(team);
  if (t == teams_.end() || !t->second.exists || !t->second.active) return {};
  auto n = t->second.borrow.find(type);
  return n == t->second.borrow.end() ? Amount{} : n->second;
}

InvariantChecker::Amount InvariantChecker::UsageOf(const std::string& team,
                                                   const std::string& type) const {
  auto t = teams_.find(team);
  if (t == teams_.end()) return {};
  auto u = t->second.usage.find(type);
  return u == t->second.usage.end() ? Amount{} : u->second;
}

void InvariantChecker::Add(const std::string& team, const std::string& type, const Amount& req,
                           int sign) {
  Amount& u = teams_[team].usage[type];
  for (int r = 0; r < kR; ++r) {
    u.a[r] += sign * req.a[r];
    if (u.a[r] < 0) Fail(absl::StrCat("negative usage of ", team, " on ", type));
  }
}

// Borrowers use no more than lenders leave idle (plus unallocated capacity when
// IdleResourceSharing is on): Σ max(0, usage − nominal) ≤ Σ_lenders max(0, nominal − usage)
// + idle. DontLend teams are no lenders.
bool InvariantChecker::CohortOk(const std::string& type, std::string* why) const {
  return CohortExcess(type, why) <= 0;
}

int64_t InvariantChecker::CohortExcess(const std::string& type, std::string* why) const {
  const InstanceTypeCapacity& it = types_.at(type);
  const int64_t cap[kR] = {it.accelerators * it.instances, int64_t{it.vcpus} * 1000 * it.instances,
                           static_cast<int64_t>(std::round(it.memory_gib * 1024.0)) *
                               it.instances};
  int64_t borrowed[kR] = {0, 0, 0}, idle[kR] = {0, 0, 0}, nominal_sum[kR] = {0, 0, 0};
  for (const auto& [name, t] : teams_) {
    const Amount n = NominalOf(name, type);
    const Amount u = UsageOf(name, type);
    const bool lends = t.exists && t.active && t.strategy != SharingStrategy::kDontLend;
    for (int r = 0; r < kR; ++r) {
      borrowed[r] += std::max<int64_t>(0, u.a[r] - n.a[r]);
      if (lends) idle[r] += std::max<int64_t>(0, n.a[r] - u.a[r]);
      nominal_sum[r] += n.a[r];
    }
  }
  int64_t worst = std::numeric_limits<int64_t>::min();
  for (int r = 0; r < kR; ++r) {
    if (policy_.idle_resource_sharing) idle[r] += std::max<int64_t>(0, cap[r] - nominal_sum[r]);
    if (borrowed[r] > idle[r] && why)
      *why = absl::StrCat(type, " resource ", r, ": borrowed ", borrowed[r],
                          " > lendable idle ", idle[r]);
    worst = std::max(worst, borrowed[r] - idle[r]);
  }
  return worst;
}

bool InvariantChecker::TeamOk(const std::string& team, const std::string& type,
                              const Amount& req, std::string* why) const {
  const Amount n = NominalOf(team, type), b = BorrowOf(team, type), u = UsageOf(team, type);
  for (int r = 0; r < kR; ++r) {
    if (req.a[r] > 0 && u.a[r] > n.a[r] + b.a[r]) {
      if (why)
        *why = absl::StrCat(team, " on ", type, " resource ", r, ": usage ", u.a[r],
                            " > nominal ", n.a[r], " + borrow limit ", b.a[r]);
      return false;
    }
  }
  return true;
}

// Dominant borrowed share of `team` (with `delta` on `type`) ÷ weight; zero-weight
// borrowers rank above every weighted one (1e12 + unweighted share).
double InvariantChecker::Share(const std::string& team, const std::string& type,
                               const Amount& delta) const {
  double lendable[kR] = {0, 0, 0};
  int64_t nominal_sum[kR] = {0, 0, 0};
  for (const auto& [tname, it] : types_) {
    for (const auto& [name, t] : teams_) {
      const Amount n = NominalOf(name, tname);
      const bool lends = t.exists && t.active && t.strategy != SharingStrategy::kDontLend;
      for (int r = 0; r < kR; ++r) {
        if (lends) lendable[r] += n.a[r];
        nominal_sum[r] += n.a[r];
      }
    }
    if (policy_.idle_resource_sharing) {
      const int64_t cap[kR] = {it.accelerators * it.instances,
                               int64_t{it.vcpus} * 1000 * it.instances,
                               static_cast<int64_t>(std::round(it.memory_gib * 1024.0)) *
                                   it.instances};
      for (int r = 0; r < kR; ++r) lendable[r] += std::max<int64_t>(0, cap[r] - nominal_sum[r]);
    }
    for (int r = 0; r < kR; ++r) nominal_sum[r] = 0;
  }
  double best = 0;
  const Quota& q = teams_.at(team);
  for (int r = 0; r < kR; ++r) {
    int64_t borrowed = 0;
    for (const auto& [tname, it] : types_) {
      Amount u = UsageOf(team, tname);
      if (tname == type) u.a[r] += delta.a[r];
      borrowed += std::max<int64_t>(0, u.a[r] - NominalOf(team, tname).a[r]);
    }
    if (borrowed > 0) best = std::max(best, lendable[r] > 0 ? borrowed / lendable[r] : 1e9);
  }
  if (best == 0) return 0;
  return q.weight == 0 ? 1e12 + best : best / q.weight;
}

bool InvariantChecker::FitsUnusedNominal(const WorkloadSpec& s) const {
  auto t = teams_.find(s.team);
  if (t == teams_.end() || !t->second.exists || !t->second.active) return false;
  if (!t->second.nominal.contains(s.instance_type)) return false;
  auto j = jobs_.find(s.id);
  if (j == jobs_.end()) return false;
  const Amount n = NominalOf(s.team, s.instance_type), u = UsageOf(s.team, s.instance_type);
  for (int r = 0; r < kR; ++r)
    if (j->second.req.a[r] > 0 && u.a[r] + j->second.req.a[r] > n.a[r]) return false;
  return true;
}

void InvariantChecker::CheckCycle(const CycleResult& res, const Engine& engine, bool full) {
  ++cycle_;
  std::set<std::pair<std::string, std::string>> touched;
  std::vector<uint64_t> admitted_now;  // admitted without preemption
  std::set<std::string> evicted_types;
  for (const Admission& a : res.admitted) {
    auto jit = jobs_.find(a.id);
    if (jit == jobs_.end()) {
      Fail(absl::StrCat("admitted unknown job ", a.id));
      continue;
    }
    Job& w = jit->second;
    if (w.state != 0) {
      Fail(absl::StrCat("job ", a.id, " admitted while not pending (state ", w.state, ")"));
      continue;
    }
    const Quota& tq = teams_[w.team];
    if (!tq.exists || !tq.active) Fail(absl::StrCat("inactive team ", w.team, " admitted ", a.id));
    // Whether the preemptor is within nominal after admission, judged before any eviction
    // (as the engine decides which candidates it may take).
    bool within_nominal = true;
    {
      const Amount n = NominalOf(w.team, w.type), u = UsageOf(w.team, w.type);
      for (int r = 0; r < kR; ++r)
        if (w.req.a[r] > 0 && u.a[r] + w.req.a[r] > n.a[r]) within_nominal = false;
    }
    Amount own_victims;
    for (const Preemption& p : a.victims)
      if (auto v = jobs_.find(p.victim); v != jobs_.end() && v->second.team == w.team)
        for (int r = 0; r < kR; ++r) own_victims.a[r] += v->second.req.a[r];
    preempted_by_.erase(a.id);  // only this admission's victims count
    for (const Preemption& p : a.victims) {
      auto vit = jobs_.find(p.victim);
      if (vit == jobs_.end() || vit->second.state != 1) {
        Fail(absl::StrCat("victim ", p.victim, " of ", a.id, " is not admitted"));
        continue;
      }
      Job& v = vit->second;
      if (v.type != w.type) Fail(absl::StrCat("victim ", p.victim, " on another type"));
      if (v.team == w.team) {
        if (tq.preempt != PreemptTeamTasks::kLowerPriority)
          Fail(absl::StrCat("team ", w.team, " has PreemptTeamTasks=Never but ", a.id,
                            " preempted ", p.victim));
        if (!(v.prio < w.prio))
          Fail(absl::StrCat(a.id, " (prio ", w.prio, ") preempted same-team ", p.victim,
                            " (prio ", v.prio, ")"));
        if (p.reason != PreemptionReason::kInClusterQueue)
          Fail(absl::StrCat("same-team victim ", p.victim, " with reason ",
                            std::string(PreemptionReasonName(p.reason))));
      } else {
        // The victim's team must be borrowing on a resource the preemptor needs.
        const Amount n = NominalOf(v.team, v.type), u = UsageOf(v.team, v.type);
        bool borrowing = false;
        for (int r = 0; r < kR; ++r)
          if (w.req.a[r] > 0 && u.a[r] > n.a[r]) borrowing = true;
        if (!borrowing)
          Fail(absl::StrCat(a.id, " preempted ", p.victim, " of ", v.team,
                            " which is not borrowing"));
        if (within_nominal) {
          if (p.reason != PreemptionReason::kReclaim)
            Fail(absl::StrCat("reclaim victim ", p.victim, " with reason ",
                              std::string(PreemptionReasonName(p.reason))));
        } else if (!policy_.fair_share) {
          Fail(absl::StrCat(a.id, " borrows yet preempted ", p.victim, " of another team"));
        } else {
          Amount delta = w.req;
          for (int r = 0; r < kR; ++r) delta.a[r] -= own_victims.a[r];
          const double mine = Share(w.team, w.type, delta);
          const double theirs = Share(v.team, v.type, Amount{});
          if (mine > theirs * (1 + 1e-9) + 1e-12)
          {
            std::string all;
            for (const Preemption& q : a.victims)
              absl::StrAppend(&all, " ", q.victim, "/", jobs_[q.victim].team);
            Fail(absl::StrCat(a.id, " of ", w.team, " (share ", mine, ") preempted ", p.victim,
                              " of ", v.team, " (share ", theirs, ") by fair sharing; victims",
                              all));
          }
          if (p.reason != PreemptionReason::kFairSharing)
            Fail(absl::StrCat("fair-share victim ", p.victim, " with reason ",
                              std::string(PreemptionReasonName(p.reason))));
        }
        // Ping-pong (fair sharing): the victim had itself evicted this preemptor by fair
        // sharing, and nothing else was admitted or released anywhere since (shares span
        // every type; Kueue's fair_sharing.md guarantee holds for an unchanged state). A lender reclaiming its nominal quota
        // is not ping-pong.
        if (p.reason == PreemptionReason::kFairSharing) {
          if (auto pb = preempted_by_.find(p.victim);
              pb != preempted_by_.end() && pb->second.first == changed_[""] &&
              pb->second.second.contains(absl::StrCat(a.id)))
            Fail(absl::StrCat("ping-pong: ", p.victim, " had evicted ", a.id,
                              " and is now evicted by it"));
          preempted_by_[a.id].first = changed_[""] + 1;  // after this admission
          preempted_by_[a.id].second.insert(absl::StrCat(p.victim));
        }
      }
      Add(v.team, v.type, v.req, -1);
      v.state = 0;
      pending_[{v.team, v.type}].insert(p.victim);
      v.evicted_cycle = cycle_;
      ++teams_[v.team].pending;
      touched.insert({v.team, v.type});
    }
    // Admit and check capacity. A cohort already over (a quota shrank: over-admission is
    // allowed and nothing is evicted) may not get further over.
    const int64_t excess_before = CohortExcess(w.type, nullptr);
    Add(w.team, w.type, w.req, +1);
    ++changed_[""];
    w.state = 1;
    pending_[{w.team, w.type}].erase(a.id);
    --teams_[w.team].pending;
    touched.insert({w.team, w.type});
    if (a.victims.empty()) admitted_now.push_back(a.id);
    else evicted_types.insert(w.type);
    std::string why;
    if (!TeamOk(w.team, w.type, w.req, &why)) Fail(absl::StrCat("admitting ", a.id, ": ", why));
    if (const int64_t excess = CohortExcess(w.type, &why);
        excess > 0 && excess > excess_before)
      Fail(absl::StrCat("admitting ", a.id, ": ", why));
    if (tq.strategy == SharingStrategy::kLend) {
      const Amount n = NominalOf(w.team, w.type), u = UsageOf(w.team, w.type);
      for (int r = 0; r < kR; ++r)
        if (w.req.a[r] > 0 && u.a[r] > n.a[r])
          Fail(absl::StrCat("Lend-only team ", w.team, " above nominal after ", a.id));
    }
    // Minimality: with any one victim back, the preemptor must no longer fit.
    for (const Preemption& p : a.victims) {
      auto vit = jobs_.find(p.victim);
      if (vit == jobs_.end()) continue;
      const Job& v = vit->second;
      Add(v.team, v.type, v.req, +1);
      if (TeamOk(w.team, w.type, w.req, nullptr) && CohortOk(w.type, nullptr) &&
          TeamOk(v.team, v.type, v.req, nullptr))
        Fail(absl::StrCat("victim ", p.victim, " of ", a.id, " was not needed"));
      Add(v.team, v.type, v.req, -1);
    }
  }
  // Never-fit classifications must exceed what the team could ever get.
  for (uint64_t id : res.never_fits) {
    auto jit = jobs_.find(id);
    if (jit == jobs_.end() || jit->second.state != 0) {
      Fail(absl::StrCat("never-fit job ", id, " is not pending"));
      continue;
    }
    Job& j = jit->second;
    const Quota& q = teams_[j.team];
    bool exceeds = !q.nominal.contains(j.type);
    if (!exceeds) {
      // What lenders could ever lend: every lender's nominal plus unallocated capacity.
      const InstanceTypeCapacity& it = types_.at(j.type);
      const int64_t cap[kR] = {it.accelerators * it.instances,
                               int64_t{it.vcpus} * 1000 * it.instances,
                               static_cast<int64_t>(std::round(it.memory_gib * 1024.0)) *
                                   it.instances};
      int64_t pool[kR] = {0, 0, 0}, nominal_sum[kR] = {0, 0, 0};
      for (const auto& [name, t] : teams_) {
        const Amount n = NominalOf(name, j.type);
        for (int r = 0; r < kR; ++r) {
          nominal_sum[r] += n.a[r];
          if (t.exists && t.active && t.strategy != SharingStrategy::kDontLend) pool[r] += n.a[r];
        }
      }
      const Amount n = NominalOf(j.team, j.type), b = BorrowOf(j.team, j.type);
      for (int r = 0; r < kR; ++r) {
        if (policy_.idle_resource_sharing) pool[r] += std::max<int64_t>(0, cap[r] - nominal_sum[r]);
        if (q.strategy == SharingStrategy::kDontLend) pool[r] += n.a[r];
        const int64_t most = std::min(n.a[r] + b.a[r], pool[r]);
        if (j.req.a[r] > 0 && j.req.a[r] > most) exceeds = true;
      }
    }
    if (!exceeds) Fail(absl::StrCat("job ", id, " classified NeverFits but could fit"));
    j.state = 2;
  }
  // Usage conservation against the engine, for every touched team and type.
  for (const auto& [team, type] : touched) {
    const Resources e = engine.Usage(team, type);
    const Amount u = UsageOf(team, type);
    for (int r = 0; r < kR; ++r)
      if (e[r] != u.a[r])
        Fail(absl::StrCat("usage of ", team, " on ", type, " resource ", r, ": engine ", e[r],
                          ", sum of admitted ", u.a[r]));
  }
  if (!full) return;
  // Lender reclaim: no pending job fits its team's unused nominal quota. Only queues whose
  // team has unused nominal quota need a look.
  for (const auto& [queue, ids] : pending_) {
    if (ids.empty()) continue;
    const auto& [team, type] = queue;
    const Quota& q = teams_[team];
    if (!q.exists || !q.active || !q.nominal.contains(type)) continue;
    const Amount n = NominalOf(team, type), u = UsageOf(team, type);
    bool room = false;
    for (int r = 0; r < kR; ++r) room |= n.a[r] > u.a[r];
    if (!room) continue;
    for (uint64_t id : ids) {
      const Job& j = jobs_.at(id);
      if (j.state != 0 || j.evicted_cycle == cycle_) continue;
      bool fits = true;
      for (int r = 0; r < kR; ++r)
        if (j.req.a[r] > 0 && u.a[r] + j.req.a[r] > n.a[r]) fits = false;
      if (fits)
        Fail(absl::StrCat("job ", id, " of ", team, " fits the team's unused nominal quota "
                          "but stays pending"));
    }
  }
  // Ordering: within a cycle without evictions on the type, free quota only shrinks, so
  // an earlier job no larger than one admitted without preemption must have been admitted.
  for (uint64_t aid : admitted_now) {
    const Job& a = jobs_.at(aid);
    if (a.state != 1 || evicted_types.contains(a.type)) continue;
    for (uint64_t id : pending_[{a.team, a.type}]) {
      const Job& j = jobs_.at(id);
      if (j.state != 0 || j.evicted_cycle == cycle_) continue;
      const bool ahead =
          j.prio > a.prio || (j.prio == a.prio && (j.ts < a.ts || (j.ts == a.ts && id < aid)));
      if (!ahead) continue;
      bool smaller = true;
      for (int r = 0; r < kR; ++r)
        if (j.req.a[r] > a.req.a[r]) smaller = false;
      if (smaller)
        Fail(absl::StrCat("job ", aid, " admitted past earlier, no larger job ", id, " of ",
                          a.team));
    }
  }
}

std::vector<InvariantChecker::TeamView> InvariantChecker::Teams() const {
  std::vector<TeamView> out;
  for (const auto& [name, t] : teams_) {
    out.push_back({name, t.weight, t.exists && t.active, t.exists ? Share(name, "", {}) : 0,
                   t.pending});
  }
  return out;
}

}  // namespace hf::governance
