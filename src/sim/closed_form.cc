#include "hyperfleet/sim/closed_form.h"

#include <algorithm>
#include <cmath>

namespace hf::sim {

double JobMttfHours(double nodes, double rate_per_1000_node_days) {
  return 24.0 / (nodes * rate_per_1000_node_days / 1000.0);
}

double YoungInterval(double delta_min, double mtbf_min) {
  return std::sqrt(2.0 * delta_min * mtbf_min);
}

double DalyInterval(double delta_min, double mtbf_min) {
  if (delta_min >= 2.0 * mtbf_min) return mtbf_min;
  const double x = delta_min / (2.0 * mtbf_min);
  return std::sqrt(2.0 * delta_min * mtbf_min) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) -
         delta_min;
}

double DalyEttr(double tau_min, double delta_min, double restart_min, double mtbf_min) {
  const double m = mtbf_min;
  // expm1 keeps precision when (τ + δ) ≪ M.
  const double wall = m * std::exp(restart_min / m) * std::expm1((tau_min + delta_min) / m);
  return wall > 0 ? std::clamp(tau_min / wall, 0.0, 1.0) : 0.0;
}

double KokolisEttr(double tau_min, double delta_min, double restart_min, double mtbf_min) {
  const double e = (1.0 - (restart_min + tau_min / 2.0) / mtbf_min) / (1.0 + delta_min / tau_min);
  return std::max(e, 0.0);
}

}  // namespace hf::sim
