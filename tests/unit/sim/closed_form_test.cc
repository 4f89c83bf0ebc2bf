// Closed forms against their published anchors: FGUF-1 validation V0 and V2, and the
// Llama 3 feasibility grid (Daly's exact ETTR at τ = Young's optimum).
#include "hyperfleet/sim/closed_form.h"

#include <cmath>

#include <gtest/gtest.h>

namespace hf::sim {
namespace {

// V0: Daly's own figure captions (R = 10 min, δ = 5 min): M = 24 h → 117 min, 6 h → 57 min,
// 15 min → 9.1 min [Daly, FGCS 22(3), 2006]; tolerance ±1 %.
TEST(ClosedFormTest, V0DalyOptimumIntervalMatchesDalysFigures) {
  struct Case {
    double mtbf_min, target_min;
  };
  for (const Case& c : {Case{24 * 60, 117}, Case{6 * 60, 57}, Case{15, 9.1}}) {
    const double got = DalyInterval(5, c.mtbf_min);
    EXPECT_LE(std::abs(got - c.target_min) / c.target_min, 0.01)
        << "V0: Daly tau* for M = " << c.mtbf_min << " min: target " << c.target_min
        << " min, got " << got;
  }
  EXPECT_DOUBLE_EQ(DalyInterval(5, 2), 2) << "delta >= 2M: tau* = M";
}

// V2: job MTTF with r_f = 6.5: 1.80 h at 16,384 GPUs, 0.23 h at 131,072 (8 GPUs per node),
// and 28.8 h at 1,024 GPUs [Kokolis et al., arXiv 2410.21680]; exact at the printed digits.
TEST(ClosedFormTest, V2JobMttfReproducesKokolisProjections) {
  EXPECT_EQ(std::round(JobMttfHours(16384 / 8, 6.5) * 100) / 100, 1.80)
      << "V2 16,384 GPUs: " << JobMttfHours(16384 / 8, 6.5);
  EXPECT_EQ(std::round(JobMttfHours(131072 / 8, 6.5) * 100) / 100, 0.23)
      << "V2 131,072 GPUs: " << JobMttfHours(131072 / 8, 6.5);
  EXPECT_EQ(std::round(JobMttfHours(1024 / 8, 6.5) * 10) / 10, 28.8);
}

TEST(ClosedFormTest, YoungIsTheFirstOrderOfDaly) {
  EXPECT_DOUBLE_EQ(YoungInterval(2, 100), 20);
  // δ ≪ M: Daly's correction vanishes.
  EXPECT_NEAR(DalyInterval(0.01, 1e5) / YoungInterval(0.01, 1e5), 1.0, 1e-3);
}

// Llama 3 feasibility grid (λ = 466 interruptions / 54 days; Daly exact at Young's τ*): the
// values docs/simulator.md "Validation" quotes, to ±0.001.
TEST(ClosedFormTest, DalyEttrReproducesTheLlama3FeasibilityGrid) {
  const double mtbf = 54.0 * 1440 / 466;
  struct Case {
    double w_s, r_min, ettr;
  };
  for (const Case& c : {Case{10, 10, 0.900}, Case{6.3, 5, 0.936}, Case{30, 20, 0.820},
                        Case{60, 60, 0.624}, Case{300, 10, 0.730}, Case{148.8, 30, 0.700}}) {
    const double delta = c.w_s / 60;
    const double got = DalyEttr(YoungInterval(delta, mtbf), delta, c.r_min, mtbf);
    EXPECT_NEAR(got, c.ettr, 0.001) << "w = " << c.w_s << " s, R = " << c.r_min << " min";
  }
}

// Kokolis et al.'s first-order form agrees with Daly's exact one when λR and λτ are small, and
// reproduces "ETTR ≈ 0.92 at 12k GPUs, r = 6.5, w = 10 s, u0 = 5 min".
TEST(ClosedFormTest, KokolisFirstOrderMatchesItsAnchors) {
  const double mtbf = JobMttfHours(1500, 6.5) * 60;
  const double delta = 10.0 / 60;
  const double tau = YoungInterval(delta, mtbf);
  EXPECT_NEAR(KokolisEttr(tau, delta, 5, mtbf), 0.92, 0.01);
  EXPECT_NEAR(KokolisEttr(tau, delta, 10, mtbf), 0.89, 0.01);
  EXPECT_NEAR(KokolisEttr(10, 0.01, 1, 1e5), DalyEttr(10, 0.01, 1, 1e5), 1e-4);
  EXPECT_EQ(KokolisEttr(60, 1, 600, 100), 0) << "clamped at 0";
}

}  // namespace
}  // namespace hf::sim
