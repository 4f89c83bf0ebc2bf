#include "hyperfleet/sim/fguf.h"

#include <cmath>

namespace hf::sim {

std::string_view ToString(DetectClass c) {
  static constexpr std::string_view kNames[] = {"D1", "D2", "D3", "D4", "D5"};
  return kNames[static_cast<int>(c)];
}

std::string_view ToString(Remedy r) {
  switch (r) {
    case Remedy::kRestartInPlace: return "restart_in_place";
    case Remedy::kReboot: return "reboot";
    case Remedy::kReplace: return "replace";
  }
  return "?";
}

std::string_view ToString(Cause c) {
  static constexpr std::string_view kNames[] = {"gpu_hard", "hbm",      "host_hw",
                                                "host_maint", "nic",    "network",
                                                "software", "hang",     "sdc"};
  return kNames[static_cast<int>(c)];
}

std::vector<CauseSpec> Llama3CauseMix() {
  // Counts of Llama 3 Table 5 out of 419 [arXiv 2407.21783]; mapping in docs/simulator.md "Failure process".
  constexpr double kTotal = 419.0;
  using C = Cause;
  using D = DetectClass;
  return {
      {C::kGpuHard, 190 / kTotal, D::kD1Loud, 0.20, true, 0},
      {C::kHbm, 72 / kTotal, D::kD1Loud, 0.90, true, 0},
      {C::kHostHw, 14 / kTotal, D::kD1Loud, 0, true, 0},
      {C::kHostMaint, 32 / kTotal, D::kD1Loud, 0, true, 0},
      {C::kNic, 7 / kTotal, D::kD2Network, 0, true, 0},
      {C::kNetwork, 35 / kTotal, D::kD2Network, 0, true, 0},
      {C::kSoftware, 56 / kTotal, D::kD3JobCrash, 0, false, 0.05},
      {C::kHang, 7 / kTotal, D::kD4Hang, 0, true, 0},
      {C::kSdc, 6 / kTotal, D::kD5Silent, 0, true, 0},
  };
}

std::vector<CauseSpec> HardCauseMix() {
  std::vector<CauseSpec> mix = Llama3CauseMix();
  double d1 = 0, d4 = 0, d5 = 0;
  for (const CauseSpec& c : mix) {
    if (c.detect == DetectClass::kD1Loud) d1 += c.share;
    if (c.detect == DetectClass::kD4Hang) d4 += c.share;
    if (c.detect == DetectClass::kD5Silent) d5 += c.share;
  }
  const double d1_new = d1 - (0.08 - d4) - (0.02 - d5);
  for (CauseSpec& c : mix) {
    if (c.detect == DetectClass::kD1Loud) c.share *= d1_new / d1;
    if (c.detect == DetectClass::kD4Hang) c.share = 0.08;
    if (c.detect == DetectClass::kD5Silent) c.share = 0.02;
  }
  return mix;
}

Dist Dist::MedianP90(double median_min, double p90_min) {
  const double sigma = std::log(p90_min / median_min) / 1.2815515655446004;
  const double s2 = sigma * sigma;
  return Dist{median_min * std::exp(s2 / 2.0), std::sqrt(std::expm1(s2))};
}

double Dist::Sample(double z) const {
  if (cv <= 0) return mean_min;
  const double s2 = std::log1p(cv * cv);
  const double mu = std::log(mean_min) - s2 / 2.0;
  return std::exp(mu + std::sqrt(s2) * z);
}

FgufParams FgufParams::PurePoisson() {
  FgufParams p;
  p.planned_per_day = 0;
  p.lemon_share = 0;
  p.correlated_share = 0;
  p.bad_return_share = 0;
  p.slow_node_share = 0;
  p.fail_slow_per_day = 0;
  return p;
}

}  // namespace hf::sim
