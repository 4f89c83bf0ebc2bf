// The FGUF-1 failure process: reproducible per seed, rates and mix as parameterised, and
// independent streams (common random numbers).
#include "hyperfleet/sim/failure_process.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace hf::sim {
namespace {

std::vector<FleetEvent> Drain(FailureProcess& p) {
  std::vector<FleetEvent> out;
  while (std::isfinite(p.PeekTime())) out.push_back(p.Pop());
  return out;
}

bool SameEvent(const FleetEvent& a, const FleetEvent& b) {
  return a.t_min == b.t_min && a.kind == b.kind && a.node == b.node && a.cause == b.cause &&
         a.remedy == b.remedy && a.group_first == b.group_first;
}

TEST(FailureProcessTest, SameSeedSameHistoryOtherSeedOtherHistory) {
  const FgufParams params;
  FailureProcess a(params, 7), b(params, 7), c(params, 8);
  const auto ea = Drain(a), eb = Drain(b), ec = Drain(c);
  ASSERT_EQ(ea.size(), eb.size());
  for (size_t i = 0; i < ea.size(); ++i) ASSERT_TRUE(SameEvent(ea[i], eb[i])) << "event " << i;
  EXPECT_FALSE(ea.size() == ec.size() && SameEvent(ea[0], ec[0]));
  for (size_t i = 1; i < ea.size(); ++i) ASSERT_LE(ea[i - 1].t_min, ea[i].t_min);
  EXPECT_LE(ea.back().t_min, params.horizon_min());
}

// Streams are independent: turning planned interruptions and fail-slow off, or changing the
// cause mix, leaves every node fault at the same time on the same node.
TEST(FailureProcessTest, NodeFaultTimesDoNotDependOnOtherStreams) {
  FgufParams full;
  FgufParams bare = full;
  bare.planned_per_day = 0;
  bare.fail_slow_per_day = 0;
  bare.causes = HardCauseMix();
  FailureProcess a(full, 3), b(bare, 3);
  std::vector<std::pair<double, int>> fa, fb;
  for (const FleetEvent& e : Drain(a)) {
    if (e.kind == EventKind::kFault) fa.emplace_back(e.t_min, e.node);
  }
  for (const FleetEvent& e : Drain(b)) {
    if (e.kind == EventKind::kFault) fb.emplace_back(e.t_min, e.node);
  }
  EXPECT_EQ(fa, fb);
}

// The fleet-average rate stays r_f with lemons (base rescaled); lemons fail 10× as often.
TEST(FailureProcessTest, LemonsKeepTheFleetAverageRate) {
  FgufParams p;
  p.horizon_days = 540;  // 10× Llama 3's snapshot: ~4,200 faults
  FailureProcess proc(p, 11);
  int lemons = 0;
  for (int k = 0; k < proc.fleet_nodes(); ++k) lemons += proc.traits(k).lemon ? 1 : 0;
  EXPECT_EQ(lemons, static_cast<int>(std::lround(0.02 * 2048)));
  int faults = 0, lemon_faults = 0;
  for (const FleetEvent& e : Drain(proc)) {
    if (e.kind != EventKind::kFault) continue;
    ++faults;
    lemon_faults += proc.traits(e.node).lemon ? 1 : 0;
  }
  const double expected = 3.8 / 1000 * 2048 * 540;
  EXPECT_NEAR(faults / expected, 1.0, 0.05) << faults << " faults, expected " << expected;
  // Lemons: 41 × 10 / (2007 + 410) of the faults.
  EXPECT_NEAR(static_cast<double>(lemon_faults) / faults, 410.0 / 2417, 0.03);
}

// Causes follow Llama 3 Table 5's shares; the hard variant has D4 8 % and D5 2 %.
TEST(FailureProcessTest, CauseMixFollowsTheTable) {
  FgufParams p = FgufParams::PurePoisson();
  p.horizon_days = 2000;
  FailureProcess proc(p, 5);
  std::vector<int> by_class(kDetectClassCount, 0);
  int n = 0;
  for (const FleetEvent& e : Drain(proc)) {
    ++by_class[static_cast<int>(e.detect)];
    ++n;
  }
  const double expected[] = {0.735, 0.100, 0.134, 0.017, 0.014};
  for (int c = 0; c < kDetectClassCount; ++c) {
    EXPECT_NEAR(static_cast<double>(by_class[c]) / n, expected[c], 0.01)
        << ToString(static_cast<DetectClass>(c));
  }
  double d4 = 0, d5 = 0, sum = 0;
  for (const CauseSpec& c : HardCauseMix()) {
    sum += c.share;
    if (c.detect == DetectClass::kD4Hang) d4 += c.share;
    if (c.detect == DetectClass::kD5Silent) d5 += c.share;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(d4, 0.08, 1e-12);
  EXPECT_NEAR(d5, 0.02, 1e-12);
}

TEST(FailureProcessTest, PlannedAndFailSlowEventsAtTheirRates) {
  FgufParams p;
  p.horizon_days = 1000;
  FailureProcess proc(p, 2);
  int planned = 0, starts = 0, ends = 0;
  double slow_min = 0, start = 0;
  for (const FleetEvent& e : Drain(proc)) {
    if (e.kind == EventKind::kPlanned) ++planned;
    if (e.kind == EventKind::kFailSlowStart) {
      ++starts;
      start = e.t_min;
      EXPECT_EQ(e.factor, 1.2);
    }
    if (e.kind == EventKind::kFailSlowEnd) {
      ++ends;
      slow_min += e.t_min - start;
    }
  }
  EXPECT_NEAR(planned / (47.0 / 54 * 1000), 1.0, 0.05);
  EXPECT_NEAR(starts / (0.5 * 1000), 1.0, 0.1);
  EXPECT_NEAR(slow_min / ends, 24.0, 3.0) << "lognormal mean 24 min";
}

TEST(FailureProcessTest, CorrelatedEventsEvictAlignedGroups) {
  FgufParams p;
  p.correlated_share = 0.5;
  FailureProcess proc(p, 9);
  int groups = 0;
  for (const FleetEvent& e : Drain(proc)) {
    if (e.group_size == 0) continue;
    ++groups;
    EXPECT_EQ(e.group_first % 32, 0);
    EXPECT_EQ(e.group_size, 32);
    EXPECT_GE(e.node, e.group_first);
    EXPECT_LT(e.node, e.group_first + 32);
    EXPECT_EQ(e.detect, DetectClass::kD2Network);
  }
  EXPECT_GT(groups, 100);
}

TEST(FailureProcessTest, RepairsReturnBadAtTheirShareAndBadNodesFailSoon) {
  FgufParams p;
  p.bad_return_share = 0.3;
  FailureProcess proc(p, 4);
  int bad = 0, caught = 0;
  for (int k = 0; k < 1000; ++k) {
    const RepairOutcome r = proc.Repair(k, Remedy::kReboot, 100, 20, 0.5);
    EXPECT_NEAR(r.done_min, 100 + 15 + 20, 1e-9) << "reboot 15 min + deep check 20";
    bad += r.bad ? 1 : 0;
    caught += r.caught_by_check ? 1 : 0;
  }
  EXPECT_NEAR(bad / 1000.0, 0.3, 0.05);
  EXPECT_NEAR(caught / static_cast<double>(bad), 0.5, 0.1);
  // A bad return fails at 50× its rate: within days, not months.
  FgufParams q = FgufParams::PurePoisson();
  q.bad_return_multiplier = 1e6;
  FailureProcess fast(q, 1);
  fast.ReturnBad(5, 10);
  ASSERT_TRUE(std::isfinite(fast.PeekTime()));
  const FleetEvent e = fast.Pop();
  EXPECT_EQ(e.node, 5);
  EXPECT_TRUE(e.bad_return);
  EXPECT_EQ(e.remedy, Remedy::kReplace);
  fast.ReturnBad(6, 10);
  fast.ClearBad(6);
  EXPECT_GT(fast.PeekTime(), 11) << "a cleared bad return never fires";
}

}  // namespace
}  // namespace hf::sim
