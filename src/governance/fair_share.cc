// Keeping the fairness ordering (fair_share.h) current as usage and configuration change.
#include "governance/engine_impl.h"

namespace hf::governance {

void Engine::Impl::UpdateBorrower(uint32_t ti) {
  Team& t = teams[ti];
  const Share now = ShareOf(t, -1, Resources{});
  const bool changed = Share::Cmp(now, t.share) != 0;
  for (size_t f = 0; f < flavors.size(); ++f) {
    TeamFlavor& x = t.tf[f];
    const bool b = BorrowingAny(x);
    if (x.in_borrowers && (!b || changed)) flavors[f].borrowers.Erase(t.share, ti);
    if (b && (!x.in_borrowers || changed)) flavors[f].borrowers.Insert(now, ti);
    x.in_borrowers = b;
  }
  t.share = now;
}

// Shares depend on the lendable totals: every set is rebuilt.
void Engine::Impl::RebuildBorrowers() {
  for (Flavor& fl : flavors) fl.borrowers.Clear();
  for (uint32_t ti = 0; ti < teams.size(); ++ti) {
    Team& t = teams[ti];
    t.share = ShareOf(t, -1, Resources{});
    for (size_t f = 0; f < flavors.size(); ++f) {
      TeamFlavor& x = t.tf[f];
      x.in_borrowers = BorrowingAny(x);
      if (x.in_borrowers) flavors[f].borrowers.Insert(t.share, ti);
    }
  }
}

}  // namespace hf::governance
