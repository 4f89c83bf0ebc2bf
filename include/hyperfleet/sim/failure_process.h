#pragma once
// The FGUF-1 failure process: seeded, reproducible, with independent random streams per
// process (node faults, causes, repairs, planned interruptions, fail-slow) so that the same
// seed gives the same failure history whatever the recovery strategy (common random numbers):
// node k's i-th fault happens at the same time with the same cause in every run of a seed.
// Engines pull typed events in time order and tell it about repairs.
#include <cstdint>
#include <queue>
#include <vector>

#include "hyperfleet/sim/fguf.h"

namespace hf::sim {

/// A small, seedable random stream (SplitMix64). Used instead of std::mt19937_64 because the
/// process needs thousands of independent streams per run (one per node and process) and
/// mt19937_64's 2.5 KB state costs more to seed than a whole run may take; SplitMix64 is
/// seeded in one step and passes BigCrush.
class SimRng {
 public:
  SimRng() = default;
  explicit SimRng(uint64_t seed) : state_(seed) {}
  /// The seed of stream `index` of process `process` for run seed `seed` (a hash of the three).
  static uint64_t StreamSeed(uint64_t seed, uint64_t process, uint64_t index);
  uint64_t Next();
  /// Uniform in (0, 1): never 0, so logs are finite.
  double Uniform();
  /// Exponential with this mean.
  double Exp(double mean);
  /// Standard normal (Box-Muller, one value per call).
  double Normal();
  /// A sample of `d` (Dist::Sample on a fresh normal deviate when d.cv > 0).
  double Sample(const Dist& d);

 private:
  uint64_t state_ = 0;
};

/// Stream process ids for SimRng::StreamSeed (engines use kEngine and up for their own draws).
enum StreamProcess : uint64_t {
  kStreamTraits = 1, kStreamFaults, kStreamCauses, kStreamRepair, kStreamPlanned,
  kStreamFailSlow, kStreamEngine = 16,
};

/// What a node is, fixed per seed: lemon or not, persistent slowness, its fault rate.
struct NodeTraits {
  bool lemon = false;
  double slow_factor = 1.0;  ///< step-time multiplier while it is in the job (1: not slow)
  double rate_per_min = 0;   ///< unexpected faults per minute
};

enum class EventKind {
  kFault,          ///< an unexpected fault on `node` (or, for software, on the job)
  kPlanned,        ///< an announced, checkpoint-aligned job interruption
  kFailSlowStart,  ///< a transient job-level slowdown begins: step time × `factor`
  kFailSlowEnd,    ///< it ends
};

/// One event of the process, in time order.
struct FleetEvent {
  double t_min = 0;
  EventKind kind = EventKind::kFault;
  int node = -1;  ///< kFault: the node; -1 for job-level events
  Cause cause = Cause::kGpuHard;
  DetectClass detect = DetectClass::kD1Loud;
  Remedy remedy = Remedy::kReplace;  ///< kRestartInPlace: no node is at fault
  bool needs_human = false;
  /// A correlated switch event: every node in [group_first, group_first + group_size) is
  /// evicted with `node` (group_size 0: none). Those nodes are sound after a reboot.
  int group_first = -1;
  int group_size = 0;
  bool bad_return = false;  ///< the fault of a node that came back from repair still faulty
  double factor = 1.0;      ///< kFailSlowStart: step-time multiplier
};

/// How a repair ends.
struct RepairOutcome {
  double done_min = 0;        ///< when the node is back (repair + deep check)
  bool bad = false;           ///< it is still faulty and will fail again soon
  bool caught_by_check = false;  ///< the deep check found it (then it is not back: repair again)
};

/// The failure process of one replication. Not thread-safe; cheap to construct (O(fleet)).
class FailureProcess {
 public:
  /// Draws node traits (exactly round(share · fleet) lemons and slow nodes) and the first event
  /// of every stream. Events after params.horizon_min() are never returned.
  FailureProcess(const FgufParams& params, uint64_t seed);

  const FgufParams& params() const { return params_; }
  int fleet_nodes() const { return static_cast<int>(traits_.size()); }
  const NodeTraits& traits(int node) const { return traits_[node]; }
  /// Job MTBF in minutes for `nodes` nodes at the fleet-average rate (closed-form input).
  double JobMtbfMin(int nodes) const;

  /// Time of the next event; +infinity when none is left before the horizon.
  double PeekTime() const;
  /// Removes and returns the next event. Precondition: PeekTime() is finite.
  FleetEvent Pop();
  /// When node `node`'s next regular fault happens (+infinity past the horizon).
  double NextFaultOf(int node) const { return next_fault_[node]; }

  /// A repair of `node` by `remedy` (kReboot or kReplace) begun at `t_min`, then a deep check
  /// of `deep_check_min` catching a bad return with probability `deep_check_catch`. Draws from
  /// the node's repair stream.
  RepairOutcome Repair(int node, Remedy remedy, double t_min, double deep_check_min,
                       double deep_check_catch);
  /// A node that came back bad is in service again from `t_min`: schedules its accelerated
  /// fault (rate × bad_return_multiplier), reported with bad_return = true.
  void ReturnBad(int node, double t_min);
  /// Cancels a pending bad-return fault of `node` (it failed or left service).
  void ClearBad(int node);

 private:
  struct Entry {
    double t;
    int node;
    EventKind kind;
    uint32_t gen;  // bad-return entries: valid while equal to bad_gen_[node]
    bool bad;
    bool operator>(const Entry& o) const { return t > o.t; }
  };
  void PushNodeFault(int node, double after_min);
  FleetEvent MakeFault(int node, double t, bool bad);
  void SkipStale();

  FgufParams params_;
  double horizon_;
  std::vector<double> cum_share_;  // cumulative, normalised shares of params_.causes
  std::vector<NodeTraits> traits_;
  std::vector<double> next_fault_;
  std::vector<uint32_t> bad_gen_;
  std::vector<SimRng> fault_rng_, cause_rng_, repair_rng_;
  SimRng planned_rng_, slow_rng_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
};

}  // namespace hf::sim
