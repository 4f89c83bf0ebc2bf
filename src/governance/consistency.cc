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
