// The invariant checker's per-cycle steps (InvariantChecker::CheckCycle in checker.cc runs
// them in this order): each admission with its victims (invariants 1, 2, 5, 6, 7, 11, 13),
// the never-fit classifications, usage against the engine (3), the lender-reclaim check of
// the queues that are due (8), and the ordering within a team (4). checker.cc's header
// comment says why looking only at what a cycle touched is sound.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "hyperfleet/governance/checker.h"

namespace hf::governance {
namespace {
constexpr int kR = kNumResources;
}  // namespace

void InvariantChecker::CheckAdmission(const Admission& a, CycleNotes& notes) {
  auto jit = jobs_.find(a.id);
  if (jit == jobs_.end()) {
    Fail(absl::StrCat("admitted unknown job ", a.id));
    return;
  }
  Job& w = jit->second;
  if (w.state != 0) {
    Fail(absl::StrCat("job ", a.id, " admitted while not pending (state ", w.state, ")"));
    return;
  }
  const Quota& tq = teams_[w.team];
  if (!tq.exists || !tq.active) Fail(absl::StrCat("inactive team ", tq.name, " admitted ", a.id));
  // Whether the preemptor is within nominal after admission, judged before any eviction
  // (as the engine decides which candidates it may take).
  bool within_nominal = true;
  {
    const Amount n = NominalOf(w.team, w.type), u = tq.usage[w.type];
    for (int r = 0; r < kR; ++r)
      if (w.req.a[r] > 0 && u.a[r] + w.req.a[r] > n.a[r]) within_nominal = false;
  }
  Amount own_victims;
  for (const Preemption& p : a.victims)
    if (auto v = jobs_.find(p.victim); v != jobs_.end() && v->second.team == w.team)
      for (int r = 0; r < kR; ++r) own_victims.a[r] += v->second.req.a[r];
  preempted_by_.erase(a.id);  // only this admission's victims count
  for (const Preemption& p : a.victims) CheckEviction(a, w, p, within_nominal, own_victims, notes);
  CheckAdmitted(a, w, notes);
}

// One victim of admission `a` (of job `w`): legal for its team, then evicted.
void InvariantChecker::CheckEviction(const Admission& a, const Job& w, const Preemption& p,
                                     bool within_nominal, const Amount& own_victims,
                                     CycleNotes& notes) {
  auto vit = jobs_.find(p.victim);
  if (vit == jobs_.end() || vit->second.state != 1) {
    Fail(absl::StrCat("victim ", p.victim, " of ", a.id, " is not admitted"));
    return;
  }
  Job& v = vit->second;
  if (v.type != w.type) Fail(absl::StrCat("victim ", p.victim, " on another type"));
  if (v.team == w.team) {
    const Quota& tq = teams_[w.team];
    if (tq.preempt != PreemptTeamTasks::kLowerPriority)
      Fail(absl::StrCat("team ", tq.name, " has PreemptTeamTasks=Never but ", a.id,
                        " preempted ", p.victim));
    if (!(v.prio < w.prio))
      Fail(absl::StrCat(a.id, " (prio ", w.prio, ") preempted same-team ", p.victim,
                        " (prio ", v.prio, ")"));
    if (p.reason != PreemptionReason::kInClusterQueue)
      Fail(absl::StrCat("same-team victim ", p.victim, " with reason ",
                        std::string(PreemptionReasonName(p.reason))));
  } else {
    CheckOtherTeamVictim(a, w, v, p, within_nominal, own_victims);
  }
  Add(v.team, v.type, v.req, -1);
  --admitted_;
  v.state = 0;
  teams_[v.team].queue[v.type].insert(p.victim);
  v.evicted_cycle = cycle_;
  ++teams_[v.team].pending;
  notes.evicted_queues.emplace_back(v.team, v.type);
}

// A victim of another team: it borrows what the preemptor needs, and its reason is
// reclaim (the preemptor stays within nominal) or fair sharing (a larger weighted share),
// without ping-pong.
void InvariantChecker::CheckOtherTeamVictim(const Admission& a, const Job& w, const Job& v,
                                            const Preemption& p, bool within_nominal,
                                            const Amount& own_victims) {
  const Quota& tq = teams_[w.team];
  // The victim's team must be borrowing on a resource the preemptor needs.
  const Amount n = NominalOf(v.team, v.type), u = teams_[v.team].usage[v.type];
  bool borrowing = false;
  for (int r = 0; r < kR; ++r)
    if (w.req.a[r] > 0 && u.a[r] > n.a[r]) borrowing = true;
  if (!borrowing)
    Fail(absl::StrCat(a.id, " preempted ", p.victim, " of ", teams_[v.team].name,
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
    const auto mine_rank = ShareRank(w.team, w.type, delta);
    const auto theirs_rank = ShareRank(v.team, v.type, Amount{});
    const double mine = Share(w.team, w.type, delta);
    const double theirs = Share(v.team, v.type, Amount{});
    if (mine_rank.first > theirs_rank.first ||
        (mine_rank.first == theirs_rank.first &&
         mine_rank.second > theirs_rank.second * (1 + 1e-9) + 1e-12)) {
      std::string all;
      for (const Preemption& q : a.victims) {
        auto qj = jobs_.find(q.victim);
        absl::StrAppend(&all, " ", q.victim, "/",
                        qj == jobs_.end() ? "?" : teams_[qj->second.team].name);
      }
      Fail(absl::StrCat(a.id, " of ", tq.name, " (share ", mine, ") preempted ", p.victim,
                        " of ", teams_[v.team].name, " (share ", theirs,
                        ") by fair sharing; victims", all));
    }
    if (p.reason != PreemptionReason::kFairSharing)
      Fail(absl::StrCat("fair-share victim ", p.victim, " with reason ",
                        std::string(PreemptionReasonName(p.reason))));
  }
  // Ping-pong (fair sharing): the victim had itself evicted this preemptor by fair
  // sharing, and nothing else was admitted or released anywhere since (shares span
  // every type; Kueue's fair_sharing.md guarantee holds for an unchanged state). A
  // lender reclaiming its nominal quota is not ping-pong.
  if (p.reason == PreemptionReason::kFairSharing) {
    if (auto pb = preempted_by_.find(p.victim);
        pb != preempted_by_.end() && pb->second.first == changes_ &&
        pb->second.second.contains(a.id))
      Fail(absl::StrCat("ping-pong: ", p.victim, " had evicted ", a.id,
                        " and is now evicted by it"));
    preempted_by_[a.id].first = changes_ + 1;  // after this admission
    preempted_by_[a.id].second.insert(p.victim);
  }
}

// Admits `w` and checks capacity, lending and the minimality of its victims.
void InvariantChecker::CheckAdmitted(const Admission& a, Job& w, CycleNotes& notes) {
  const Quota& tq = teams_[w.team];
  // A cohort already over (a quota shrank: over-admission is allowed and nothing is
  // evicted) may not get further over.
  const int64_t excess_before = CohortExcess(w.type, nullptr);
  Add(w.team, w.type, w.req, +1);
  ++admitted_;
  ++changes_;
  w.state = 1;
  teams_[w.team].queue[w.type].erase(a.id);
  --teams_[w.team].pending;
  if (a.victims.empty()) notes.admitted_now.push_back(a.id);
  else notes.evicted_types[w.type] = 1;
  std::string why;
  if (!TeamOk(w.team, w.type, w.req, &why)) Fail(absl::StrCat("admitting ", a.id, ": ", why));
  if (const int64_t excess = CohortExcess(w.type, &why); excess > 0 && excess > excess_before)
    Fail(absl::StrCat("admitting ", a.id, ": ", why));
  if (tq.strategy == SharingStrategy::kLend) {
    const Amount n = NominalOf(w.team, w.type), u = tq.usage[w.type];
    for (int r = 0; r < kR; ++r)
      if (w.req.a[r] > 0 && u.a[r] > n.a[r])
        Fail(absl::StrCat("Lend-only team ", tq.name, " above nominal after ", a.id));
  }
  // Minimality: with any one victim back, the preemptor must no longer fit.
  for (const Preemption& p : a.victims) {
    auto vit = jobs_.find(p.victim);
    if (vit == jobs_.end()) continue;
    const Job& v = vit->second;
    Add(v.team, v.type, v.req, +1);
    if (TeamOk(w.team, w.type, w.req, nullptr) && CohortOk(w.type) &&
        TeamOk(v.team, v.type, v.req, nullptr))
      Fail(absl::StrCat("victim ", p.victim, " of ", a.id, " was not needed"));
    Add(v.team, v.type, v.req, -1);
  }
}

// Never-fit classifications must exceed what the team could ever get.
void InvariantChecker::CheckNeverFits(const std::vector<uint64_t>& never_fits) {
  for (uint64_t id : never_fits) {
    auto jit = jobs_.find(id);
    if (jit == jobs_.end() || jit->second.state != 0) {
      Fail(absl::StrCat("never-fit job ", id, " is not pending"));
      continue;
    }
    Job& j = jit->second;
    const Quota& q = teams_[j.team];
    bool exceeds = !q.has_nominal[j.type];
    if (!exceeds) {
      // What lenders could ever lend: every lender's nominal plus unallocated capacity.
      const Amount n = NominalOf(j.team, j.type), b = BorrowOf(j.team, j.type);
      for (int r = 0; r < kR; ++r) {
        int64_t pool = tally_[j.type].lendable[r] + IdleCapacity(j.type, r);
        if (q.strategy == SharingStrategy::kDontLend) pool += n.a[r];
        const int64_t most = std::min(n.a[r] + b.a[r], pool);
        if (j.req.a[r] > 0 && j.req.a[r] > most) exceeds = true;
      }
    }
    if (!exceeds) Fail(absl::StrCat("job ", id, " classified NeverFits but could fit"));
    j.state = 2;
  }
}

// Usage conservation against the engine: every team and type in a full check, else those
// whose usage changed since the last check.
void InvariantChecker::CompareUsage(const Engine& engine, bool full) {
  auto compare = [&](int team, int type) {
    const Resources e = engine.Usage(teams_[team].name, types_[type].name);
    const Amount& u = teams_[team].usage[type];
    for (int r = 0; r < kR; ++r)
      if (e[r] != u.a[r])
        Fail(absl::StrCat("usage of ", teams_[team].name, " on ", types_[type].name,
                          " resource ", r, ": engine ", e[r], ", sum of admitted ", u.a[r]));
  };
  if (full) {
    for (size_t t = 0; t < teams_.size(); ++t)
      for (size_t ty = 0; ty < types_.size(); ++ty)
        compare(static_cast<int>(t), static_cast<int>(ty));
  } else {
    for (const auto& [t, ty] : dirty_)
      if (teams_[t].flags[ty] & kUsageDirty) compare(t, ty);
  }
}

// Lender reclaim, on every queue or on those that changed since the last check; then the
// queues of this cycle's victims (exempt in it) are due in the next check.
void InvariantChecker::CheckDueQueues(bool every_queue, const CycleNotes& notes) {
  if (every_queue) {
    for (size_t t = 0; t < teams_.size(); ++t)
      for (size_t ty = 0; ty < types_.size(); ++ty)
        CheckReclaim(static_cast<int>(t), static_cast<int>(ty));
  } else {
    for (const auto& [t, ty] : dirty_)
      if (teams_[t].flags[ty] & kReclaimDirty) CheckReclaim(t, ty);
  }
  for (const auto& [t, ty] : dirty_) teams_[t].flags[ty] = 0;
  dirty_.clear();
  all_dirty_ = false;
  for (const auto& [t, ty] : notes.evicted_queues) Mark(t, ty, kReclaimDirty);
}

// Ordering: within a cycle without evictions on the type, free quota only shrinks, so
// an earlier job no larger than one admitted without preemption must have been admitted.
void InvariantChecker::CheckOrdering(const CycleNotes& notes) {
  for (uint64_t aid : notes.admitted_now) {
    const Job& a = jobs_.at(aid);
    if (a.state != 1 || notes.evicted_types[a.type]) continue;
    for (uint64_t id : teams_[a.team].queue[a.type]) {
      auto jit = jobs_.find(id);
      if (jit == jobs_.end()) continue;
      const Job& j = jit->second;
      if (j.state != 0 || j.evicted_cycle == cycle_) continue;
      const bool ahead =
          j.prio > a.prio || (j.prio == a.prio && (j.ts < a.ts || (j.ts == a.ts && id < aid)));
      if (!ahead) continue;
      bool smaller = true;
      for (int r = 0; r < kR; ++r)
        if (j.req.a[r] > a.req.a[r]) smaller = false;
      if (smaller)
        Fail(absl::StrCat("job ", aid, " admitted past earlier, no larger job ", id, " of ",
                          teams_[a.team].name));
    }
  }
}

}  // namespace hf::governance
