#pragma once
// Checkpoint / goodput theory in closed form. Times in minutes unless the name says hours;
// M = job MTBF, δ = blocking checkpoint cost, τ = compute between checkpoints, R = downtime
// per failure (detection + localization + waiting for a node + restart).

namespace hf::sim {

/// Job MTTF in hours of a series system of `nodes` independent nodes failing at
/// `rate_per_1000_node_days`: 24 / (nodes · rate / 1000) (Kokolis et al. [arXiv 2410.21680]).
double JobMttfHours(double nodes, double rate_per_1000_node_days);

/// Young's optimum interval τ* = √(2 δ M) (Young, CACM 17(9), 1974). Minutes.
double YoungInterval(double delta_min, double mtbf_min);

/// Daly's higher-order optimum: τ* = √(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M,
/// else M (Daly, FGCS 22(3), 2006). Minutes.
double DalyInterval(double delta_min, double mtbf_min);

/// Daly's exact expected ETTR under exponential failures (failures may also hit restarts and
/// checkpoints): τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)). In [0, 1].
double DalyEttr(double tau_min, double delta_min, double restart_min, double mtbf_min);

/// Kokolis et al.'s first-order ETTR: (1 − (u0 + τ/2)/M) / (1 + δ/τ), clamped at 0
/// [arXiv 2410.21680].
double KokolisEttr(double tau_min, double delta_min, double restart_min, double mtbf_min);

}  // namespace hf::sim
