// The parametric engine on FGUF-1's full model: reproducible, common random numbers across
// strategies, every minute accounted, FGUF-1's expected results, and the mechanisms (spares,
// lemon quarantine, stragglers, bad returns, SDC) doing what they claim.
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "hyperfleet/sim/grid.h"
#include "hyperfleet/sim/parametric_engine.h"

namespace hf::sim {
namespace {

const Strategy& ById(const std::string& id) {
  static const std::vector<Strategy> all = AllStrategies();
  const Strategy* s = FindStrategy(all, id);
  if (s == nullptr) throw std::runtime_error("no strategy " + id);
  return *s;
}

TEST(EngineTest, SameSeedSameResult) {
  const FgufParams p;
  const RunResult a = RunParametric(p, ById("B1"), 16, 42);
  const RunResult b = RunParametric(p, ById("B1"), 16, 42);
  EXPECT_EQ(ToJson(a).dump(), ToJson(b).dump());
  const RunResult c = RunParametric(p, ById("B1"), 16, 43);
  EXPECT_NE(a.ettr, c.ettr);
}

// Common random numbers: every strategy and spare level sees the same fault history.
TEST(EngineTest, StrategiesSeeTheSameFailureHistory) {
  const FgufParams p;
  const RunResult ref = RunParametric(p, ById("A0"), 4, 7);
  EXPECT_GT(ref.fault_events, 300);
  for (const Strategy& s : AllStrategies()) {
    for (int spares : {0, 48}) {
      const RunResult r = RunParametric(p, s, spares, 7);
      EXPECT_EQ(r.fault_events, ref.fault_events) << s.id << " spares " << spares;
      EXPECT_DOUBLE_EQ(r.fault_history_hash, ref.fault_history_hash) << s.id;
    }
  }
}

TEST(EngineTest, EveryMinuteIsAccounted) {
  for (const Strategy& s : AllStrategies()) {
    FgufParams p;
    p.causes = HardCauseMix();
    const RunResult r = RunParametric(p, s, 8, 3);
    const double sum = std::accumulate(r.loss_pct.begin(), r.loss_pct.end(), 100 * r.ettr);
    EXPECT_NEAR(sum, 100, 1e-6) << s.id;
    EXPECT_GT(r.ettr, 0) << s.id;
    EXPECT_LE(r.min_window_ettr, r.ettr) << s.id;
    EXPECT_NEAR(r.fleet_goodput, r.ettr * 2000 / 2048, 1e-9) << s.id;
    EXPECT_EQ(r.interruptions,
              std::accumulate(r.interruptions_by_class.begin(), r.interruptions_by_class.end(), 0));
  }
}

// FGUF-1's expected results (Daly exact, r_f = 3.8, no lemons or fail-slow, every failure a
// loud node fault replaced at the strategy's downtime): each strategy at N = 128, 512 and
// 2,000 within ±0.02 of the table (10 seeds; 48 spares).
TEST(EngineTest, ReproducesTheExpectedResultsTable) {
  GridSpec g;
  g.base = FgufParams::PurePoisson();
  g.base.causes = {{Cause::kGpuHard, 1.0, DetectClass::kD1Loud, 0, true, 0}};
  g.strategies = PublishedStrategies();
  g.job_nodes = {128, 512, 2000};
  g.spares = {48};
  g.seeds = 10;
  const std::vector<Aggregate> rows = RunGrid(g);
  const std::vector<std::array<double, 3>> table = {
      {0.88, 0.65, 0.20}, {0.88, 0.75, 0.41}, {0.99, 0.97, 0.91}, {0.98, 0.95, 0.82},
      {0.95, 0.90, 0.72}, {0.98, 0.98, 0.97}, {0.997, 0.994, 0.985}};
  ASSERT_EQ(rows.size(), 21u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double target = table[i / 3][i % 3];
    EXPECT_NEAR(rows[i].ettr.mean, target, 0.02)
        << "expected results " << rows[i].strategy_id << " N = " << rows[i].job_nodes << ": target "
        << target << ", got " << rows[i].ettr.mean;
    EXPECT_EQ(rows[i].replications, 10);
    EXPECT_LE(rows[i].ettr.lo, rows[i].ettr.mean);
  }
}

// The headline's ranking survives lemons, fail-slow and the hard D4/D5 mix.
TEST(EngineTest, RankingSurvivesTheFullModel) {
  GridSpec g;
  g.base.causes = HardCauseMix();
  g.strategies = AllStrategies();
  g.spares = {16};
  g.seeds = 5;
  const std::vector<Aggregate> rows = RunGrid(g);
  auto ettr = [&](const std::string& id) {
    for (const Aggregate& a : rows) {
      if (a.strategy_id == id) return a.ettr.mean;
    }
    return -1.0;
  };
  EXPECT_LT(ettr("A0"), ettr("A1"));
  EXPECT_LT(ettr("B1b"), ettr("B1"));
  EXPECT_LT(ettr("B1"), ettr("B2"));
  EXPECT_LT(ettr("B2"), ettr("C"));
  EXPECT_GE(ettr("C"), 0.95) << "C target with everything on";
}

TEST(EngineTest, SparesShortenTheWaitForANode) {
  FgufParams p;
  p.fleet_nodes = 2048;
  const RunResult none = RunParametric(p, ById("B1"), 0, 5);
  const RunResult many = RunParametric(p, ById("B1"), 48, 5);
  EXPECT_GT(none.spare_exhaustions, many.spare_exhaustions);
  EXPECT_GT(none.loss_pct[static_cast<int>(Loss::kWaitNode)],
            many.loss_pct[static_cast<int>(Loss::kWaitNode)]);
  EXPECT_LT(none.ettr, many.ettr);
  // A taken spare is replaced in the background from the idle fleet (provision + deep
  // check), so a few spares cover a 7-a-day failure rate.
  const RunResult few = RunParametric(p, ById("B2"), 4, 5);
  EXPECT_LT(few.loss_pct[static_cast<int>(Loss::kWaitNode)], 2.0);
  EXPECT_GT(RunParametric(p, ById("B2"), 0, 5).loss_pct[static_cast<int>(Loss::kWaitNode)], 20.0)
      << "without spares every replacement waits for provisioning and a 2-h deep check";
}

TEST(EngineTest, QuarantineStragglersAndBadReturnsAreCounted) {
  FgufParams p;
  p.bad_return_share = 0.3;
  const RunResult c = RunParametric(p, ById("C"), 16, 9);
  EXPECT_GT(c.lemons_quarantined, 0);
  EXPECT_GT(c.straggler_evictions, 0);
  EXPECT_LT(c.loss_pct[static_cast<int>(Loss::kFailSlow)], 1.0) << "slow nodes evicted";
  const RunResult a0 = RunParametric(p, ById("A0"), 16, 9);
  EXPECT_EQ(a0.lemons_quarantined, 0);
  EXPECT_EQ(a0.straggler_evictions, 0);
  // A slow node paces the job whenever it runs: 10 % more wall per minute of work.
  EXPECT_GT(a0.loss_pct[static_cast<int>(Loss::kFailSlow)], 0.08 * 100 * a0.ettr);
  EXPECT_GT(a0.bad_returns, 0) << "no deep check: bad returns reach the job";
}

// A quarantined node goes through the quarantine repair and comes back, so a high failure
// rate does not drain the buffer: at r_f 9.4, HF keeps within 3 pt of its quarantine-off ETTR
// (30 % against 94 % when quarantined nodes were retired for good), and real lemons are still
// caught far more often per node than healthy ones.
TEST(EngineTest, QuarantineReturnsNodesAndCatchesLemons) {
  FgufParams p;
  p.rate_per_1000_node_days = 9.4;
  Strategy off = HyperfleetStrategy();
  off.quarantine_lemons = false;
  double on_ettr = 0, off_ettr = 0, lemon_q = 0, healthy_q = 0;
  constexpr int kSeeds = 4;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const RunResult on = RunParametric(p, HyperfleetStrategy(), 16, seed);
    on_ettr += on.ettr / kSeeds;
    off_ettr += RunParametric(p, off, 16, seed).ettr / kSeeds;
    lemon_q += on.lemons_quarantined;
    healthy_q += on.healthy_quarantined;
  }
  EXPECT_GT(on_ettr, off_ettr - 0.03) << "quarantine drains the buffer";
  EXPECT_LT(on_ettr, off_ettr + 0.03);
  const double lemons = std::lround(p.lemon_share * p.fleet_nodes);
  EXPECT_GT(lemon_q / lemons, 10 * healthy_q / (p.fleet_nodes - lemons))
      << "per node, real lemons are caught far more often than healthy nodes";
  EXPECT_GT(healthy_q, 0) << "bad luck does catch healthy nodes at this rate";
}

// Hyperfleet today: no quarantine, no eviction, no deep checks; hangs end at NCCL's 10-min
// watchdog; below the planned strategy (HF) on the same failures.
TEST(EngineTest, HyperfleetTodayDoesOnlyWhatItDoes) {
  const Strategy& today = ById("HF0");
  EXPECT_FALSE(today.quarantine_lemons);
  EXPECT_LT(today.straggler_evict_min, 0);
  EXPECT_EQ(today.deep_check_min, 0);
  EXPECT_EQ(today.detect[static_cast<int>(DetectClass::kD1Loud)].mean_min,
            ById("HF").detect[static_cast<int>(DetectClass::kD1Loud)].mean_min);
  EXPECT_EQ(today.swap.mean_min, ById("HF").swap.mean_min);
  const FgufParams p;
  double hf0 = 0, hf = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const RunResult r = RunParametric(p, today, 16, seed);
    EXPECT_EQ(r.lemons_quarantined + r.healthy_quarantined + r.false_positive_evictions, 0);
    EXPECT_EQ(r.straggler_evictions, 0);
    if (r.interruptions_by_class[static_cast<int>(StopClass::kD4)] > 0) {
      EXPECT_GE(r.mttr_by_class_min[static_cast<int>(StopClass::kD4)], 10) << "NCCL watchdog";
    }
    hf0 += r.ettr;
    hf += RunParametric(p, ById("HF"), 16, seed).ettr;
  }
  EXPECT_LT(hf0, hf);
  bool watchdog = false;
  for (const std::string& a : today.assumptions) watchdog |= a.find("10-min") != std::string::npos;
  EXPECT_TRUE(watchdog);
}

TEST(EngineTest, SilentCorruptionIsRolledBack) {
  FgufParams p = FgufParams::PurePoisson();
  p.causes = {{Cause::kSdc, 1.0, DetectClass::kD5Silent, 0, true, 0}};
  const RunResult a1 = RunParametric(p, ById("A1"), 48, 1);  // SDC found in hours
  const RunResult c = RunParametric(p, ById("C"), 48, 1);    // in minutes
  const double a1_sdc = a1.loss_pct[static_cast<int>(Loss::kSdcRollback)];
  const double c_sdc = c.loss_pct[static_cast<int>(Loss::kSdcRollback)];
  EXPECT_GT(a1_sdc, 10);
  EXPECT_LT(c_sdc, a1_sdc / 5) << "minutes, not hours, of corrupted steps";
  EXPECT_GT(c.interruptions_by_class[static_cast<int>(StopClass::kD5)], 0);
}

TEST(EngineTest, HyperfleetListsItsAssumptions) {
  const RunResult r = RunParametric(FgufParams(), HyperfleetStrategy(), 16, 1);
  EXPECT_EQ(r.strategy_id, "HF");
  ASSERT_FALSE(r.assumptions.empty());
  bool hang = false;
  for (const std::string& a : r.assumptions) hang |= a.find("detect.D4") != std::string::npos;
  EXPECT_TRUE(hang) << "hang detection is not Hyperfleet's yet";
  for (const Strategy& s : PublishedStrategies()) EXPECT_TRUE(s.assumptions.empty()) << s.id;
}

TEST(EngineTest, RejectsImpossibleConfigurations) {
  FgufParams p;
  EXPECT_THROW(RunParametric(p, ById("C"), 49, 1), std::invalid_argument);
  p.job_nodes = 0;
  EXPECT_THROW(RunParametric(p, ById("C"), 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace hf::sim
