#pragma once
// FGUF-1 ("Fleet Goodput Under Failures"): the failure process's parameters, as typed data.
// Units, everywhere in hf_sim: time in minutes (double) from the start of the run, failure
// rates per 1,000 node-days (Meta's unit, Kokolis et al. [arXiv 2410.21680]).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hf::sim {

inline constexpr double kMinutesPerDay = 1440.0;

/// How a failure shows itself (FGUF-1's detectability classes).
enum class DetectClass {
  kD1Loud,      ///< node-local error the node reports (Xid, ECC, dead host)
  kD2Network,   ///< NIC / link / switch: the job's collectives fail
  kD3JobCrash,  ///< software: the job exits, no node is at fault
  kD4Hang,      ///< the job stops progressing without an error (NCCL watchdog)
  kD5Silent,    ///< silent data corruption: the job keeps computing wrong steps
};
inline constexpr int kDetectClassCount = 5;
/// "D1" .. "D5".
std::string_view ToString(DetectClass c);

/// What brings the failed node back (or, for kRestartInPlace, that no node is at fault).
enum class Remedy { kRestartInPlace, kReboot, kReplace };
std::string_view ToString(Remedy r);

/// The cause classes of Llama 3's Table 5 (unexpected interruptions) [arXiv 2407.21783].
enum class Cause { kGpuHard, kHbm, kHostHw, kHostMaint, kNic, kNetwork, kSoftware, kHang, kSdc };
inline constexpr int kCauseCount = 9;
/// Short snake_case name ("gpu_hard", "hbm", ...).
std::string_view ToString(Cause c);

/// One row of the cause mix: a share of unexpected failures, how it is detected and repaired.
struct CauseSpec {
  Cause cause = Cause::kGpuHard;
  double share = 0;               ///< fraction of unexpected failures (the mix sums to 1)
  DetectClass detect = DetectClass::kD1Loud;
  double reboot_fixable = 0;      ///< P(a reboot / GPU reset fixes it); else the remedy is replace
  bool node_fault = true;         ///< false: restart in place, no node leaves the job (software)
  double human_fix = 0;           ///< P(a person must fix it before the job restarts)
};

/// The cause mix of Llama 3 Table 5 (419 unexpected interruptions) [arXiv 2407.21783], mapped
/// to detectability and remedy (FGUF-1's mapping, an assumption per row):
/// GPU hard 190 (D1, 20 % reboot-fixable, Crusoe GTC'25 recoverable 19.5 %), HBM 72 (D1, 90 %
/// reset-fixable: row remapping, Cui et al. [arXiv 2503.11901]), host HW 14 (D1), unplanned host
/// maintenance 32 (D1), NIC 7 (D2), switch/cable 35 (D2), software/dependency 56 (D3, restart in
/// place, 5 % need a person: Llama 3 reports 3 manual interventions), hang 7 (D4), SDC 6 (D5).
/// Detectability split: D1 73.5 %, D2 10.0 %, D3 13.4 %, D4 1.7 %, D5 1.4 %.
std::vector<CauseSpec> Llama3CauseMix();
/// The "hard" variant: D4 = 8 % and D5 = 2 %, taken proportionally out of the D1 rows
/// (ByteRobust [arXiv 2509.16293] sees ~13 % implicit failures).
std::vector<CauseSpec> HardCauseMix();

/// A duration distribution in minutes: lognormal with the given mean and coefficient of
/// variation; cv = 0 is the constant `mean_min` (what the closed forms assume).
struct Dist {
  double mean_min = 0;
  double cv = 0;
  /// Lognormal from its median and 90th percentile (minutes).
  static Dist MedianP90(double median_min, double p90_min);
  /// A sample, given a standard normal deviate `z` (unused when cv = 0).
  double Sample(double z) const;
};

/// FGUF-1 parameters and their defaults; every default's source next to it.
struct FgufParams {
  // Fleet and job (Llama 3: 16,384 H100 = 2,048 nodes of 8 GPUs, a 54-day snapshot
  // [arXiv 2407.21783]; N = 2,000 leaves 48 nodes for spares and repair).
  int fleet_nodes = 2048;
  int job_nodes = 2000;
  double horizon_days = 54;

  /// Fleet-average unexpected failure rate per node, per 1,000 node-days: Llama 3's 419
  /// unexpected interruptions / (2,048 nodes × 54 days) = 3.79 [arXiv 2407.21783].
  double rate_per_1000_node_days = 3.8;
  /// Planned, announced, checkpoint-aligned job interruptions per day: 47 in 54 days (Llama 3).
  double planned_per_day = 47.0 / 54.0;

  /// Lemons: this share of nodes fails `lemon_multiplier` × the base rate; the base is rescaled
  /// so that the fleet average stays `rate_per_1000_node_days`. 2 %: 40 lemons in ~2k nodes,
  /// Kokolis et al. [arXiv 2410.21680]; the 10× multiplier is an assumption.
  double lemon_share = 0.02;
  double lemon_multiplier = 10;

  /// Correlated switch events: this share of failure events evicts the whole aligned group of
  /// `correlated_group` nodes (ByteRobust's 1 % modelling weight [arXiv 2509.16293]).
  double correlated_share = 0.01;
  int correlated_group = 32;

  /// Bad returns: this share of repaired nodes comes back still faulty and fails at
  /// `bad_return_multiplier` × its rate until caught (assumption; Aegis, NSDI'25, catches 1–2 %).
  double bad_return_share = 0.05;
  double bad_return_multiplier = 50;

  /// Persistent slow nodes: this share of nodes runs at `slow_node_factor` × step time
  /// (MegaScale [arXiv 2402.15627]); a synchronous job runs at its slowest node's pace.
  double slow_node_share = 0.005;
  double slow_node_factor = 1.10;

  /// Transient, job-level fail-slow: Poisson events per day (assumption), lognormal duration of
  /// mean 24 min (GREYHOUND, USENIX ATC'25), step time × `fail_slow_factor` meanwhile.
  double fail_slow_per_day = 0.5;
  Dist fail_slow_duration{24.0, 1.0};
  double fail_slow_factor = 1.2;

  /// Diurnal throughput swing ±1 % (Llama 3). Mean zero over whole days: not modelled in
  /// ETTR, kept so reports can state it.
  double diurnal_swing = 0.01;

  // Repair pipeline (all strategies).
  /// Reboot / GPU reset: 15 min (EKS auto-repair starts 10 min after detection; duration is
  /// an assumption).
  Dist reboot{15.0, 0.0};
  /// Repair (replace a part): lognormal median 24 h, p90 5 days (assumption; a Delta DBE
  /// took 19 h, Cui et al. [arXiv 2503.11901]).
  Dist repair = Dist::MedianP90(24 * 60.0, 5 * 24 * 60.0);
  /// Lemon quarantine's repair: a quarantined node is diagnosed (this long, assumed 24 h),
  /// then gets a parts repair (`repair`) and the strategy's deep check, and comes back with
  /// a clean record. A healthy node caught by bad luck returns to service; a real lemon stays
  /// a lemon (assumed: its intermittent fault is not found) and is caught again. Fleets send
  /// quarantined nodes to repair rather than retire them (Kokolis et al. remove lemons for
  /// repair [arXiv 2410.21680]); the durations are assumptions.
  Dist quarantine_diagnosis{24 * 60.0, 0.0};

  std::vector<CauseSpec> causes = Llama3CauseMix();

  /// Daly's semantics (true): the job's nodes keep failing while it recovers, and such a
  /// failure extends the recovery. false: the alternating-renewal model (no failure while the
  /// job is down), under which availability is M / (M + downtime), as AWS's HyperPod cost
  /// example computes it (validation V10).
  bool failures_during_recovery = true;

  double horizon_min() const { return horizon_days * kMinutesPerDay; }
  /// Pure Poisson: no lemons, correlated events, bad returns, slow nodes or fail-slow, no
  /// planned interruptions (the closed forms' assumptions; validation V1).
  static FgufParams PurePoisson();
};

}  // namespace hf::sim
