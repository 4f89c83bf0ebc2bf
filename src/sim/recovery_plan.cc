#include "recovery_plan.h"

#include <algorithm>

namespace hf::sim {

void RecoveryPlan::Begin(double t) {
  if (active_) return;
  Reset();
  active_ = true;
  nodes_ready_ = t;
}

void RecoveryPlan::AddChain(double t0, std::vector<std::pair<double, Loss>> phases, double ready,
                            double restart_min, Loss restart_phase, int waits) {
  if (!active_) Begin(t0);
  const double chain_end = waits > 0 ? kInf : ready;
  const double current_end = waiting_ > 0 ? kInf : std::max(nodes_ready_, end_hint_);
  nodes_ready_ = std::max(nodes_ready_, ready);
  waiting_ += waits;
  if (restarting_ || chain_end >= current_end) {
    // This chain decides when the job runs again: its phases from t0 on.
    phases_.clear();  // earlier phases are past: nothing is pending before t0
    for (auto& p : phases) phases_.push_back(p);
    end_hint_ = chain_end;
    restart_min_ = restart_min;
    restart_phase_ = restart_phase;
    restarting_ = false;
  }
}

void RecoveryPlan::Resolve(double t_ready) {
  nodes_ready_ = std::max(nodes_ready_, t_ready);
  if (waiting_ > 0) --waiting_;
}

double RecoveryPlan::NextTime() const {
  if (!active_) return kInf;
  if (!phases_.empty()) return phases_.front().first;
  if (waiting_ > 0) return kInf;
  return restarting_ ? nodes_ready_ + restart_min_ : nodes_ready_;
}

bool RecoveryPlan::Step(Loss* phase) {
  if (!phases_.empty()) {
    *phase = phases_.front().second;
    phases_.pop_front();
    return false;
  }
  if (!restarting_) {
    restarting_ = true;
    *phase = restart_phase_;
    return false;
  }
  Reset();
  return true;
}

}  // namespace hf::sim
