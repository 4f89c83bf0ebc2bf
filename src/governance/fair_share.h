#pragma once
// The fairness ordering of the admission engine (private to src/governance's engine files),
// kept behind a small interface as Mesos' allocator keeps its Sorter: a team's weighted
// dominant share of what the cohort lends (Share, DominantShare) and, per instance type, the
// teams borrowing on it in share order (BorrowerSet). The engine decides when a team's share
// changes (Engine::Impl::UpdateBorrower, fair_share.cc); this header only orders.
// Semantics: Kueue v0.19 fair_sharing.go (docs/governance.md "Sources").
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <set>

#include "hyperfleet/governance/engine.h"

namespace hf::governance::engine_internal {

// A GCC/Clang extension: __extension__ keeps -Wpedantic quiet about it.
__extension__ typedef __int128 Int128;

/// Weighted dominant resource share borrowed / (lendable × weight), kept as an exact
/// fraction so that equal shares compare equal. Zero-weight borrowers rank above everyone
/// and compare among themselves by the unweighted share (Kueue v0.19 CompareDRS); `inf`
/// counts those steps (and a resource nothing lends).
struct Share {
  int inf = 0;
  int64_t num = 0;
  Int128 den = 1;
  double approx = 0;  // num / den, within a relative 1e-15 (set by DominantShare)
  /// −1, 0 or 1 as a is below, equal to or above b.
  static int Cmp(const Share& a, const Share& b) {
    if (a.inf != b.inf) return a.inf < b.inf ? -1 : 1;
    // Shares that differ by more than the approximations' error are ordered by them (most
    // comparisons in scans and heaps); close ones by exact 128-bit products.
    const double d = a.approx - b.approx;
    const double tol = 1e-12 * std::max(a.approx, b.approx);
    if (d > tol) return 1;
    if (d < -tol) return -1;
    if (a.den == b.den) return a.num < b.num ? -1 : a.num > b.num ? 1 : 0;
    const Int128 l = static_cast<Int128>(a.num) * b.den;
    const Int128 r = static_cast<Int128>(b.num) * a.den;
    return l < r ? -1 : l > r ? 1 : 0;
  }
  bool operator<(const Share& o) const { return Cmp(*this, o) < 0; }
  bool operator<=(const Share& o) const { return Cmp(*this, o) <= 0; }
  bool operator==(const Share& o) const { return Cmp(*this, o) == 0; }
};

/// What the cohort lends per resource (Σ over types of the lendable quota), with the
/// inverses the share approximation multiplies by.
struct Lendable {
  Resources total{};
  std::array<double, kNumResources> inv{};  // 1 / total (0 where nothing is lent)
  void Set(const Resources& t) {
    total = t;
    for (int r = 0; r < kNumResources; ++r)
      inv[r] = total[r] > 0 ? 1.0 / static_cast<double>(total[r]) : 0;
  }
};

/// The weighted dominant share of a team that borrows `borrowed` (per resource; ≤ 0: none)
/// and has fair-share weight `weight` (0..100): max over resources of borrowed / lendable,
/// ÷ weight (Kueue fair_sharing.go). Zero when it borrows nothing.
inline Share DominantShare(const Resources& borrowed, int weight, const Lendable& l) {
  Share best;  // 0
  for (int r = 0; r < kNumResources; ++r) {
    if (borrowed[r] <= 0) continue;
    Share s;
    s.num = borrowed[r];
    if (l.total[r] > 0) {
      s.den = l.total[r];
      s.approx = static_cast<double>(borrowed[r]) * l.inv[r];
    } else {
      // Nothing lendable: any borrowing is an infinite share (ranked by amount).
      s.inf = 1;
      s.approx = static_cast<double>(borrowed[r]);
    }
    if (best < s) best = s;
  }
  if (best.num == 0) return best;
  if (weight == 0) {
    best.inf += 1;
  } else {
    best.den *= weight;
    best.approx /= weight;
  }
  return best;
}

/// A borrowing team's place in its type's BorrowerSet: descending share, then ascending
/// team index.
struct ShareKey {
  Share share;
  uint32_t team;
  bool operator<(const ShareKey& o) const {
    const int c = Share::Cmp(share, o.share);
    if (c != 0) return c > 0;
    return team < o.team;
  }
};

/// The teams borrowing on one instance type, largest share first (then team index): the
/// order of fair-sharing preemption targets. The caller keeps each member's share current
/// (Erase with the old share, Insert with the new one).
class BorrowerSet {
 public:
  using const_iterator = std::set<ShareKey>::const_iterator;
  void Insert(const Share& share, uint32_t team) { set_.insert({share, team}); }
  void Erase(const Share& share, uint32_t team) { set_.erase({share, team}); }
  void Clear() { set_.clear(); }
  size_t size() const { return set_.size(); }
  const_iterator begin() const { return set_.begin(); }
  const_iterator end() const { return set_.end(); }
  /// The largest share among members other than `team`; nullopt if none.
  std::optional<Share> MaxOther(uint32_t team) const {
    for (const ShareKey& k : set_)
      if (k.team != team) return k.share;
    return std::nullopt;
  }

 private:
  std::set<ShareKey> set_;
};

}  // namespace hf::governance::engine_internal
