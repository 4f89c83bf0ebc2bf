// Pending queues (a team's queue on a type as equivalence classes: Bucket, BucketInfo, the
// queue summary) and the workload state transitions that move workloads between them and
// the admitted lists: submit, admit, evict, release.
#include <algorithm>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "governance/engine_impl.h"

namespace hf::governance {

// ---- pending queues ----

inline Bucket& Engine::Impl::BucketFor(TeamFlavor& x, uint8_t cls, int32_t prio, uint32_t shape) {
  for (size_t i = 0; i < x.info.size(); ++i)
    if (x.info[i].cls == cls && x.info[i].shape == shape) return *x.buckets[i];
  // Reuse an empty bucket (no stream holds one outside a round).
  if (!in_round) {
    for (size_t i = 0; i < x.info.size(); ++i) {
      if (x.info[i].size == 0) {
        x.info[i] = BucketInfo{shape, prio, 0, cls, false};
        return *x.buckets[i];
      }
    }
  }
  x.buckets.push_back(std::make_unique<Bucket>(&wls));
  Bucket& b = *x.buckets.back();
  b.slot = static_cast<uint32_t>(x.info.size());
  x.info.push_back(BucketInfo{shape, prio, 0, cls, false});
  return b;
}

Bucket* Engine::Impl::FindBucket(TeamFlavor& x, const Wl& w) {
  for (size_t i = 0; i < x.info.size(); ++i)
    if (x.info[i].cls == w.cls && x.info[i].shape == w.shape) return x.buckets[i].get();
  return nullptr;
}

const Bucket* Engine::Impl::FindBucket(const TeamFlavor& x, const Wl& w) const {
  for (size_t i = 0; i < x.info.size(); ++i)
    if (x.info[i].cls == w.cls && x.info[i].shape == w.shape) return x.buckets[i].get();
  return nullptr;
}

Bucket& Engine::Impl::InsertPending(uint32_t wi) {
  Wl& w = wls[wi];
  w.state = WlState::kPending;
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  Bucket& b = BucketFor(x, w.cls, w.prio, w.shape);
  const bool was_empty = b.q.empty();
  b.q.insert(wi);
  BucketInfo& bi = x.info[b.slot];
  ++bi.size;
  if (was_empty || w.ts < bi.head_ts || (w.ts == bi.head_ts && w.id < bi.head_id))
    SetHead(bi, w);
  ++x.npending;
  x.skip_valid = false;
  if (was_empty) {
    if (!x.summary_dirty) {
      const Resources& req = ReqOf(w);
      for (int r = 0; r < kNumResources; ++r) x.min_req[r] = std::min(x.min_req[r], req[r]);
      x.max_prio = std::max(x.max_prio, w.prio);
      if (x.npending == 1) {
        x.min_req = req;
        x.max_prio = w.prio;
      }
    }
  }
  if (!x.listed) {
    x.listed = true;
    flavors[w.flavor].queued.push_back(w.team);
  }
  return b;
}

inline void Engine::Impl::ErasePending(uint32_t wi, Bucket& b) {
  const Wl& w = wls[wi];
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  const bool was_head = x.info[b.slot].head_id == w.id;
  b.q.erase(wi);
  --x.info[b.slot].size;
  --x.npending;
  if (b.q.empty()) BucketEmptied(w.team, w.flavor);
  else if (was_head) SetHead(x.info[b.slot], wls[*b.q.begin()]);
}

void Engine::Impl::BucketEmptied(uint32_t ti, uint16_t f) {
  TeamFlavor& x = teams[ti].tf[f];
  x.summary_dirty = true;
  if (!x.needs_compact) {
    x.needs_compact = true;
    compact_tfs.emplace_back(ti, f);
  }
}

// The queue summary (smallest request, highest priority) over the non-empty buckets.
void Engine::Impl::RecountSummary(TeamFlavor& x) {
  x.summary_dirty = false;
  bool first = true;
  for (const BucketInfo& b : x.info) {
    if (b.size == 0) continue;
    const Resources& req = shapes[b.shape];
    if (first) {
      x.min_req = req;
      x.max_prio = b.prio;
      first = false;
      continue;
    }
    for (int r = 0; r < kNumResources; ++r) x.min_req[r] = std::min(x.min_req[r], req[r]);
    x.max_prio = std::max(x.max_prio, b.prio);
  }
}

int32_t Engine::Impl::CountMinAdmittedPrio(const TeamFlavor& x) const {
  int32_t best = std::numeric_limits<int32_t>::max();
  for (int slot = 0; slot < kClassSlots; ++slot) {
    if (x.admitted_by_class[slot] == 0) continue;
    const int32_t p = slot == 10 ? 0 : class_weight[slot];
    best = std::min(best, p);
  }
  return best;
}

void Engine::Impl::CountAdmitted(TeamFlavor& x, const Wl& w, int sign) {
  const int slot = ClassSlot(w.cls);
  x.admitted_by_class[slot] += sign;
  // Only a class appearing or disappearing moves the minimum.
  if (x.admitted_by_class[slot] == (sign > 0 ? 1u : 0u)) x.min_admitted_prio = CountMinAdmittedPrio(x);
  const Resources& req = ReqOf(w);
  for (int r = 0; r < kNumResources; ++r) x.admitted_usage_by_class[slot][r] += sign * req[r];
  auto& v = x.admitted_shapes;
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& e) { return e.first == w.shape; });
  if (it == v.end()) it = v.insert(v.end(), {w.shape, 0});
  it->second += sign;
  if (it->second == 0) {
    *it = v.back();
    v.pop_back();
  }
}

// ---- workloads ----

StatusOr<uint32_t> Engine::Impl::NewWorkload(const WorkloadSpec& s) {
  if (by_id.contains(s.id))
    return absl::AlreadyExistsError(absl::StrCat("workload ", s.id, " already exists"));
  auto ti = team_index.find(s.team);
  if (ti == team_index.end())
    return absl::NotFoundError(absl::StrCat("team ", s.team, " has no compute quota"));
  auto fi = flavor_index.find(s.instance_type);
  if (fi == flavor_index.end())
    return absl::InvalidArgumentError(
        absl::StrCat("instance type ", s.instance_type, " is not in the cluster"));
  if (s.count < 1) return absl::InvalidArgumentError("count must be ≥ 1");
  uint8_t cls = kNoClass;
  if (!s.priority_class.empty()) {
    auto ci = class_index.find(s.priority_class);
    if (ci == class_index.end())
      return absl::InvalidArgumentError(
          absl::StrCat("priority class ", s.priority_class, " is not in the cluster policy"));
    cls = ci->second;
  }
  Resources req{};
  const Resources& inst = flavors[fi->second].per_instance;
  for (int r = 0; r < kNumResources; ++r) {
    const int64_t per = s.per_pod ? (*s.per_pod)[r] : inst[r];
    if (per < 0) return absl::InvalidArgumentError("per_pod: negative resource");
    req[r] = per * s.count;
  }
  uint32_t wi;
  if (!free_wls.empty()) {
    wi = free_wls.back();
    free_wls.pop_back();
  } else {
    wi = static_cast<uint32_t>(wls.size());
    wls.emplace_back();
  }
  Wl& w = wls[wi];
  w = Wl{};
  w.id = s.id;
  w.ts = s.submit_time_ms;
  w.shape = Intern(req);
  w.team = ti->second;
  w.flavor = fi->second;
  {
    Flavor& fl = flavors[w.flavor];
    for (int r = 0; r < kNumResources; ++r)
      fl.min_req_seen[r] = fl.any_seen ? std::min(fl.min_req_seen[r], req[r]) : req[r];
    fl.any_seen = true;
  }
  w.cls = cls;
  w.prio = cls == kNoClass ? 0 : class_weight[cls];
  by_id.emplace(s.id, wi);
  return wi;
}

inline uint32_t Engine::Impl::Intern(const Resources& req) {
  auto [it, inserted] = shape_index.try_emplace(req, static_cast<uint32_t>(shapes.size()));
  if (inserted) shapes.push_back(req);
  return it->second;
}

void Engine::Impl::Enqueue(uint32_t wi) {
  Wl& w = wls[wi];
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  w.queued_cycle = static_cast<int32_t>(cycle);
  Bucket& b = InsertPending(wi);
  x.info[b.slot].fresh = true;
  if (!x.has_fresh) {
    x.has_fresh = true;
    fresh_tfs.emplace_back(w.team, w.flavor);
  }
  ++pending_count;
}

void Engine::Impl::Admit(uint32_t wi, Bucket& b) {
  Wl& w = wls[wi];
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  ErasePending(wi, b);
  --pending_count;
  w.state = WlState::kAdmitted;
  w.admit_seq = ++admit_seq;
  PushAdmitted(x, wi);
  CountAdmitted(x, w, +1);
  AddUsage(w.team, w.flavor, ReqOf(w), +1);
  ++admitted_count;
}

void Engine::Impl::PushAdmitted(TeamFlavor& x, uint32_t wi) {
  Wl& w = wls[wi];
  w.pos = static_cast<uint32_t>(x.admitted.size());
  x.admitted.push_back(wi);
  x.admitted_keys.push_back({w.admit_seq, w.prio, w.shape});
}

// Takes workload wi out of its team-flavor's admitted list (swap with the last).
inline void Engine::Impl::DropAdmitted(TeamFlavor& x, uint32_t wi) {
  const uint32_t pos = wls[wi].pos;
  x.admitted_keys[pos] = x.admitted_keys.back();
  x.admitted_keys.pop_back();
  DropFromVector(x.admitted, wi);
}

inline void Engine::Impl::DropFromVector(std::vector<uint32_t>& v, uint32_t wi) {
  const uint32_t pos = wls[wi].pos;
  const uint32_t last = v.back();
  v[pos] = last;
  wls[last].pos = pos;
  v.pop_back();
  wls[wi].pos = kNone;
}

void Engine::Impl::Evict(uint32_t wi) {
  Wl& w = wls[wi];
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  DropAdmitted(x, wi);
  CountAdmitted(x, w, -1);
  AddUsage(w.team, w.flavor, ReqOf(w), -1);
  --admitted_count;
  w.evicted_cycle = static_cast<int32_t>(cycle);
  ++evictions;
  evicted_flavors.push_back(w.flavor);
  if (x.victim_round != round_seq) {
    x.victim_round = round_seq;
    round_victim_tfs.emplace_back(w.team, w.flavor);
  }
  if (!flavors[w.flavor].victims_this_round) {
    flavors[w.flavor].victims_this_round = true;
    round_victim_flavors.push_back(w.flavor);
  }
  w.queued_cycle = static_cast<int32_t>(cycle) - 1;  // it was considered before
  InsertPending(wi);
  ++pending_count;
}

void Engine::Impl::Release(uint32_t wi) {
  Wl& w = wls[wi];
  TeamFlavor& x = teams[w.team].tf[w.flavor];
  switch (w.state) {
    case WlState::kAdmitted:
      DropAdmitted(x, wi);
      CountAdmitted(x, w, -1);
      AddUsage(w.team, w.flavor, ReqOf(w), -1);
      ++flavors[w.flavor].gen;
      --admitted_count;
      break;
    case WlState::kPending:
      ErasePending(wi, *FindBucket(x, w));
      --pending_count;
      break;
    case WlState::kNeverFit:
      DropFromVector(x.never_fit, wi);
      --pending_count;
      break;
    case WlState::kFree:
      break;
  }
  by_id.erase(w.id);
  w.state = WlState::kFree;
  free_wls.push_back(wi);
}

}  // namespace hf::governance
