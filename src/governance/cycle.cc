// A cycle: rounds, each making streams of the queues an event touched and deciding their
// heads in two passes ordered across teams, and the admission filter that leaves classes
// and whole queues out of a scan (MayAdmit, BlockedNeed). docs/governance.md "A cycle".
#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <utility>

#include "governance/engine_impl.h"

namespace hf::governance {
namespace {

// A cycle runs rounds until one evicts nothing (at most kMaxRounds; victims are not
// re-admitted within the cycle, so each round with evictions admits a new preemptor):
// quota freed beyond a preemptor's need is offered again at once, so a job that fits its
// team's unused nominal quota never waits for the next cycle. Victims of this cycle are
// not reconsidered before the next one (no ping-pong within a cycle).
constexpr int kMaxRounds = 64;

}  // namespace

CycleResult Engine::Impl::RunCycle(int64_t /*now_ms*/) {
  ++cycle;
  cycle_first_seq = admit_seq;
  CycleResult res;
  for (int round = 0; round < kMaxRounds; ++round) {
    const int64_t before = evictions;
    Round(res);
    if (evictions == before) break;
  }
  // This cycle's victims wait for the next cycle: make sure it scans their queues.
  for (uint16_t f : evicted_flavors) ++flavors[f].gen;
  evicted_flavors.clear();
  for (uint16_t f : round_victim_flavors) flavors[f].victims_this_round = false;
  round_victim_flavors.clear();
  round_victim_tfs.clear();
  CompactBuckets();
  return res;
}

// Drops empty buckets now that no stream holds them (their shapes may never recur).
inline void Engine::Impl::CompactBuckets() {
  for (auto [ti, f] : compact_tfs) {
    teams[ti].tf[f].needs_compact = false;
    TeamFlavor& x = teams[ti].tf[f];
    size_t keep = 0;
    for (size_t i = 0; i < x.buckets.size(); ++i) {
      if (x.info[i].size == 0) continue;
      if (keep != i) {
        x.buckets[keep] = std::move(x.buckets[i]);
        x.info[keep] = x.info[i];
      }
      x.buckets[keep]->slot = static_cast<uint32_t>(keep);
      ++keep;
    }
    x.buckets.resize(keep);
    x.info.resize(keep);
  }
  compact_tfs.clear();
}

inline void Engine::Impl::Round(CycleResult& res) {
  ++round_seq;
  in_round = true;
  nstreams = 0;
  MakeStreams();
  for (int pass = 1; pass <= 2; ++pass) RunPass(pass, res);
  in_round = false;
}

// Makes the round's streams: the queues that events since the last round may have made
// admissible.
inline void Engine::Impl::MakeStreams() {
  // After a round with evictions, the queues of the types they were on are scanned only
  // for jobs that fit what is available now: quota the victims freed beyond their
  // preemptors' needs is used in the same cycle. Preemptions that this cycle's changes
  // made possible (a team that now borrows more, a lower or higher fair share) wait for
  // the next cycle, which reads the state anew, as Kueue's per-cycle snapshot does.
  for (auto [ti, f] : round_victim_tfs) AddStream(ti, f, Scan::kLaterVictim);
  round_victim_tfs.clear();
  for (uint16_t f : round_victim_flavors) {
    flavors[f].victims_this_round = false;
    if (!FreeMayFit(f)) continue;
    const std::vector<uint32_t>& q = flavors[f].queued;
    for (size_t i = 0; i < q.size(); ++i) {
      PrefetchQueued(q, i, f);
      TeamFlavor& x = teams[q[i]].tf[f];
      if (x.npending == 0 || x.victim_round == round_seq - 1) continue;
      AddStream(q[i], f, Scan::kLater);
    }
  }
  round_victim_flavors.clear();
  // Queues of a type whose quota was released (or whose configuration changed) are
  // scanned whole when they pass MayAdmit; other queues only for their fresh buckets.
  for (size_t f = 0; f < flavors.size(); ++f) {
    Flavor& fl = flavors[f];
    if (fl.scanned_gen == fl.gen) continue;
    fl.scanned_gen = fl.gen;
    std::vector<uint32_t>& q = fl.queued;
    size_t keep = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      PrefetchQueued(q, i, static_cast<uint16_t>(f));
      const uint32_t ti = q[i];
      TeamFlavor& x = teams[ti].tf[f];
      if (x.npending == 0) {
        x.listed = false;
        continue;
      }
      q[keep++] = ti;
      AddStream(ti, static_cast<uint16_t>(f), x.force ? Scan::kAll : Scan::kWhole);
      x.force = false;
    }
    q.resize(keep);
  }
  for (auto [ti, f] : fresh_tfs) {
    TeamFlavor& x = teams[ti].tf[f];
    x.has_fresh = false;
    AddStream(ti, f, x.force ? Scan::kAll : Scan::kFresh);
    x.force = false;
    for (BucketInfo& b : x.info) b.fresh = false;
  }
  fresh_tfs.clear();
}

// One pass of a round over every stream, heads decided in the order across teams (fair
// share or priority, then submission). Pass 1 decides jobs that stay within nominal, pass 2
// (the classes deferred in pass 1) jobs that borrow.
inline void Engine::Impl::RunPass(int pass, CycleResult& res) {
  if (pass == 2) {
    for (size_t si = 0; si < nstreams; ++si) {
      Stream& s = streams[si];
      s.cur.clear();
      const TeamFlavor& x = teams[s.team].tf[s.flavor];
      for (const DeferredClass& d : s.deferred) s.cur.push_back(MakeCursor(x, d.slot));
      s.has_fail = false;
    }
  }
  std::priority_queue<HeapEntry> heap;
  auto push = [&](uint32_t si) {
    Stream& s = streams[si];
    if (!Advance(s)) return;
    const Cursor& c = s.cur[s.next];
    const Team& t = teams[s.team];
    if (policy.fair_share && (s.share_version != t.version || s.share_shape != c.shape)) {
      s.share = ShareOf(t, s.flavor, shapes[c.shape]);
      s.share_version = t.version;
      s.share_shape = c.shape;
    }
    heap.push({policy.fair_share ? s.share : Share{}, -c.prio, c.ts, c.id, si, t.version});
  };
  for (uint32_t si = 0; si < nstreams; ++si) push(si);
  while (!heap.empty()) {
    HeapEntry e = heap.top();
    heap.pop();
    Stream& s = streams[e.stream];
    Team& t = teams[s.team];
    if (policy.fair_share && e.version != t.version) {
      push(e.stream);  // the team's share changed: re-key
      continue;
    }
    // s.next still holds: only this stream removes from its buckets, and what others
    // insert (this cycle's victims) is skipped anyway.
    Decide(s, pass, res);
    push(e.stream);
  }
}

// Decides the head of the stream's cursor s.next: admits it (the cursor moves on), or
// closes its bucket for this pass (never fits, deferred to the borrowing pass, or no
// admission possible).
inline void Engine::Impl::Decide(Stream& s, int pass, CycleResult& res) {
  // Reads the cursor's copy of the head's keys: the bucket and the workload are touched
  // only to admit, to search victims, or to classify the class as never fitting.
  Cursor& c = s.cur[s.next];
  Team& t = teams[s.team];
  const uint16_t f = s.flavor;
  TeamFlavor& x = t.tf[f];
  const Resources& req = shapes[c.shape];
  const uint32_t slot = c.slot;  // x.info may grow while victims are queued: index anew
  auto close = [&] { c.done = true; };
  auto admit = [&] {
    Materialize(c);
    const uint32_t wi = *c.it;
    ++c.it;
    Admit(wi, *c.b);
    Seek(c);
  };
  ++res.considered;
  if (!t.active) {
    x.info[slot].skip = Skip::kInactive;
    for (Cursor& k : s.cur) k.done = true;
    return;
  }
  if (NeverFits(t, f, req)) {
    ClassifyNeverFit(s, res);
    return;
  }
  const bool borrows = !WithinNominalAfter(t, f, req);
  // Entries that need to borrow wait for the second pass: non-borrowing entries of every
  // team go first (Kueue's classical ordering and FairSharingPrioritizeNonBorrowing).
  if (pass == 1 && borrows) {
    s.deferred.push_back({c.b, slot});
    close();
    return;
  }
  const uint64_t id = c.id;
  if (Fits(t, f, req)) {
    admit();
    if (borrows) ++borrow_epoch;
    res.admitted.push_back({id, borrows, {}});
    x.info[slot].skip = Skip::kNone;
    return;
  }
  if (FailDominated(s, c.prio, req)) {
    x.info[slot].skip = Skip::kNoCandidates;
    close();
    return;
  }
  // The stream was made on the state at the round's start; since then other admissions
  // may have taken what the class could use. MayAdmit is sound, so when it fails now the
  // search below would fail too: skip it (same outcome, as a failed search).
  bool may = true;
  {
    Resources avail;
    for (int r = 0; r < kNumResources; ++r) avail[r] = Available(t, f, r);
    may = MayAdmit(s.team, f, c.prio, req, avail,
                   policy.fair_share ? MaxOtherBorrowerShare(f, s.team) : std::nullopt);
  }
  std::vector<Victim> victims;
  if (may) Materialize(c);
  if (may && TryPreempt(*c.it, victims)) {
    admit();
    const bool bo = BorrowingOn(t, f, req);
    if (bo) ++borrow_epoch;
    Admission a{id, bo, {}};
    for (const Victim& v : victims) a.victims.push_back({wls[v.wi].id, id, v.reason});
    res.admitted.push_back(std::move(a));
    t.tf[f].info[slot].skip = Skip::kNone;
    return;
  }
  s.has_fail = true;
  s.fail_prio = c.prio;
  s.fail_req = req;
  s.fail_epoch = borrow_epoch;
  x.info[slot].skip = borrows ? Skip::kNeedsBorrow : Skip::kNoQuota;
  close();
}

// The head's whole class never fits (same request, same team and type): its workloads,
// but this cycle's victims, move to the team's never-fit list and the bucket closes.
inline void Engine::Impl::ClassifyNeverFit(Stream& s, CycleResult& res) {
  Cursor& c = s.cur[s.next];
  const uint16_t f = s.flavor;
  TeamFlavor& x = teams[s.team].tf[f];
  const uint32_t slot = c.slot;
  Bucket& b = *c.b;
  Materialize(c);
  for (auto it = c.it; it != b.q.end();) {
    const uint32_t vi = *it;
    Wl& v = wls[vi];
    if (v.evicted_cycle == cycle) {
      ++it;
      continue;
    }
    it = b.q.erase(it);
    --x.info[slot].size;
    --x.npending;
    v.state = WlState::kNeverFit;
    v.pos = static_cast<uint32_t>(x.never_fit.size());
    x.never_fit.push_back(vi);
    res.never_fits.push_back(v.id);
  }
  if (b.q.empty()) {
    BucketEmptied(s.team, f);
  } else {
    x.summary_dirty = true;
    SetHead(x.info[slot], wls[*b.q.begin()]);
  }
  c.done = true;
}

// Whether the stream's last failed search (its priority and request, no borrowing
// admission since) dominates a head of priority `prio` and request `req`: that search would
// fail too.
inline bool Engine::Impl::FailDominated(const Stream& s, int32_t prio, const Resources& req) const {
  if (!s.has_fail || s.fail_epoch != borrow_epoch || prio > s.fail_prio) return false;
  for (int r = 0; r < kNumResources; ++r)
    if (req[r] < s.fail_req[r]) return false;
  return true;
}

// Makes a stream of team ti's queue on f from the classes `scan` selects. A queue whose
// smallest request and highest priority pass no test has no class that does, and is
// skipped without looking at its classes.
inline void Engine::Impl::AddStream(uint32_t ti, uint16_t f, Scan scan) {
  const bool fresh_only = scan == Scan::kFresh;
  const bool all = scan == Scan::kAll;
  const bool fit_only = scan == Scan::kLater || scan == Scan::kLaterVictim;
  const bool victim = scan == Scan::kLaterVictim;
  Team& t = teams[ti];
  TeamFlavor& x = t.tf[f];
  if (x.stream_round == round_seq || x.npending == 0) return;
  if (!t.active && !all) return;
  Resources avail;
  for (int r = 0; r < kNumResources; ++r) avail[r] = Available(t, f, r);
  if (fit_only) {
    RefreshSummary(x);
    if (!MayAdmitLater(x, x.min_req, avail, victim)) return;
  }
  const std::optional<Share> other =
      policy.fair_share && !fit_only ? MaxOtherBorrowerShare(f, ti) : std::nullopt;
  if (!all && !fresh_only && !fit_only) {
    if (x.skip_valid && x.skip_version == t.version &&
        (!x.skip_by_share || !other || *other < x.skip_floor)) {
      const Flavor& fl = flavors[f];
      for (int r = 0; r < kNumResources; ++r)
        if (fl.subtree[r] - fl.usage[r] < x.skip_need[r]) return;
    }
    RefreshSummary(x);
    if (!MayAdmit(ti, f, x.max_prio, x.min_req, avail, other)) {
      x.skip_valid = BlockedNeed(ti, f, other, x.skip_need, x.skip_floor, x.skip_by_share);
      x.skip_version = t.version;
      return;
    }
    x.skip_valid = false;
  }
  if (nstreams == streams.size()) streams.emplace_back();
  Stream& s = streams[nstreams];
  s.team = ti;
  s.flavor = f;
  s.cur.clear();
  s.deferred.clear();
  s.has_fail = false;
  s.share_version = std::numeric_limits<uint64_t>::max();
  LowerMemo memo;
  for (size_t i = 0; i < x.info.size(); ++i) {
    const BucketInfo& b = x.info[i];
    if (b.size == 0 || (fresh_only && !b.fresh)) continue;
    if (fit_only ? !MayAdmitLater(x, shapes[b.shape], avail, victim)
                 : !all && !MayAdmit(ti, f, b.prio, shapes[b.shape], avail, other, &memo) &&
                       !NeverFits(t, f, shapes[b.shape]))
      continue;
    Bucket* bucket = x.buckets[i].get();
    // A class whose head would borrow waits for the borrowing pass (Decide); whether it
    // borrows is read when the stream is made (Kueue too reads it from the cycle's
    // snapshot).
    if (t.active && !WithinNominalAfter(t, f, shapes[b.shape]) &&
        !NeverFits(t, f, shapes[b.shape])) {
      s.deferred.push_back({bucket, static_cast<uint32_t>(i)});
      continue;
    }
    s.cur.push_back(MakeCursor(x, static_cast<uint32_t>(i)));
  }
  if (s.cur.empty() && s.deferred.empty()) return;
  x.stream_round = round_seq;
  ++nstreams;
}

// The walks of a type's queued teams are bound by memory latency at tier M (a team's
// Team, then its TeamFlavor, each a miss): while at entry i, fetch the Team of the entry
// 8 ahead and the TeamFlavor of the entry 4 ahead (whose Team arrived meanwhile).
inline void Engine::Impl::PrefetchQueued(const std::vector<uint32_t>& q, size_t i,
                                  uint16_t f) const {
  constexpr size_t kFar = 8, kNear = 4;
  if (i + kFar < q.size()) {
    const Team& t = teams[q[i + kFar]];
    __builtin_prefetch(&t.tf);
    __builtin_prefetch(&t.version);
  }
  if (i + kNear < q.size()) {
    const TeamFlavor* x = teams[q[i + kNear]].tf.data() + f;
    __builtin_prefetch(x);
    __builtin_prefetch(reinterpret_cast<const char*>(x) + 64);
    __builtin_prefetch(reinterpret_cast<const char*>(x) + 128);
  }
}

// Whether a team other than a DontLend one could fit a job of f into what the cohort has
// free: every job requests at least min_req_seen (the smallest request ever queued on f).
inline bool Engine::Impl::FreeMayFit(uint16_t f) const {
  const Flavor& fl = flavors[f];
  if (fl.any_local) return true;
  for (int r = 0; r < kNumResources; ++r)
    if (fl.min_req_seen[r] > 0 && fl.subtree[r] - fl.usage[r] < fl.min_req_seen[r])
      return false;
  return true;
}

// Moves cursor c to the first workload at or after its position that is not one of this
// cycle's victims (they wait for the next cycle) and copies its keys. A head stays valid
// until its own stream moves it: only the stream removes from its buckets, and victims
// re-queued behind a head are skipped when the cursor reaches them.
inline void Engine::Impl::Seek(Cursor& c) {
  while (c.it != c.b->q.end() && wls[*c.it].evicted_cycle == cycle) ++c.it;
  if (c.it == c.b->q.end()) {
    c.done = true;
    return;
  }
  const Wl& w = wls[*c.it];
  c.ts = w.ts;
  c.id = w.id;
}

// A cursor on the class in `slot` of team-flavor x, at its first workload that is not one
// of this cycle's victims. Lazy unless the head is such a victim (rare: then the queue is
// read at once).
inline Engine::Impl::Cursor Engine::Impl::MakeCursor(const TeamFlavor& x, uint32_t slot) {
  const BucketInfo& bi = x.info[slot];
  Cursor c{x.buckets[slot].get(), {}, bi.head_ts, bi.head_id, bi.prio, bi.shape, slot};
  if (bi.size == 0) {
    c.done = true;
  } else if (bi.head_evicted_cycle == cycle) {
    Materialize(c);
  }
  return c;
}

// Reads the cursor's queue: the head is then the first workload that is not one of this
// cycle's victims, which is the one whose keys the cursor holds (victims queued since
// are skipped).
inline void Engine::Impl::Materialize(Cursor& c) {
  if (c.materialized) return;
  c.materialized = true;
  c.it = c.b->q.begin();
  Seek(c);
}

// Finds the stream's next workload in queue order; false when it has none left.
inline bool Engine::Impl::Advance(Stream& s) {
  s.next = -1;
  const Cursor* best = nullptr;
  for (size_t i = 0; i < s.cur.size(); ++i) {
    const Cursor& c = s.cur[i];
    if (c.done) {
      // Drop it (the merge order does not depend on positions): a stream of many classes
      // would otherwise step over its closed ones at every head.
      s.cur[i] = s.cur.back();
      s.cur.pop_back();
      --i;
      continue;
    }
    if (!best || c.prio > best->prio ||
        (c.prio == best->prio && (c.ts < best->ts || (c.ts == best->ts && c.id < best->id)))) {
      best = &c;
      s.next = static_cast<int>(i);
    }
  }
  return s.next >= 0;
}

// ---- the admission filter ----

// Whether a workload of priority `prio` and request `req` of team ti could be admitted
// now on f, with or without preemption, or be classified never-fit. Sound (false means
// it cannot), cheap, and used to leave whole equivalence classes out of a scan:
//  (a) it fits what is available;
//  (b) it fits the team's unused nominal quota (lender reclaim may make room);
//  (c) PreemptTeamTasks=LowerPriority and it fits what is available plus everything the
//      team's lower-priority workloads use (available grows at most by what they free);
//  (d) FairShare Enabled: another team borrowing on f has a share at least the team's
//      share with the request (the bar for every fair-sharing target).
// `avail` is Available(t, f, ·); `other` the largest share of another borrower on f.
inline bool Engine::Impl::MayAdmit(uint32_t ti, uint16_t f, int32_t prio, const Resources& req,
                            const Resources& avail, const std::optional<Share>& other,
                            LowerMemo* memo) const {
  const Team& t = teams[ti];
  const TeamFlavor& x = t.tf[f];
  bool fits = true, nominal = true;
  for (int r = 0; r < kNumResources; ++r) {
    if (req[r] <= 0) continue;
    if (req[r] > avail[r]) fits = false;
    if (x.usage[r] + req[r] > x.nominal[r]) nominal = false;
  }
  if (fits || nominal) return true;
  // FairShare Disabled: a job may preempt only if its request fits its nominal quota
  // (TryPreempt's gate).
  if (!policy.fair_share)
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > x.nominal[r]) return false;
  // Beyond unused nominal, available never exceeds nominal + borrow limit − usage, and
  // only the team's own victims lower its usage: (c) and (d) need this cap.
  Resources lower{};
  const bool in_team =
      t.preempt == PreemptTeamTasks::kLowerPriority && prio > MinAdmittedPrio(x);
  if (in_team) {
    if (memo && memo->prio == prio) {
      lower = memo->lower;
    } else {
      lower = LowerUsage(x, prio);
      if (memo) *memo = {prio, lower};
    }
  }
  for (int r = 0; r < kNumResources; ++r)
    if (req[r] > 0 && req[r] > x.nominal[r] + x.borrow_limit[r] - x.usage[r] + lower[r])
      return false;
  if (in_team) {
    bool ok = true;
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && req[r] > avail[r] + lower[r]) ok = false;
    if (ok) return true;
  }
  if (policy.fair_share && other) {
    // A fair-sharing target needs a share at least the team's with the request, and a
    // victim whose eviction keeps it at nominal (FairSearch).
    const Share floor = ShareOf(t, f, req);
    if (*other < floor) return false;
    for (const ShareKey& k : flavors[f].borrowers) {
      if (k.share < floor) break;
      if (k.team == ti) continue;
      const Team& u = teams[k.team];
      if (BorrowingOn(u, f, req) && HasFairVictimSize(u, f, req)) return true;
    }
  }
  return false;
}

// For a queue that just failed MayAdmit with its summary (smallest request, highest
// priority): the free quota of the type (subtree − usage) it would need on each resource
// to pass, as long as the team's own state does not change. Available is
// local_avail + min(free, cap) with cap = lendable nominal − used + borrow limit, so the
// fit and in-team tests need free ≥ request (− lower-priority usage) − local_avail.
// Under fair sharing the fair-sharing test (MayAdmit (d)) also stays failed while no
// other borrower's share reaches `floor`, the team's share with the smallest request
// (*by_share set); false when it failed for another reason (no victim of a fitting size),
// which other teams' usage may change.
inline bool Engine::Impl::BlockedNeed(uint32_t ti, uint16_t f, const std::optional<Share>& other,
                               Resources& need, Share& floor, bool& by_share) const {
  by_share = false;
  const Team& t = teams[ti];
  const TeamFlavor& x = t.tf[f];
  const Resources& m = x.min_req;
  const bool in_team =
      t.preempt == PreemptTeamTasks::kLowerPriority && x.max_prio > MinAdmittedPrio(x);
  Resources lower{};
  if (in_team) lower = LowerUsage(x, x.max_prio);
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  bool over_cap = false;
  for (int r = 0; r < kNumResources; ++r)
    if (m[r] > 0 && m[r] > x.nominal[r] + x.borrow_limit[r] - x.usage[r] + lower[r])
      over_cap = true;
  if (over_cap) {  // only the team's own usage or configuration can change that
    need.fill(kNever);
    return true;
  }
  if (policy.fair_share) {
    floor = ShareOf(t, f, m);
    if (other && !(*other < floor)) return false;
    by_share = true;
  }
  for (int r = 0; r < kNumResources; ++r) {
    need[r] = std::numeric_limits<int64_t>::min();
    if (m[r] <= 0) continue;
    const int64_t local_avail = Sat0(x.local[r] - x.usage[r]);
    const int64_t cap = (x.nominal[r] - x.local[r]) - Sat0(x.usage[r] - x.local[r]) +
                        x.borrow_limit[r];
    const int64_t target = m[r] - lower[r] - local_avail;
    need[r] = cap < target ? kNever : target;
  }
  return true;
}

// Usage of the team's admitted workloads of f with priority below `prio`.
inline Resources Engine::Impl::LowerUsage(const TeamFlavor& x, int32_t prio) const {
  Resources out{};
  for (int slot = 0; slot < kClassSlots; ++slot) {
    if (x.admitted_by_class[slot] == 0) continue;
    if ((slot == 10 ? 0 : class_weight[slot]) >= prio) continue;
    for (int r = 0; r < kNumResources; ++r) out[r] += x.admitted_usage_by_class[slot][r];
  }
  return out;
}

}  // namespace hf::governance
