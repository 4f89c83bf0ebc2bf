#pragma once
// The product engine's machine pool: the simulated machines as hf_pool records, every change
// decided by the pool's pure policy (include/hyperfleet/pool/machine_pool.h): Allocate serves
// launches (ready hot spares first, then the healthiest free machine), Apply records faults
// (the lemon rule quarantines), repairs, releases and an operator's return of a quarantined
// machine, each through the return check (which the simulation passes: its repair already
// drew the deep check, FailureProcess::Repair).
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/pool/machine_pool.h"
#include "hyperfleet/sim/product/sim_clock.h"

namespace hf::sim::product {

/// Machines are numbered 0..n-1 (hf_pool ids "m-000000"...), each of one instance type.
class PolicyMachinePool {
 public:
  /// What a fault did to a machine (PolicyMachinePool::fault).
  enum class Fault { kRepair, kQuarantine };  ///< kRepair: a reboot or a repair

  PolicyMachinePool(const SimClock& clock, pool::PoolPolicy policy)
      : clock_(clock), policy_(std::move(policy)) {}

  /// Registers machines `first`..`first + count - 1`, free, of `instance_type`. Throws
  /// std::invalid_argument unless `first` is the number of machines registered so far.
  void add(int first, int count, const std::string& instance_type);
  /// The machine the pool's Allocate grants to instance `node` of `instance_type`, now kInUse;
  /// nullopt on a shortfall (no ready spare and no free machine of that type).
  std::optional<int> acquire(const std::string& node, const std::string& instance_type);
  /// Machine `m` is back and clean: one in use is released, one
  /// out for repair (or quarantine: the operator's return) passes its return check. It is then
  /// free (kFree) for the next launch.
  void release(int m);
  /// Whether machine `m` is idle in the pool (free or a ready spare), where a fault takes it
  /// out before any launch gets it.
  bool idle(int m) const;
  /// Machine `m` (idle, or its instance gone) failed: it goes to reboot (`reboot`) or repair,
  /// or to quarantine by the lemon rule (PoolPolicy::lemon_failures within lemon_window, this
  /// failure included). Throws std::logic_error unless idle or in use.
  Fault fault(int m, const std::string& why, bool reboot = false);
  /// Machines a launch of `instance_type` can get now (free and ready spares).
  size_t free_count(const std::string& instance_type) const;
  const pool::Machine& machine(int m) const { return machines_.at(static_cast<size_t>(m)); }

 private:
  void apply(int m, pool::Report r, const std::string& why = {});

  const SimClock& clock_;
  pool::PoolPolicy policy_;
  std::vector<pool::Machine> machines_;
};

}  // namespace hf::sim::product
