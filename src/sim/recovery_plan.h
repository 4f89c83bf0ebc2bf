#pragma once
// The parametric engine's plan of one recovery (private to hf_sim): the phases the job goes
// through until it runs again. Several failure chains may overlap (a node fails while the job
// recovers, Daly's semantics): the job restarts once every chain has its nodes, and the wall
// time is charged to the phases of the chain that ends last.
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "hyperfleet/sim/job_ledger.h"

namespace hf::sim {

class RecoveryPlan {
 public:
  /// No recovery under way.
  void Reset() { *this = RecoveryPlan(); }
  /// A recovery starts at `t` (no-op when one is under way).
  void Begin(double t);
  bool active() const { return active_; }
  /// A chain from `t0`: its phase changes (ascending, from t0), the time its nodes are all in
  /// (`ready`, not counting `waits` replacements that wait for a repaired node), then a restart
  /// of `restart_min` charged to `restart_phase`. A chain added while the job restarts aborts
  /// that restart.
  void AddChain(double t0, std::vector<std::pair<double, Loss>> phases, double ready,
                double restart_min, Loss restart_phase, int waits = 0);
  /// A waiting replacement is in at `t_ready`.
  void Resolve(double t_ready);
  /// Time of the next step; +infinity when none (inactive, or waiting for nodes).
  double NextTime() const;
  /// Takes the next step: true when the job runs again (the plan is then inactive); otherwise
  /// `*phase` is the phase from now on.
  bool Step(Loss* phase);

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  bool active_ = false;
  std::deque<std::pair<double, Loss>> phases_;
  double nodes_ready_ = 0;
  int waiting_ = 0;
  double end_hint_ = 0;  // the critical chain's end (kInf while it waits)
  double restart_min_ = 0;
  Loss restart_phase_ = Loss::kRestart;
  bool restarting_ = false;
};

}  // namespace hf::sim
