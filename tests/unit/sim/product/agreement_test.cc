// The check: the product engine and the parametric engine agree on Hyperfleet's
// strategy when given the same latencies.
#include <gtest/gtest.h>

#include "hyperfleet/sim/parametric_engine.h"
#include "hyperfleet/sim/product/product_engine.h"

namespace hf::sim::product {
namespace {

/// Minutes of a Dist's mean.
double Mean(const Dist& d) { return d.mean_min; }

/// Hyperfleet's strategy with the parametric engine's stage latencies set to what the product
/// engine's simulated world takes (ProductLatencies' means), stage by stage:
///  - D1 (a stopped machine): dead_visible + half the 1 s liveness period until the planner
///    marks it, + slurm_mark until Slurm requeues the job;
///  - D2 (cut off): unresponsive_after (10 s) + half a liveness period + slurm_mark;
///  - swap: the job restarts on an idle spare at once (0); provision: a replacement (kill,
///    boot, agent start) — with spares it is rarely waited for;
///  - restart: Slurm's start of the requeued job + the application's restart.
/// D3-D5 detection, checkpoints and repairs are the strategy's in both engines.
Strategy SameLatencies(const ProductOptions& o) {
  const ProductLatencies& l = o.latencies;
  Strategy s = HyperfleetStrategy();
  const double half_pass = Sec(0.5);
  s.detect[static_cast<int>(DetectClass::kD1Loud)] =
      Dist{Mean(l.dead_visible) + half_pass + Mean(l.slurm_mark), 0};
  s.detect[static_cast<int>(DetectClass::kD2Network)] =
      Dist{Sec(10) + half_pass + Mean(l.slurm_mark), 0};
  s.swap = Dist{0, 0};
  s.provision = Dist{Mean(l.kill) + Mean(l.boot) + Mean(l.agent_start), 0};
  s.restart = Dist{Mean(l.slurm_start) + Mean(o.app_restart), 0};
  return s;
}

TEST(EnginesAgree, OnHyperfleetsStrategyGivenTheSameLatencies) {
  FgufParams p = FgufParams::PurePoisson();
  p.fleet_nodes = 80;
  p.job_nodes = 64;
  p.horizon_days = 14;
  p.rate_per_1000_node_days = 33;  // about 30 faults per run
  const int spares = 4;
  const ProductOptions options;
  const Strategy s = SameLatencies(options);
  double product = 0, parametric = 0;
  int faults = 0;
  const int seeds = 8;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(seeds); ++seed) {
    ProductEngine engine(p, s, spares, seed, options);
    ASSERT_TRUE(engine.bringUp().ok());
    const RunResult a = engine.run();
    const RunResult b = RunParametric(p, s, spares, seed);
    product += a.ettr / seeds;
    parametric += b.ettr / seeds;
    faults += b.interruptions;
  }
  EXPECT_GT(faults, 8 * 15);
  // Tolerance 0.1 pt of ETTR. Both engines see the same faults at the same times (common
  // random numbers) and charge them through the same JobLedger; what differs is each stage's
  // draw (the product's latencies vary, cv 0.2-0.5, around the means the parametric engine
  // takes) and where each failure falls in the checkpoint cycle. The latter dominates: rework
  // per failure is uniform on [0, tau] with tau ~ 3.4 min here (Young, delta = 0.5 s), so
  // about 30 failures in 20,160 min give 0.03 pt of independent noise per run and engine, 0.013
  // pt on the difference of 8-run means; per-stage differences of a second or two add
  // 30 * 2 s / 20,160 min = 0.005 pt. 0.1 pt is several times both and far below the
  // differences between strategies (tens of points). Measured: 0.99322 against 0.99328; with
  // the product's application restart 1.5 min longer than the parametric engine is told, 0.24
  // pt apart (the test fails).
  EXPECT_NEAR(product, parametric, 0.001) << "product " << product << " parametric " << parametric;
}

}  // namespace
}  // namespace hf::sim::product
