#pragma once
// The admission engine's state and its private interface (Engine::Impl), shared by the
// engine's files in src/governance and included by nothing else:
//   engine.cc       the public façade (configuration and workload events, queries)
//   quota.cc        quota resolution and the configuration's effective quotas (Recompute)
//   fair_share.cc   the borrower sets kept in share order (fair_share.h: the ordering)
//   queues.cc       pending queues by equivalence class, workload state transitions
//   cycle.cc        a cycle: rounds, streams, the admission filter, Decide
//   preemption.cc   victim searches (TryPreempt, the fair-sharing target walk)
//   explain.cc      Explain and RenderWhyPending
//   consistency.cc  CheckConsistency (tests)
// The quota arithmetic every decision reads (Available, Fits, ShareOf, ...) is inline here,
// and members that only one file calls are defined `inline` in that file, so that the hot
// loops compile as they did when the engine was one file (callgrind figures of the split:
// bench/README.md).
// Semantics: docs/governance.md; Kueue v0.19 resource_node.go and fair_sharing.go.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "governance/fair_share.h"
#include "hyperfleet/governance/engine.h"

namespace hf::governance {
namespace engine_internal {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
inline constexpr uint8_t kNoClass = 255;

enum class WlState : uint8_t { kFree, kPending, kAdmitted, kNeverFit };

// Last outcome of a pending equivalence class (for Explain).
enum class Skip : uint8_t { kNone, kNoQuota, kNeedsBorrow, kNoCandidates, kInactive };

// One workload. Kept small (the benchmark's budget is ≤ 300 bytes per pending workload,
// queue node and id index included): the request is an interned shape, the team, type and
// class are small ids.
struct Wl {
  uint64_t id = 0;
  int64_t ts = 0;
  int64_t admit_seq = 0;      // order of admission (most recent is preempted first)
  uint32_t team = 0;
  uint32_t shape = 0;         // index in Impl::shapes (the request)
  uint32_t pos = kNone;       // index in the team-flavor admitted / never-fit vector
  int32_t evicted_cycle = -1; // cycle in which it was last evicted
  int32_t queued_cycle = 0;   // cycle count when it (re)entered the queue (Explain)
  int32_t prio = 0;
  uint16_t flavor = 0;
  uint8_t cls = kNoClass;
  WlState state = WlState::kFree;
};

// Queue order within an equivalence class: earlier submission, then id. The set holds
// workload indices; the comparator reads the (immutable while queued) keys.
struct QCmp {
  const std::vector<Wl>* wls;
  bool operator()(uint32_t a, uint32_t b) const {
    const Wl& x = (*wls)[a];
    const Wl& y = (*wls)[b];
    if (x.ts != y.ts) return x.ts < y.ts;
    return x.id < y.id;
  }
};
using Queue = std::set<uint32_t, QCmp>;

// The pending workloads of one team and type with the same priority class and request:
// they are interchangeable for every admission and preemption decision (Kueue's
// equivalence hashing), so when the first fails the others are not tried in that pass.
// Its class, priority and request are in the BucketInfo at `slot`.
struct Bucket {
  Queue q;
  uint32_t slot = 0;         // index in its TeamFlavor's buckets / info
  Bucket(const std::vector<Wl>* wls) : q(QCmp{wls}) {}
};

// What a scan's filter reads of a bucket, kept inline in the team-flavor (parallel to its
// buckets): a scan reads one contiguous array instead of one heap node per bucket (at tier
// M the pointer chase was most of the scan's time).
struct BucketInfo {
  uint32_t shape = 0;
  int32_t prio = 0;
  uint32_t size = 0;  // pending workloads in the bucket (its q.size())
  uint8_t cls = kNoClass;
  bool fresh = false; // holds workloads submitted since the last cycle
  Skip skip = Skip::kNone;  // last outcome of its head (Explain)
  // The head's queue keys and the cycle it was last preempted in (valid while size > 0):
  // a scan orders the heads of many classes without reading their queues.
  int32_t head_evicted_cycle = -1;
  int64_t head_ts = 0;
  uint64_t head_id = 0;
};

inline constexpr int kClassSlots = 11;  // 10 classes + "no class"
inline int ClassSlot(uint8_t cls) { return cls == kNoClass ? 10 : cls; }

// What victim searches read of an admitted workload, kept next to the team-flavor's list of
// admitted workloads so that filtering candidates reads no workload.
struct AdmittedKey {
  int64_t admit_seq = 0;
  int32_t prio = 0;
  uint32_t shape = 0;
};

// A team's state for one flavor.
// Fields a scan reads for every queue of a type come first, so that they share as few
// cache lines as possible (at tier M the scans are bound by memory latency).
struct alignas(64) TeamFlavor {
  // ---- read by every scan ----
  int64_t npending = 0;
  int64_t stream_round = -1;  // last round that made a stream of it
  // The queue failed the filter at team version skip_version; until the team's usage or
  // configuration changes (version) or a workload is queued again, it cannot pass while
  // the type's free quota stays below skip_need on some resource (Impl::BlockedNeed) and,
  // under fair sharing with skip_by_share, every other borrower's share stays below
  // skip_floor.
  uint64_t skip_version = 0;
  Resources skip_need{};
  // Prefilter summary of the pending buckets (recomputed when `summary_dirty`).
  Resources min_req{};      // componentwise minimum request
  int32_t max_prio = 0;
  int32_t min_admitted_prio = std::numeric_limits<int32_t>::max();  // over admitted_by_class
  bool skip_valid = false;
  bool skip_by_share = false;
  bool has_quota = false;
  bool summary_dirty = true;
  bool listed = false;      // in its flavor's `queued` list
  bool has_fresh = false;   // in Impl::fresh_tfs
  bool force = false;       // scan whole at the next round (configuration changed)
  bool in_borrowers = false;  // in its flavor's `borrowers` set
  bool needs_compact = false;  // holds an empty bucket (Impl::compact_tfs)
  Resources nominal{};      // effective: zero when the team is inactive
  Resources borrow_limit{}; // effective
  Resources usage{};
  Resources local{};        // the part of nominal that is never lent (DontLend: all)
  Resources potential{};    // Impl::Potential per resource (set by Recompute)
  std::vector<BucketInfo> info;                   // info[i] describes buckets[i]
  std::array<uint32_t, kClassSlots> admitted_by_class{};  // in-team preemption prefilter
  int64_t victim_round = -1;  // last round in which it lost a workload to preemption
  // ---- the rest ----
  std::vector<std::unique_ptr<Bucket>> buckets;  // pending, by (class, request)
  std::vector<uint32_t> admitted;
  std::vector<AdmittedKey> admitted_keys;  // admitted_keys[k] describes admitted[k]
  std::vector<uint32_t> never_fit;
  std::array<Resources, kClassSlots> admitted_usage_by_class{};
  // Admitted workloads by request shape (shape, count): which victim sizes the team has.
  std::vector<std::pair<uint32_t, uint32_t>> admitted_shapes;
  Share skip_floor;          // see skip_version
  Resources configured{};   // nominal as configured (kept while inactive)
  Resources configured_borrow{};
};

struct Team {
  std::string name;
  TeamQuota quota;
  bool exists = false;          // quota present (not deleted)
  bool active = false;
  int weight = 0;
  PreemptTeamTasks preempt = PreemptTeamTasks::kLowerPriority;
  Resources borrowed{};         // Σ over flavors of max(0, usage − nominal)
  uint64_t version = 0;         // bumped on every usage change (fair-share keys)
  Share share;                  // ShareOf(team) for the current usage (the borrower sets)
  std::vector<TeamFlavor> tf;
};

struct Flavor {
  InstanceTypeCapacity cap;
  Resources per_instance{};
  Resources capacity{};
  Resources cohort_nominal{};  // IdleResourceSharing: unallocated capacity
  Resources subtree{};         // lendable quota of the cohort
  Resources usage{};           // Σ max(0, team usage − team local)
  uint64_t gen = 1;            // bumped when quota is released or configuration changes
  uint64_t scanned_gen = 0;    // gen at the last round that looked at its queues
  std::vector<uint32_t> queued;  // teams with pending workloads of this type (lazily pruned)
  BorrowerSet borrowers;       // teams above nominal on some resource, by share
  bool victims_this_round = false;  // in Impl::round_victim_flavors
  bool any_local = false;           // some team holds quota it does not lend (DontLend)
  bool any_seen = false;            // min_req_seen holds a request
  Resources min_req_seen{};         // componentwise minimum of every request queued on f
};

inline int64_t Sat0(int64_t v) { return v < 0 ? 0 : v; }

}  // namespace engine_internal

// The engine's files all define Engine::Impl's members in this namespace and read its
// private types unqualified; no other file includes this header.
using namespace engine_internal;

struct Engine::Impl {
  SchedulerPolicy policy;
  std::vector<Flavor> flavors;
  absl::flat_hash_map<std::string, uint16_t> flavor_index;
  std::vector<Team> teams;
  absl::flat_hash_map<std::string, uint32_t> team_index;
  std::vector<Wl> wls;
  std::vector<uint32_t> free_wls;
  absl::flat_hash_map<uint64_t, uint32_t> by_id;
  absl::flat_hash_map<std::string, uint8_t> class_index;
  std::vector<int> class_weight;
  std::vector<std::pair<uint32_t, uint16_t>> fresh_tfs;  // team-flavors with fresh entries
  // Interned requests: workloads of one shape share one Resources.
  std::vector<Resources> shapes;
  absl::flat_hash_map<std::array<int64_t, kNumResources>, uint32_t> shape_index;
  int64_t cycle = 0;
  int64_t round_seq = 0;
  int64_t admit_seq = 0;
  int64_t pending_count = 0;
  int64_t admitted_count = 0;
  Lendable lendable_;  // what the cohort lends (the shares' denominators)

  // ---- quota arithmetic (Kueue v0.19 resource_node.go semantics, flat cohort) ----

  /// The most of resource r team t could be admitted on f now without preemption.
  int64_t Available(const Team& t, uint16_t f, int r) const {
    const TeamFlavor& x = t.tf[f];
    const Flavor& fl = flavors[f];
    const int64_t local_avail = Sat0(x.local[r] - x.usage[r]);
    const int64_t stored = x.nominal[r] - x.local[r];
    const int64_t used = Sat0(x.usage[r] - x.local[r]);
    int64_t parent = fl.subtree[r] - fl.usage[r];
    parent = std::min(parent, stored - used + x.borrow_limit[r]);
    return Sat0(local_avail + parent);
  }
  /// The most of resource r team t could ever be admitted on f (the NeverFits bound).
  int64_t Potential(const Team& t, uint16_t f, int r) const {
    const TeamFlavor& x = t.tf[f];
    return std::min(x.local[r] + flavors[f].subtree[r], x.nominal[r] + x.borrow_limit[r]);
  }
  bool Fits(const Team& t, uint16_t f, const Resources& req) const {
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && req[r] > Available(t, f, r)) return false;
    return true;
  }
  // Reads the cached potential: it changes only with the configuration (Recompute).
  bool NeverFits(const Team& t, uint16_t f, const Resources& req) const {
    const TeamFlavor& x = t.tf[f];
    if (!x.has_quota) return true;
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && req[r] > x.potential[r]) return true;
    return false;
  }
  bool WithinNominalAfter(const Team& t, uint16_t f, const Resources& req) const {
    return WithinNominalAfter(t.tf[f], req);
  }
  static bool WithinNominalAfter(const TeamFlavor& x, const Resources& req) {
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && x.usage[r] + req[r] > x.nominal[r]) return false;
    return true;
  }
  // Whether team t still uses at least its nominal quota of f on every resource `req`
  // needs after releasing `removed`.
  bool StaysAtNominal(const Team& t, uint16_t f, const Resources& req,
                      const Resources& removed) const {
    const TeamFlavor& x = t.tf[f];
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && x.usage[r] - removed[r] < x.nominal[r]) return false;
    return true;
  }
  bool BorrowingOn(const Team& t, uint16_t f, const Resources& req) const {
    const TeamFlavor& x = t.tf[f];
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && x.usage[r] > x.nominal[r]) return true;
    return false;
  }
  static bool BorrowingAny(const TeamFlavor& x) {
    for (int r = 0; r < kNumResources; ++r)
      if (x.usage[r] > x.nominal[r]) return true;
    return false;
  }
  static bool FitsIn(const Resources& req, const Resources& avail) {
    for (int r = 0; r < kNumResources; ++r)
      if (req[r] > 0 && req[r] > avail[r]) return false;
    return true;
  }

  // Adds `sign`·req to the team's usage; the part above the team's local quota moves the
  // cohort's usage, the part above nominal its borrowed total.
  void AddUsage(uint32_t ti, uint16_t f, const Resources& req, int sign) {
    TrialUsage(ti, f, req, sign);
    UpdateBorrower(ti);
  }
  // AddUsage without the borrower sets, for a victim search's trial steps: nothing reads
  // the sets (or Team::share) during a search, and every team it touches either ends at
  // its usage before the search or is evicted from through AddUsage, which re-keys it.
  void TrialUsage(uint32_t ti, uint16_t f, const Resources& req, int sign) {
    Team& t = teams[ti];
    TeamFlavor& x = t.tf[f];
    Flavor& fl = flavors[f];
    for (int r = 0; r < kNumResources; ++r) {
      const int64_t old_u = x.usage[r];
      const int64_t new_u = old_u + sign * req[r];
      fl.usage[r] += Sat0(new_u - x.local[r]) - Sat0(old_u - x.local[r]);
      t.borrowed[r] += Sat0(new_u - x.nominal[r]) - Sat0(old_u - x.nominal[r]);
      x.usage[r] = new_u;
    }
    ++t.version;
  }

  const Resources& ReqOf(const Wl& w) const { return shapes[w.shape]; }

  // ---- fair sharing (fair_share.cc) ----

  // Dominant resource share of team `t` with `delta` added on flavor f (f < 0: none).
  Share ShareOf(const Team& t, int f, const Resources& delta) const {
    Resources borrowed = t.borrowed;
    if (f >= 0) {
      const TeamFlavor& x = t.tf[f];
      for (int r = 0; r < kNumResources; ++r)
        borrowed[r] += Sat0(x.usage[r] + delta[r] - x.nominal[r]) - Sat0(x.usage[r] - x.nominal[r]);
    }
    return DominantShare(borrowed, t.weight, lendable_);
  }
  // The largest share among teams other than `ti` borrowing on f; nullopt if none.
  std::optional<Share> MaxOtherBorrowerShare(uint16_t f, uint32_t ti) const {
    return flavors[f].borrowers.MaxOther(ti);
  }
  /// Keeps team ti's cached share and its place in every flavor's borrower set current.
  void UpdateBorrower(uint32_t ti);
  /// Recomputes every team's share and rebuilds the borrower sets (the lendable totals
  /// changed).
  void RebuildBorrowers();

  // ---- configuration (quota.cc) ----

  /// Recomputes effective quotas and cohort aggregates from scratch and wakes every queue.
  void Recompute();
  /// A team's quota resolved against the cluster's types: nominal and borrow limit per
  /// flavor. InvalidArgument naming the field.
  StatusOr<std::pair<std::vector<Resources>, std::vector<Resources>>> ResolveQuota(
      const TeamQuota& q) const;

  // ---- pending queues and workloads (queues.cc) ----

  Bucket& BucketFor(TeamFlavor& x, uint8_t cls, int32_t prio, uint32_t shape);
  Bucket* FindBucket(TeamFlavor& x, const Wl& w);
  const Bucket* FindBucket(const TeamFlavor& x, const Wl& w) const;
  /// Puts workload wi (state set here to pending) in its team-flavor queue.
  Bucket& InsertPending(uint32_t wi);
  static void SetHead(BucketInfo& bi, const Wl& w) {
    bi.head_ts = w.ts;
    bi.head_id = w.id;
    bi.head_evicted_cycle = w.evicted_cycle;
  }
  /// Takes workload wi out of bucket b (its own).
  void ErasePending(uint32_t wi, Bucket& b);
  /// A bucket of (ti, f) became empty: the summary changes, and the bucket is dropped at
  /// the end of the cycle (streams may hold it until then).
  void BucketEmptied(uint32_t ti, uint16_t f);
  void RefreshSummary(TeamFlavor& x) {
    if (x.summary_dirty) RecountSummary(x);
  }
  void RecountSummary(TeamFlavor& x);
  /// The lowest priority among the team's admitted workloads of f (INT32_MAX if none),
  /// recounted from the per-class counters.
  int32_t CountMinAdmittedPrio(const TeamFlavor& x) const;
  int32_t MinAdmittedPrio(const TeamFlavor& x) const { return x.min_admitted_prio; }
  /// Counts admitted workload w in (sign +1) or out of (−1) x's per-class and per-shape
  /// tallies.
  void CountAdmitted(TeamFlavor& x, const Wl& w, int sign);
  // Whether team u has an admitted workload on f whose eviction keeps u at or above nominal
  // on every resource `req` needs (the fair-sharing victim rule; see FairSearch).
  bool HasFairVictimSize(const Team& u, uint16_t f, const Resources& req) const {
    const TeamFlavor& x = u.tf[f];
    for (const auto& [shape, n] : x.admitted_shapes)
      if (StaysAtNominal(u, f, req, shapes[shape])) return true;
    return false;
  }
  /// A new workload slot for `s` (not yet queued). AlreadyExists, NotFound (team) or
  /// InvalidArgument naming the field.
  StatusOr<uint32_t> NewWorkload(const WorkloadSpec& s);
  uint32_t Intern(const Resources& req);
  void Enqueue(uint32_t wi);
  /// Admits pending workload wi, which is in bucket b.
  void Admit(uint32_t wi, Bucket& b);
  /// Appends admitted workload wi (admit_seq set) to its team-flavor's admitted list.
  void PushAdmitted(TeamFlavor& x, uint32_t wi);
  void DropAdmitted(TeamFlavor& x, uint32_t wi);
  void DropFromVector(std::vector<uint32_t>& v, uint32_t wi);
  /// Releases an admitted workload's quota and puts it back in its queue at its original
  /// position (a preempted workload keeps its submission time, as in Kueue).
  void Evict(uint32_t wi);
  /// Forgets workload wi in any state, releasing its quota.
  void Release(uint32_t wi);

  // ---- preemption (preemption.cc) ----

  struct Victim {
    uint32_t wi;
    PreemptionReason reason;
  };

  // Workloads admitted in the running cycle (admit_seq > cycle_first_seq) are no in-team or
  // fair-sharing victims in it (Kueue takes candidates from the snapshot at the cycle's
  // start): otherwise a job that failed in one round would evict, in the next, one admitted
  // in between, a restart from zero for nothing. Lender reclaim may still take them: it is
  // never blocked by borrowers.
  int64_t cycle_first_seq = 0;  // admit_seq at the start of the running cycle

  // A victim candidate, copied from the admitted keys so that ordering and filtering read no
  // workload. Candidate order (Kueue CandidatesOrdering): other teams first, lower priority
  // first, most recently admitted first (admit_seq is unique, so Kueue's last key, the id,
  // never decides).
  struct Cand {
    int64_t admit_seq;
    int32_t prio;
    uint32_t wi;
    uint32_t shape;
    uint32_t team;
    bool own;  // the preemptor's team
  };
  // Max-heap order: true when a is served after b.
  static bool CandAfter(const Cand& a, const Cand& b) {
    if (a.own != b.own) return a.own;
    if (a.prio != b.prio) return a.prio > b.prio;
    return a.admit_seq < b.admit_seq;
  }
  // A fair-sharing target team of a search (FairSearch) and its candidates' place in the
  // search's buffer.
  struct FairTarget {
    uint32_t team;
    size_t begin = 0;
    size_t left = 0;
    bool s2_used = false;
    bool loaded = true;  // candidates copied (other teams' are copied when first picked)
    bool partial = false;  // only the first candidate is copied (FairSearch::LoadFront)
    bool has_share = false;
    uint64_t share_version = 0;  // the team's version `share` was computed at
    Share share{};
  };
  // Scratch space of TryPreempt and FairSearch (reused: a search allocates nothing once
  // warm).
  std::vector<Cand> scratch_same_, scratch_cands_;
  std::vector<uint32_t> scratch_other_teams_, scratch_chosen_;
  std::vector<PreemptionReason> scratch_reasons_;
  std::vector<std::pair<uint32_t, uint64_t>> scratch_versions_;
  std::vector<char> scratch_keep_;
  std::vector<FairTarget> scratch_targets_;
  class FairSearch;

  /// Searches a minimal set of admitted workloads whose eviction lets `wi` fit. On success
  /// the victims are already evicted and appended to `out` in choice order; on failure
  /// nothing changes.
  bool TryPreempt(uint32_t wi, std::vector<Victim>& out);
  template <class Keep>
  void AppendCands(uint32_t ti, uint16_t f, bool own, std::vector<Cand>& out, Keep&& keep) const;
  bool IsTargetTeam(const ShareKey& k, uint32_t ti, uint16_t f, const Resources& req,
                    bool by_share) const;
  bool EnoughRoom(uint32_t wi, bool fair) const;
  void TakeVictim(uint32_t ci, PreemptionReason why);
  void UndoVictims();
  bool ClassicSearch(uint32_t wi);
  void FillBack(uint32_t wi);
  bool FairVictimsJustified(uint32_t wi);
  void EvictChosen(std::vector<Victim>& out);

  // ---- the cycle (cycle.cc) ----

  // A stream walks one team-flavor queue in queue order (priority, submission, id) by
  // merging the heads of its equivalence classes (buckets). A bucket whose head fails is
  // closed for the pass: its other workloads would fail the same way.
  // A cursor starts lazily, from its class's head keys (BucketInfo): its queue is read
  // only when the head is admitted, searched for victims or classified (Materialize).
  struct Cursor {
    Bucket* b;
    Queue::iterator it;  // valid once materialized
    // The head's queue keys, so that merging the heads reads no workload.
    int64_t ts = 0;
    uint64_t id = 0;
    int32_t prio = 0;    // the bucket's
    uint32_t shape = 0;  // the bucket's
    uint32_t slot = 0;   // the bucket's
    bool materialized = false;
    bool done = false;   // no workload left for this pass
  };
  struct DeferredClass {
    Bucket* b;
    uint32_t slot;
  };
  struct Stream {
    uint32_t team;
    uint16_t flavor;
    std::vector<Cursor> cur;
    std::vector<DeferredClass> deferred;  // classes whose head borrows: for the second pass
    int next = -1;                   // cursor of the next workload, -1 when done
    // The last failed preemption search (priority, request): dominated entries skip it.
    bool has_fail = false;
    int32_t fail_prio = 0;
    Resources fail_req{};
    uint64_t fail_epoch = 0;
    // The team's share with its head's request, for the team version and request it was
    // computed for (heads of one stream mostly repeat a few requests).
    uint64_t share_version = std::numeric_limits<uint64_t>::max();
    uint32_t share_shape = 0;
    Share share{};
  };
  struct HeapEntry {
    Share share;
    int32_t neg_prio;
    int64_t ts;
    uint64_t id;
    uint32_t stream;
    uint64_t version;
    // std::priority_queue is a max-heap: "greater" means served later.
    bool operator<(const HeapEntry& o) const {
      if (!(share == o.share)) return o.share < share;
      if (neg_prio != o.neg_prio) return neg_prio > o.neg_prio;
      if (ts != o.ts) return ts > o.ts;
      return id > o.id;
    }
  };
  // What AddStream takes of a queue.
  enum class Scan : uint8_t {
    kWhole,       // every class that may admit now (MayAdmit)
    kFresh,       // only classes with workloads queued since the last cycle (MayAdmit)
    kAll,         // every class, unfiltered (configuration changed)
    kLater,       // a later round's filter (MayAdmitLater)
    kLaterVictim, // the same, for a team that lost workloads to preemption
  };
  // LowerUsage of one priority, kept while a scan's state does not change.
  struct LowerMemo {
    int32_t prio = std::numeric_limits<int32_t>::min();
    Resources lower{};
  };

  uint64_t borrow_epoch = 0;  // bumped on every borrowing admission (invalidates fail cache)
  bool in_round = false;
  int64_t evictions = 0;
  std::vector<uint16_t> evicted_flavors;
  // Types and team-flavors that lost a workload to preemption in the running round (Round).
  std::vector<uint16_t> round_victim_flavors;
  std::vector<std::pair<uint32_t, uint16_t>> round_victim_tfs;
  std::vector<std::pair<uint32_t, uint16_t>> compact_tfs;  // hold an empty bucket
  std::vector<Stream> streams;  // reused across rounds; the first nstreams are live
  size_t nstreams = 0;

  CycleResult RunCycle(int64_t now_ms);
  void CompactBuckets();
  void Round(CycleResult& res);
  void MakeStreams();
  void RunPass(int pass, CycleResult& res);
  void AddStream(uint32_t ti, uint16_t f, Scan scan);
  void PrefetchQueued(const std::vector<uint32_t>& q, size_t i, uint16_t f) const;
  bool FreeMayFit(uint16_t f) const;
  void Seek(Cursor& c);
  Cursor MakeCursor(const TeamFlavor& x, uint32_t slot);
  void Materialize(Cursor& c);
  bool Advance(Stream& s);
  void Decide(Stream& s, int pass, CycleResult& res);
  void ClassifyNeverFit(Stream& s, CycleResult& res);
  bool FailDominated(const Stream& s, int32_t prio, const Resources& req) const;
  // The later rounds' filter (Round): the request fits what is available, or (a team that
  // lost workloads to preemption this round) the team's unused nominal quota, which it
  // may reclaim.
  bool MayAdmitLater(const TeamFlavor& x, const Resources& req, const Resources& avail,
                     bool victim_team) const {
    return FitsIn(req, avail) || (victim_team && WithinNominalAfter(x, req));
  }
  bool MayAdmit(uint32_t ti, uint16_t f, int32_t prio, const Resources& req,
                const Resources& avail, const std::optional<Share>& other,
                LowerMemo* memo = nullptr) const;
  bool BlockedNeed(uint32_t ti, uint16_t f, const std::optional<Share>& other, Resources& need,
                   Share& floor, bool& by_share) const;
  Resources LowerUsage(const TeamFlavor& x, int32_t prio) const;

  // ---- explanation (explain.cc) ----

  WhyPending Explain(uint32_t wi) const;
  void ExplainQuota(const Wl& w, WhyPending& why) const;
  void ExplainJobsAhead(const Wl& w, WhyPending& why) const;
  void ExplainVerdict(const Wl& w, WhyPending& why) const;

  // ---- queries (engine.cc) and CheckConsistency's parts (consistency.cc) ----

  /// Team `team`'s state on type `type`; nullptr when either is unknown.
  const TeamFlavor* FindTf(std::string_view team, std::string_view type) const;
  Status CheckFlavor(size_t f) const;
  Status CheckQueue(uint32_t ti, size_t f, int64_t& pending) const;
  Status CheckAdmitted(uint32_t ti, size_t f, int64_t& admitted) const;
};

}  // namespace hf::governance
