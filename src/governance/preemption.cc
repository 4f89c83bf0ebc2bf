// Victim searches: which admitted workloads to evict so that a pending one fits
// (docs/governance.md "A cycle"; Kueue v0.19 preemption.go and fairPreemptions).
// TryPreempt gates a search, runs it (ClassicSearch with FairShare Disabled, FairSearch with
// it Enabled), then fills back and re-checks the fair-sharing victims. A search changes
// usage by trial steps (TrialUsage) and commits only on success, through Evict.
#include <algorithm>
#include <queue>

#include "governance/engine_impl.h"

namespace hf::governance {

// Appends team ti's admitted workloads of f that `keep`(AdmittedKey) selects.
template <class Keep>
void Engine::Impl::AppendCands(uint32_t ti, uint16_t f, bool own, std::vector<Cand>& out,
                               Keep&& keep) const {
  const TeamFlavor& x = teams[ti].tf[f];
  for (size_t k = 0; k < x.admitted.size(); ++k) {
    const AdmittedKey& key = x.admitted_keys[k];
    if (keep(key)) out.push_back({key.admit_seq, key.prio, x.admitted[k], key.shape, ti, own});
  }
}

// Whether the team of borrower-set entry k may give victims to a job of team ti needing
// `req` on f: another team, with admitted workloads, borrowing on a resource the job needs
// (reclaimWithinCohort: Any); for a borrowing job under fair sharing (`by_share`) also
// holding a workload whose eviction leaves it at nominal (FairSearch).
inline bool Engine::Impl::IsTargetTeam(const ShareKey& k, uint32_t ti, uint16_t f,
                                const Resources& req, bool by_share) const {
  if (k.team == ti) return false;
  const Team& u = teams[k.team];
  if (u.tf[f].admitted.empty() || !BorrowingOn(u, f, req)) return false;
  return !by_share || HasFairVictimSize(u, f, req);
}

// Fair-sharing target selection (Kueue v0.19 fairPreemptions): visit teams by descending
// weighted share; the preemptor's own lower-priority workloads go unconditionally, other
// teams' ones unconditionally when the preemptor stays within nominal (lender reclaim),
// else by LessThanOrEqualToFinalShare, then LessThanInitialShare (one per team).
// `mine_floor` is the preemptor's team's share with the request alone (used when it
// borrows; see Reach). Victims are taken through Impl::TakeVictim.
class Engine::Impl::FairSearch {
 public:
  FairSearch(Impl& m, uint32_t wi, bool within_nominal, const Share& mine_floor)
      : m_(m), ti_(m.wls[wi].team), f_(m.wls[wi].flavor), t_(m.teams[ti_]),
        req_(m.ReqOf(m.wls[wi])), within_nominal_(within_nominal), by_share_(!within_nominal),
        mine_floor_(mine_floor), buf_(m.scratch_cands_), targets_(m.scratch_targets_),
        borrowers_(m.flavors[f_].borrowers), next_(borrowers_.begin()) {}

  // Runs both strategies over `same` (the preemptor's own candidates) and the borrower
  // set's teams; true when the preemptor fits.
  bool Run(const std::vector<Cand>& same) {
    // A target's candidates form a heap whose top is the first in CandidatesOrdering: a
    // search usually takes a few of a team's many admitted workloads, so ordering them all
    // (n log n per pick) is wasted. The heaps share one buffer: a target's is at
    // [begin, begin + left); other teams' are copied when their team is first picked.
    buf_.clear();
    targets_.clear();
    if (!same.empty()) {
      buf_.assign(same.begin(), same.end());
      std::make_heap(buf_.begin(), buf_.end(), CandAfter);
      targets_.push_back({ti_, 0, buf_.size()});
    }
    for (int strategy = 1; strategy <= 2; ++strategy) {
      Heap heap;
      for (uint32_t i = 0; i < targets_.size(); ++i)
        if (SizeOf(targets_[i]) > 0) heap.push(KeyOf(i));
      while (true) {
        if (m_.Fits(t_, f_, req_)) return true;
        Reach(heap);
        // The target with the largest share that still has candidates.
        if (heap.empty()) break;
        const Key top = heap.top();
        heap.pop();
        Visit(top, strategy, heap);
      }
    }
    return m_.Fits(t_, f_, req_);
  }

 private:
  using Target = FairTarget;
  // Targets by descending share, the preemptor's own team first on ties, then by team
  // index. Keys go stale as victims leave (the team's version moves): a stale top is
  // re-keyed and pushed back (lazy max-heap), so each step costs O(log targets).
  struct Key {
    Share share;
    uint32_t target;
    uint32_t rank;      // 0 for the own team, else 1 + team index
    uint64_t version;
    bool operator<(const Key& o) const {  // max-heap: "less" is served later
      const int c = Share::Cmp(share, o.share);
      if (c != 0) return c < 0;
      return rank > o.rank;
    }
  };
  using Heap = std::priority_queue<Key>;

  size_t SizeOf(const Target& tg) const {
    return tg.loaded ? tg.left : m_.teams[tg.team].tf[f_].admitted.size();
  }
  const Cand& Front(const Target& tg) const { return buf_[tg.begin]; }

  // Which of a target team's admitted workloads are candidates. For a borrowing preemptor
  // only those that may be fair-sharing victims now: the target's usage only falls during
  // the search, so those left out stay out (not admitted in this cycle, and leaving the
  // team at nominal; see PassedOver).
  bool Candidate(const Team& u, const AdmittedKey& key) const {
    return within_nominal_ || (key.admit_seq <= m_.cycle_first_seq &&
                               m_.StaysAtNominal(u, f_, req_, m_.shapes[key.shape]));
  }

  // Another team's target starts with its first candidate alone (one pass, no copy of the
  // rest): most targets are dropped after their first candidate fails a strategy.
  void LoadFront(Target& tg) {
    const Team& u = m_.teams[tg.team];
    const TeamFlavor& ux = u.tf[f_];
    tg.begin = buf_.size();
    tg.left = 0;
    tg.partial = true;
    for (size_t k = 0; k < ux.admitted.size(); ++k) {
      const AdmittedKey& key = ux.admitted_keys[k];
      if (!Candidate(u, key)) continue;
      const Cand c{key.admit_seq, key.prio, ux.admitted[k], key.shape, tg.team, false};
      if (tg.left == 0) {
        buf_.push_back(c);
        tg.left = 1;
      } else if (CandAfter(buf_[tg.begin], c)) {
        buf_[tg.begin] = c;
      }
    }
  }

  // Removes the target's first candidate (after it was taken or passed over).
  void Pop(Target& tg) {
    if (tg.partial) {
      // The rest, as a heap of its own at the end of the buffer.
      const uint32_t taken = buf_[tg.begin].wi;
      const Team& u = m_.teams[tg.team];
      const TeamFlavor& ux = u.tf[f_];
      tg.begin = buf_.size();
      for (size_t k = 0; k < ux.admitted.size(); ++k) {
        const AdmittedKey& key = ux.admitted_keys[k];
        if (ux.admitted[k] != taken && Candidate(u, key))
          buf_.push_back({key.admit_seq, key.prio, ux.admitted[k], key.shape, tg.team, false});
      }
      std::make_heap(buf_.begin() + tg.begin, buf_.end(), CandAfter);
      tg.left = buf_.size() - tg.begin;
      tg.partial = false;
      return;
    }
    std::pop_heap(buf_.begin() + tg.begin, buf_.begin() + tg.begin + tg.left, CandAfter);
    --tg.left;
  }

  // A target team's share now; the preemptor's own counts its request and its victims so
  // far as running.
  Share TargetShare(uint32_t ui) const {
    if (ui != ti_) return m_.ShareOf(m_.teams[ui], -1, Resources{});
    Resources d = req_;
    for (int r = 0; r < kNumResources; ++r) d[r] += own_removed_[r];
    return m_.ShareOf(t_, f_, d);
  }

  // A target's share is computed once per version of its team (for the preemptor's own
  // team, own_removed_ moves only with its version).
  Key KeyOf(uint32_t i) {
    Target& tg = targets_[i];
    const uint64_t v = m_.teams[tg.team].version;
    if (!tg.has_share || tg.share_version != v) {
      tg.share = TargetShare(tg.team);
      tg.share_version = v;
      tg.has_share = true;
    }
    return Key{tg.share, i, tg.team == ti_ ? 0u : 1u + tg.team, v};
  }

  // Other teams become targets as the walk of the flavor's borrower set (by descending
  // share, then team index: the heap's order) reaches them, when the next would be served
  // before the heap's top. A team not yet reached is untouched, so its key in the set is
  // its share now. For a borrowing preemptor the walk ends below mine_floor_: both
  // strategies compare with the target's share, which only falls as victims go, against
  // the preemptor's, which only rises.
  void Reach(Heap& heap) {
    for (; next_ != borrowers_.end(); ++next_) {
      const ShareKey& k = *next_;
      if (by_share_ && k.share < mine_floor_) {
        next_ = borrowers_.end();
        return;
      }
      if (!heap.empty()) {
        const Key& top = heap.top();
        const int c = Share::Cmp(k.share, top.share);
        if (c < 0 || (c == 0 && 1 + k.team > top.rank)) return;
      }
      if (!m_.IsTargetTeam(k, ti_, f_, req_, by_share_)) continue;
      targets_.push_back({k.team});
      Target& tg = targets_.back();
      tg.loaded = false;
      // Untouched so far: its share is its key in the set.
      tg.share = k.share;
      tg.share_version = m_.teams[k.team].version;
      tg.has_share = true;
      heap.push(KeyOf(static_cast<uint32_t>(targets_.size() - 1)));
    }
  }

  // One step of the walk: the target at the heap's top gives its first candidate, or is
  // re-keyed, or is dropped for this strategy.
  void Visit(const Key& top, int strategy, Heap& heap) {
    Target& tg = targets_[top.target];
    if (SizeOf(tg) == 0) return;
    // Other teams stop being targets once they no longer borrow on a needed resource
    // (their usage only falls during the search, so for good).
    if (tg.team != ti_ && !m_.BorrowingOn(m_.teams[tg.team], f_, req_)) return;
    if (top.version != m_.teams[tg.team].version) {
      heap.push(KeyOf(top.target));
      return;
    }
    if (!tg.loaded) {
      LoadFront(tg);
      tg.loaded = true;
      if (tg.left == 0) return;
    }
    const uint32_t ci = Front(tg).wi;
    if (tg.team == ti_) {
      Pop(tg);
      for (int r = 0; r < kNumResources; ++r) own_removed_[r] += m_.ReqOf(m_.wls[ci])[r];
      m_.TakeVictim(ci, PreemptionReason::kInClusterQueue);
      heap.push(KeyOf(top.target));
      return;
    }
    if (within_nominal_) {
      Pop(tg);
      m_.TakeVictim(ci, PreemptionReason::kReclaim);
      heap.push(KeyOf(top.target));
      return;
    }
    VisitFair(tg, top, strategy, heap);
  }

  // A fair-sharing step for a borrowing preemptor: the target's first candidate is taken if
  // the strategy's share test passes.
  void VisitFair(Target& tg, const Key& top, int strategy, Heap& heap) {
    const uint32_t ci = Front(tg).wi;
    const Resources& victim_req = m_.ReqOf(m_.wls[ci]);
    // The preemptor's share counts its own would-be victims as still running: fill-back
    // may keep them, and the comparison must hold for the final state. It also counts
    // everything its fair-sharing victims free, not only its request: a victim larger
    // than the preemptor leaves quota over, which the preemptor's team may fill at once
    // with other jobs. Counted on the request alone (Kueue), the two teams then trade
    // places and evict each other back every cycle (seen on the generated traces); with
    // the whole freed amount Kueue's no-ping-pong argument covers that refill too.
    Resources mine_delta;
    for (int r = 0; r < kNumResources; ++r)
      mine_delta[r] = own_removed_[r] + std::max(req_[r], fair_freed_[r] + victim_req[r]);
    const Share mine = m_.ShareOf(t_, f_, mine_delta);
    if (PassedOver(tg, Front(tg))) {
      while (tg.left > 0 && PassedOver(tg, Front(tg))) Pop(tg);
      heap.push(KeyOf(top.target));
      return;
    }
    bool ok;
    if (strategy == 1) {
      Resources minus = victim_req;
      for (auto& v : minus) v = -v;
      ok = mine <= m_.ShareOf(m_.teams[tg.team], f_, minus);
    } else {
      ok = !tg.s2_used && mine < top.share;
    }
    if (!ok) return;  // dropped for this strategy
    Pop(tg);
    if (strategy == 2) tg.s2_used = true;
    for (int r = 0; r < kNumResources; ++r) fair_freed_[r] += victim_req[r];
    m_.TakeVictim(ci, PreemptionReason::kFairSharing);
    heap.push(KeyOf(top.target));
  }

  // A candidate that may not be a fair-sharing victim: admitted in this cycle (see
  // cycle_first_seq), or one whose eviction would push its team below nominal on a needed
  // resource: the team could then reclaim unconditionally (lender reclaim) from the
  // preemptor, which borrows, and the three steps (fair-share eviction, reclaim, the team's
  // own higher-priority job taking the quota back in-team) repeat every cycle. Such a
  // candidate is passed over; a smaller one of the same team may still qualify.
  bool PassedOver(const Target& tg, const Cand& c) const {
    return c.admit_seq > m_.cycle_first_seq ||
           !m_.StaysAtNominal(m_.teams[tg.team], f_, req_, m_.shapes[c.shape]);
  }

  Impl& m_;
  const uint32_t ti_;
  const uint16_t f_;
  Team& t_;
  const Resources& req_;
  const bool within_nominal_;
  const bool by_share_;
  const Share mine_floor_;
  std::vector<Cand>& buf_;
  std::vector<Target>& targets_;
  const BorrowerSet& borrowers_;
  BorrowerSet::const_iterator next_;
  Resources own_removed_{};
  Resources fair_freed_{};  // Σ requests of the fair-sharing victims taken so far
};

bool Engine::Impl::TryPreempt(uint32_t wi, std::vector<Victim>& out) {
  const Wl& w = wls[wi];
  const uint32_t ti = w.team;
  Team& t = teams[ti];
  const uint16_t f = w.flavor;
  const bool fair = policy.fair_share;
  const bool within_nominal = WithinNominalAfter(t, f, ReqOf(w));
  // Kueue's gate: without fair sharing (and borrowWithinCohort=Never) a workload may only
  // preempt when its request fits within the team's nominal quota.
  if (!fair) {
    for (int r = 0; r < kNumResources; ++r)
      if (ReqOf(w)[r] > t.tf[f].nominal[r]) return false;
  }
  std::vector<Cand>& same = scratch_same_;
  same.clear();
  if (t.preempt == PreemptTeamTasks::kLowerPriority)
    AppendCands(ti, f, true, same, [&](const AdmittedKey& k) {
      return k.prio < w.prio && k.admit_seq <= cycle_first_seq;
    });
  // Other teams' workloads are candidates only while their team borrows on a needed
  // resource (reclaimWithinCohort: Any). Classic mode may only reclaim when the preemptor
  // ends up within its nominal quota (borrowWithinCohort: Never).
  // They come from the flavor's borrower set (IsTargetTeam). Under fair sharing
  // FairSearch walks the set itself, lazily and in its order (most searches end at the
  // first teams); FairShare Disabled orders candidates across all target teams at once,
  // so it lists them here.
  const bool by_share = fair && !within_nominal;
  const Share mine_floor = by_share ? ShareOf(t, f, ReqOf(w)) : Share{};
  std::vector<uint32_t>& other_teams = scratch_other_teams_;
  other_teams.clear();
  if (!fair && within_nominal)
    for (const ShareKey& k : flavors[f].borrowers)
      if (IsTargetTeam(k, ti, f, ReqOf(w), false)) other_teams.push_back(k.team);
  if (!fair && same.empty() && other_teams.empty()) return false;
  if (!EnoughRoom(wi, fair)) return false;
  scratch_chosen_.clear();
  scratch_reasons_.clear();
  scratch_versions_.clear();
  const bool fits =
      fair ? FairSearch(*this, wi, within_nominal, mine_floor).Run(same) : ClassicSearch(wi);
  if (!fits) {
    UndoVictims();
    return false;
  }
  FillBack(wi);
  if (!FairVictimsJustified(wi)) return false;
  EvictChosen(out);
  return true;
}

// Necessary room: available grows at most by what the victims free. Own lower-priority
// workloads (scratch_same_) free their usage, any other target (scratch_other_teams_) at
// most its usage (FairShare Disabled; under fair sharing only the team's cap is checked).
inline bool Engine::Impl::EnoughRoom(uint32_t wi, bool fair) const {
  const Wl& w = wls[wi];
  const Team& t = teams[w.team];
  const uint16_t f = w.flavor;
  const Resources& req = ReqOf(w);
  Resources room;
  for (int r = 0; r < kNumResources; ++r) room[r] = Available(t, f, r);
  for (const Cand& c : scratch_same_)
    for (int r = 0; r < kNumResources; ++r) room[r] += shapes[c.shape][r];
  for (uint32_t ui : scratch_other_teams_) {
    const TeamFlavor& ux = teams[ui].tf[f];
    for (int r = 0; r < kNumResources; ++r) room[r] += ux.usage[r];
  }
  Resources own_freed{};
  for (const Cand& c : scratch_same_)
    for (int r = 0; r < kNumResources; ++r) own_freed[r] += shapes[c.shape][r];
  const TeamFlavor& x = t.tf[f];
  for (int r = 0; r < kNumResources; ++r) {
    if (req[r] <= 0) continue;
    if (!fair && req[r] > room[r]) return false;
    // Available never exceeds nominal + borrow limit − usage (see MayAdmit).
    if (req[r] > x.nominal[r] + x.borrow_limit[r] - x.usage[r] + own_freed[r]) return false;
  }
  return true;
}

// A search's trial step: releases victim ci's usage (without re-keying the borrower sets)
// and records it. The versions of the teams the search touches are kept so that a failed
// search restores them: their usage is then as before, and streams keyed on the old
// version need no re-keying.
inline void Engine::Impl::TakeVictim(uint32_t ci, PreemptionReason why) {
  const Wl& c = wls[ci];
  std::vector<std::pair<uint32_t, uint64_t>>& versions = scratch_versions_;
  if (std::none_of(versions.begin(), versions.end(),
                   [&](const auto& v) { return v.first == c.team; }))
    versions.emplace_back(c.team, teams[c.team].version);
  TrialUsage(c.team, c.flavor, ReqOf(c), -1);
  scratch_chosen_.push_back(ci);
  scratch_reasons_.push_back(why);
}

// Puts back every victim a failed search took, and the teams' versions.
inline void Engine::Impl::UndoVictims() {
  for (uint32_t ci : scratch_chosen_)
    TrialUsage(wls[ci].team, wls[ci].flavor, ReqOf(wls[ci]), +1);
  for (const auto& [ui, v] : scratch_versions_) teams[ui].version = v;
}

// FairShare Disabled: every candidate (own lower-priority ones in scratch_same_, then the
// target teams' in scratch_other_teams_) in CandidatesOrdering, greedily until wi fits.
inline bool Engine::Impl::ClassicSearch(uint32_t wi) {
  const Wl& w = wls[wi];
  const Team& t = teams[w.team];
  const uint16_t f = w.flavor;
  std::vector<Cand>& cands = scratch_cands_;
  cands.assign(scratch_same_.begin(), scratch_same_.end());
  for (uint32_t ui : scratch_other_teams_)
    AppendCands(ui, f, false, cands, [](const AdmittedKey&) { return true; });
  // A heap whose top is the first in CandidatesOrdering (few are usually taken).
  std::make_heap(cands.begin(), cands.end(), CandAfter);
  for (auto end = cands.end(); end != cands.begin(); --end) {
    std::pop_heap(cands.begin(), end, CandAfter);
    const Cand& c = *(end - 1);
    if (!c.own && !BorrowingOn(teams[c.team], f, ReqOf(w))) continue;
    TakeVictim(c.wi, c.own ? PreemptionReason::kInClusterQueue : PreemptionReason::kReclaim);
    if (Fits(t, f, ReqOf(w))) return true;
  }
  return false;
}

// Fill back: re-admits (on trial) every victim but the last whose eviction turned out
// unnecessary; scratch_keep_ marks the victims kept.
inline void Engine::Impl::FillBack(uint32_t wi) {
  const Wl& w = wls[wi];
  const Team& t = teams[w.team];
  const std::vector<uint32_t>& chosen = scratch_chosen_;
  std::vector<char>& keep = scratch_keep_;
  keep.assign(chosen.size(), 1);
  for (int i = static_cast<int>(chosen.size()) - 2; i >= 0; --i) {
    const Wl& c = wls[chosen[i]];
    TrialUsage(c.team, c.flavor, ReqOf(c), +1);
    if (Fits(t, w.flavor, ReqOf(w))) {
      keep[i] = 0;
    } else {
      TrialUsage(c.team, c.flavor, ReqOf(c), -1);
    }
  }
}

// Fair-sharing victims must still be justified in the final state: the preemptor's team,
// after admission, below the victim's team with the victim back. Stricter than Kueue (whose
// greedy search and fill-back can leave a pair that would evict each other back on the
// next cycle); it rules that ping-pong out. When a victim fails the test, the kept victims
// are put back and the teams' versions restored (nothing changed).
inline bool Engine::Impl::FairVictimsJustified(uint32_t wi) {
  const Wl& w = wls[wi];
  const Team& t = teams[w.team];
  const uint16_t f = w.flavor;
  const std::vector<uint32_t>& chosen = scratch_chosen_;
  const std::vector<char>& keep = scratch_keep_;
  const std::vector<PreemptionReason>& reasons = scratch_reasons_;
  Resources mine_delta = ReqOf(w);  // as in FairSearch: the request or all it frees
  {
    Resources freed{};
    for (size_t i = 0; i < chosen.size(); ++i)
      if (keep[i] && reasons[i] == PreemptionReason::kFairSharing)
        for (int r = 0; r < kNumResources; ++r) freed[r] += ReqOf(wls[chosen[i]])[r];
    for (int r = 0; r < kNumResources; ++r) mine_delta[r] = std::max(ReqOf(w)[r], freed[r]);
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (!keep[i] || reasons[i] != PreemptionReason::kFairSharing) continue;
    const Wl& c = wls[chosen[i]];
    TrialUsage(c.team, c.flavor, ReqOf(c), +1);
    const bool ok = ShareOf(t, f, mine_delta) < ShareOf(teams[c.team], -1, Resources{});
    TrialUsage(c.team, c.flavor, ReqOf(c), -1);
    if (!ok) {
      for (size_t k = 0; k < chosen.size(); ++k)
        if (keep[k]) TrialUsage(wls[chosen[k]].team, f, ReqOf(wls[chosen[k]]), +1);
      for (const auto& [ui, v] : scratch_versions_) teams[ui].version = v;
      return false;
    }
  }
  return true;
}

// Commits the kept victims: their trial release is undone and redone through Evict, so that
// queues, counters and the borrower sets follow.
inline void Engine::Impl::EvictChosen(std::vector<Victim>& out) {
  for (size_t i = 0; i < scratch_chosen_.size(); ++i) {
    if (!scratch_keep_[i]) continue;
    const uint32_t ci = scratch_chosen_[i];
    const Wl& c = wls[ci];
    TrialUsage(c.team, c.flavor, ReqOf(c), +1);
    Evict(ci);
    out.push_back({ci, scratch_reasons_[i]});
  }
}

}  // namespace hf::governance
