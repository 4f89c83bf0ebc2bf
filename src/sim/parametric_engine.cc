#include "hyperfleet/sim/parametric_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <utility>
#include <vector>

#include "hyperfleet/sim/failure_process.h"
#include "hyperfleet/sim/job_ledger.h"
#include "recovery_plan.h"

namespace hf::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// kProvisioning: an idle node being made a hot spare (provision + deep check) in the background.
enum class Where : uint8_t { kJob, kSpare, kIdle, kRepair, kQuarantined, kProvisioning };

// A node coming back from repair (or, when caught by the deep check, going round again), or
// an idle node provisioned as a hot spare.
struct Return {
  double t;
  int node;
  bool bad;     // comes back still faulty
  bool caught;  // the deep check found it: repair again
  bool refill = false;  // provisioned from the idle fleet to refill the hot spares
  bool operator>(const Return& o) const { return t > o.t; }
};

// A straggler eviction due at `t` for `node` (if it is still in the job then).
struct Eviction {
  double t;
  int node;
  bool operator>(const Eviction& o) const { return t > o.t; }
};

// One replication. The job is stopped/recovering according to `plan_`; node pools are lists.
class ParametricRun {
 public:
  ParametricRun(const FgufParams& params, const Strategy& strategy, int spares, uint64_t seed);
  RunResult Execute();

 private:
  // Events.
  void OnFault(const FleetEvent& ev);
  void OnJobFault(const FleetEvent& ev);
  void OnPlanned(double t);
  void OnFailSlow(double t, bool start, double factor);
  void OnReturn(const Return& r);
  void OnEviction(const Eviction& e);
  void OnSdcDetected(double t);
  void StartRun(double t);

  // Node pools.
  void JoinJob(int node, double t);
  void LeaveJob(int node);
  void SendToRepair(int node, Remedy remedy, double t, bool healthy);
  // Provisions idle nodes in the background until the hot spares (with those under way) are
  // back to their target.
  void RefillSpares(double t);
  bool QuarantineIfLemon(int node, double t);
  // Acquires `count` replacements at `t_acq` (decided at `now`); returns when those not
  // waiting are in; `*waits` counts those waiting for the repaired queue (see OnReturn).
  double Acquire(int count, double now, double t_acq, int* waits);
  void RecomputeFactor(double t);

  // Recovery.
  void BeginRecovery(double t, StopClass cls, Loss first_phase);
  void AddChain(double t0, DetectClass cls, int nodes, bool human, bool detected);

  const FgufParams& params_;
  const Strategy& strategy_;
  const int spares_target_;
  const uint64_t seed_;
  FailureProcess process_;
  SimRng rng_;
  JobLedger ledger_;
  RecoveryPlan plan_;
  std::vector<Where> where_;
  std::vector<int> job_pos_;   // index in job_ or -1
  std::vector<int> job_, spare_, idle_;
  std::vector<std::vector<double>> fault_times_;  // per node, for lemon quarantine
  std::priority_queue<Return, std::vector<Return>, std::greater<Return>> returns_;
  std::priority_queue<Eviction, std::vector<Eviction>, std::greater<Eviction>> evictions_;
  std::vector<double> waiting_acq_;  // t_acq of replacements waiting for a repaired node
  int refilling_ = 0;  // idle nodes being provisioned as hot spares
  int slow_in_job_ = 0;
  bool fail_slow_ = false;
  double fail_slow_factor_ = 1.0;
  double sdc_detect_at_ = kInf;
  DetectClass sdc_class_ = DetectClass::kD5Silent;
  int sdc_nodes_ = 0;  // nodes left the job silently-faulty, replaced at detection
  int sdc_at_restart_ = 0;  // silent faults while the job was down: corrupt from its restart
  RunResult result_;
};

ParametricRun::ParametricRun(const FgufParams& params, const Strategy& strategy, int spares,
                             uint64_t seed)
    : params_(params),
      strategy_(strategy),
      spares_target_(spares),
      seed_(seed),
      process_(params, seed),
      rng_(SimRng::StreamSeed(seed, kStreamEngine, 0)),
      ledger_(strategy.CheckpointFor(params)) {
  const int n = params.fleet_nodes;
  where_.assign(n, Where::kIdle);
  job_pos_.assign(n, -1);
  fault_times_.resize(strategy.quarantine_lemons ? n : 0);
  for (int k = 0; k < params.job_nodes; ++k) JoinJob(k, 0);
  for (int k = params.job_nodes; k < params.job_nodes + spares; ++k) {
    where_[k] = Where::kSpare;
    spare_.push_back(k);
  }
  for (int k = params.job_nodes + spares; k < n; ++k) idle_.push_back(k);
}

void ParametricRun::JoinJob(int node, double t) {
  where_[node] = Where::kJob;
  job_pos_[node] = static_cast<int>(job_.size());
  job_.push_back(node);
  if (process_.traits(node).slow_factor > 1.0) {
    ++slow_in_job_;
    if (strategy_.straggler_evict_min >= 0) {
      evictions_.push(Eviction{t + strategy_.straggler_evict_min, node});
    }
  }
}

void ParametricRun::LeaveJob(int node) {
  const int pos = job_pos_[node];
  if (pos < 0) return;
  const int last = job_.back();
  job_[pos] = last;
  job_pos_[last] = pos;
  job_.pop_back();
  job_pos_[node] = -1;
  if (process_.traits(node).slow_factor > 1.0) --slow_in_job_;
}

void ParametricRun::RecomputeFactor(double t) {
  double f = slow_in_job_ > 0 ? params_.slow_node_factor : 1.0;
  if (fail_slow_) f *= fail_slow_factor_;
  ledger_.SetSlowdown(t, f);
}

bool ParametricRun::QuarantineIfLemon(int node, double t) {
  if (!strategy_.quarantine_lemons) return false;
  std::vector<double>& times = fault_times_[node];
  times.push_back(t);
  const double window = strategy_.quarantine_window_days * kMinutesPerDay;
  const auto recent = std::count_if(times.begin(), times.end(),
                                    [&](double x) { return x >= t - window; });
  if (recent < strategy_.quarantine_failures) return false;
  // The quarantine repair (FgufParams::quarantine_diagnosis): diagnosis, parts repair, deep
  // check; the node comes back with a clean record (a lemon keeps its rate: caught again).
  times.clear();
  process_.ClearBad(node);
  if (process_.traits(node).lemon) {
    ++result_.lemons_quarantined;
  } else {
    ++result_.healthy_quarantined;
  }
  const double diagnosed = t + rng_.Sample(params_.quarantine_diagnosis);
  const RepairOutcome out = process_.Repair(node, Remedy::kReplace, diagnosed,
                                            strategy_.deep_check_min, strategy_.deep_check_catch);
  returns_.push(Return{out.done_min, node, out.bad && !out.caught_by_check, out.caught_by_check});
  return true;
}

void ParametricRun::SendToRepair(int node, Remedy remedy, double t, bool healthy) {
  LeaveJob(node);
  process_.ClearBad(node);
  if (where_[node] == Where::kSpare) {
    spare_.erase(std::find(spare_.begin(), spare_.end(), node));
  } else if (where_[node] == Where::kIdle) {
    idle_.erase(std::find(idle_.begin(), idle_.end(), node));
  }
  where_[node] = Where::kRepair;
  if (!healthy && QuarantineIfLemon(node, t)) return;
  if (healthy) {
    // Evicted but sound (over-eviction, a switch's group): a reboot and the deep check.
    returns_.push(Return{t + params_.reboot.mean_min + strategy_.deep_check_min, node, false,
                         false});
    return;
  }
  const RepairOutcome out = process_.Repair(node, remedy, t, strategy_.deep_check_min,
                                            strategy_.deep_check_catch);
  returns_.push(Return{out.done_min, node, out.bad && !out.caught_by_check, out.caught_by_check});
}

double ParametricRun::Acquire(int count, double now, double t_acq, int* waits) {
  double ready = t_acq;
  *waits = 0;
  for (int i = 0; i < count; ++i) {
    if (!spare_.empty()) {
      const int node = spare_.back();
      spare_.pop_back();
      JoinJob(node, now);
      ready = std::max(ready, t_acq + rng_.Sample(strategy_.swap));
      continue;
    }
    ++result_.spare_exhaustions;
    if (!idle_.empty()) {
      const int node = idle_.back();
      idle_.pop_back();
      JoinJob(node, now);
      ready = std::max(ready, t_acq + rng_.Sample(strategy_.provision) +
                                  strategy_.deep_check_min);
      continue;
    }
    waiting_acq_.push_back(t_acq);
    ++*waits;
  }
  RefillSpares(now);
  return ready;
}

void ParametricRun::RefillSpares(double t) {
  while (static_cast<int>(spare_.size()) + refilling_ < spares_target_ && !idle_.empty()) {
    const int node = idle_.back();
    idle_.pop_back();
    where_[node] = Where::kProvisioning;
    ++refilling_;
    Return r{t + rng_.Sample(strategy_.provision) + strategy_.deep_check_min, node, false, false};
    r.refill = true;
    returns_.push(r);
  }
}

void ParametricRun::BeginRecovery(double t, StopClass cls, Loss first_phase) {
  ledger_.Stop(t, cls, first_phase);
  plan_.Begin(t);
}

// A failure chain from `t0`: detection (unless already detected), localization, a person,
// the replacements; the plan keeps the chain that ends last (Daly: failures extend recovery).
void ParametricRun::AddChain(double t0, DetectClass cls, int nodes, bool human, bool detected) {
  std::vector<std::pair<double, Loss>> phases;
  double t = t0;
  if (!detected) {
    phases.emplace_back(t, Loss::kDetection);
    t += rng_.Sample(strategy_.detect[static_cast<int>(cls)]);
  }
  if (nodes > 0) {
    phases.emplace_back(t, Loss::kLocalization);
    t += rng_.Sample(strategy_.localize);
  }
  if (human) {
    phases.emplace_back(t, Loss::kHuman);
    t += strategy_.human_fix_min;
    ++result_.human_interventions;
  }
  double ready = t;
  int waits = 0;
  if (nodes > 0) {
    phases.emplace_back(t, Loss::kWaitNode);
    ready = Acquire(nodes, t0, t, &waits);
  }
  plan_.AddChain(t0, std::move(phases), ready, rng_.Sample(strategy_.restart), Loss::kRestart,
                 waits);
}

void ParametricRun::OnFault(const FleetEvent& ev) {
  if (!ev.bad_return) {  // bad returns depend on the strategy's repairs: not the history
    ++result_.fault_events;
    result_.fault_history_hash += ev.t_min * (ev.node + 1) * (1 + static_cast<int>(ev.cause));
  }
  const Where w = where_[ev.node];
  if (ev.group_size > 0) ++result_.correlated_events;
  if (w == Where::kJob) {
    if (!params_.failures_during_recovery && !ledger_.running()) return;
    OnJobFault(ev);
    return;
  }
  if (w == Where::kSpare || w == Where::kIdle) {
    // Found by the fleet's health checks; the job does not notice.
    if (ev.remedy != Remedy::kRestartInPlace) {
      SendToRepair(ev.node, ev.remedy, ev.t_min, false);
      RefillSpares(ev.t_min);
    }
  }
}

void ParametricRun::OnJobFault(const FleetEvent& ev) {
  const double t = ev.t_min;
  ++result_.job_faults;
  if (ev.bad_return) ++result_.bad_returns;
  if (ev.remedy == Remedy::kRestartInPlace) {
    if (ledger_.running()) BeginRecovery(t, StopClassOf(ev.detect), Loss::kDetection);
    AddChain(t, ev.detect, 0, ev.needs_human, false);
    return;
  }
  if (ev.detect == DetectClass::kD5Silent && sdc_detect_at_ < kInf) {
    // Another silent fault before the first is noticed: the rollback covers it; its node is
    // replaced with the first's.
    ++sdc_nodes_;
    SendToRepair(ev.node, ev.remedy, t, false);
    return;
  }
  if (ev.detect == DetectClass::kD5Silent && ledger_.running()) {
    // The job keeps computing corrupted steps until the corruption is noticed.
    sdc_nodes_ = 1;
    ledger_.Corrupt(t);
    sdc_detect_at_ = t + rng_.Sample(strategy_.detect[static_cast<int>(DetectClass::kD5Silent)]);
    sdc_class_ = ev.detect;
    SendToRepair(ev.node, ev.remedy, t, false);
    return;
  }
  if (ev.detect == DetectClass::kD5Silent) {
    // Silent while the job is down: the corruption starts when it runs again.
    ++sdc_at_restart_;
    SendToRepair(ev.node, ev.remedy, t, false);
    return;
  }
  // Nodes leaving the job: the faulty one, a switch's whole group, or a hang's suspects.
  std::vector<int> out{ev.node};
  if (ev.group_size > 0) {
    for (int k = ev.group_first; k < ev.group_first + ev.group_size; ++k) {
      if (k != ev.node && (where_[k] == Where::kJob || where_[k] == Where::kSpare ||
                           where_[k] == Where::kIdle)) {
        if (where_[k] == Where::kJob) out.push_back(k);
        else SendToRepair(k, Remedy::kReboot, t, true);
      }
    }
  }
  if (ev.detect == DetectClass::kD4Hang) {
    for (int i = 1; i < strategy_.hang_evict_nodes && job_.size() > out.size(); ++i) {
      const int k = job_[rng_.Next() % job_.size()];
      if (std::find(out.begin(), out.end(), k) != out.end()) continue;
      out.push_back(k);
      ++result_.false_positive_evictions;
    }
  }
  if (ledger_.running()) BeginRecovery(t, StopClassOf(ev.detect), Loss::kDetection);
  SendToRepair(ev.node, ev.remedy, t, false);
  for (size_t i = 1; i < out.size(); ++i) SendToRepair(out[i], Remedy::kReboot, t, true);
  AddChain(t, ev.detect, static_cast<int>(out.size()), ev.needs_human, false);
}

void ParametricRun::OnSdcDetected(double t) {
  sdc_detect_at_ = kInf;
  if (ledger_.running()) {
    BeginRecovery(t, StopClassOf(sdc_class_), Loss::kLocalization);
  } else {
    ledger_.Stop(t, StopClassOf(sdc_class_), ledger_.phase());  // roll back, same phase
  }
  AddChain(t, sdc_class_, sdc_nodes_, false, true);
}

void ParametricRun::OnPlanned(double t) {
  if (!ledger_.running()) return;  // absorbed by the recovery under way
  ++result_.planned;
  BeginRecovery(t, StopClass::kPlanned, Loss::kPlanned);
  plan_.AddChain(t, {{t, Loss::kPlanned}}, t + strategy_.checkpoint_cost_min,
                 rng_.Sample(strategy_.restart), Loss::kPlanned);
}

void ParametricRun::OnFailSlow(double t, bool start, double factor) {
  fail_slow_ = start;
  fail_slow_factor_ = factor;
  RecomputeFactor(t);
}

void ParametricRun::OnReturn(const Return& r) {
  if (r.refill) --refilling_;
  if (r.caught) {
    const RepairOutcome out = process_.Repair(r.node, Remedy::kReplace, r.t,
                                              strategy_.deep_check_min,
                                              strategy_.deep_check_catch);
    returns_.push(Return{out.done_min, r.node, out.bad && !out.caught_by_check,
                         out.caught_by_check});
    return;
  }
  if (r.bad) process_.ReturnBad(r.node, r.t);
  if (!waiting_acq_.empty()) {
    const double t_acq = waiting_acq_.front();
    waiting_acq_.erase(waiting_acq_.begin());
    JoinJob(r.node, r.t);
    plan_.Resolve(std::max(t_acq, r.t) + rng_.Sample(strategy_.swap));
    return;
  }
  if (r.refill || static_cast<int>(spare_.size()) + refilling_ < spares_target_) {
    where_[r.node] = Where::kSpare;
    spare_.push_back(r.node);
  } else {
    where_[r.node] = Where::kIdle;
    idle_.push_back(r.node);
  }
}

void ParametricRun::OnEviction(const Eviction& e) {
  if (where_[e.node] != Where::kJob) return;
  if (!ledger_.running() || (spare_.empty() && idle_.empty())) {
    evictions_.push(Eviction{e.t + 10.0, e.node});  // at the next chance
    return;
  }
  // Checkpoint-aligned, like a planned interruption: swap the slow node out and restart.
  ++result_.straggler_evictions;
  BeginRecovery(e.t, StopClass::kPlanned, Loss::kFailSlow);
  LeaveJob(e.node);
  where_[e.node] = Where::kQuarantined;
  int waits = 0;
  const double ready = Acquire(1, e.t, e.t + strategy_.checkpoint_cost_min, &waits);
  plan_.AddChain(e.t, {{e.t, Loss::kFailSlow}}, ready, rng_.Sample(strategy_.restart),
                 Loss::kFailSlow, waits);
}

void ParametricRun::StartRun(double t) {
  ledger_.Run(t);
  RecomputeFactor(t);
  if (sdc_at_restart_ > 0) {
    sdc_nodes_ = sdc_at_restart_;
    sdc_at_restart_ = 0;
    ledger_.Corrupt(t);
    sdc_detect_at_ = t + rng_.Sample(strategy_.detect[static_cast<int>(DetectClass::kD5Silent)]);
    sdc_class_ = DetectClass::kD5Silent;
  }
}

RunResult ParametricRun::Execute() {
  const double horizon = params_.horizon_min();
  StartRun(0);
  plan_.Reset();
  for (;;) {
    const double t_proc = process_.PeekTime();
    const double t_ret = returns_.empty() ? kInf : returns_.top().t;
    const double t_evict = evictions_.empty() ? kInf : evictions_.top().t;
    const double t_plan = plan_.NextTime();
    const double t = std::min({t_proc, t_ret, t_evict, t_plan, sdc_detect_at_});
    if (!(t <= horizon)) break;
    if (t == t_plan) {
      Loss phase = Loss::kIdle;
      if (plan_.Step(&phase)) {
        StartRun(t);
      } else {
        ledger_.Phase(t, phase);
      }
    } else if (t == sdc_detect_at_) {
      OnSdcDetected(t);
    } else if (t == t_ret) {
      const Return r = returns_.top();
      returns_.pop();
      OnReturn(r);
    } else if (t == t_evict) {
      const Eviction e = evictions_.top();
      evictions_.pop();
      OnEviction(e);
    } else {
      const FleetEvent ev = process_.Pop();
      switch (ev.kind) {
        case EventKind::kFault: OnFault(ev); break;
        case EventKind::kPlanned: OnPlanned(ev.t_min); break;
        case EventKind::kFailSlowStart: OnFailSlow(ev.t_min, true, ev.factor); break;
        case EventKind::kFailSlowEnd: OnFailSlow(ev.t_min, false, 1.0); break;
      }
    }
  }
  ledger_.Finish(horizon);
  FillRunIdentity(params_, strategy_, spares_target_, seed_, &result_);
  FillFromLedger(ledger_, &result_);
  return result_;
}

}  // namespace

RunResult RunParametric(const FgufParams& params, const Strategy& strategy, int spares,
                        uint64_t seed) {
  if (params.job_nodes <= 0 || spares < 0 || params.job_nodes + spares > params.fleet_nodes) {
    throw std::invalid_argument("job_nodes + spares must be positive and at most fleet_nodes");
  }
  if (!(params.horizon_days > 0) || !(params.rate_per_1000_node_days >= 0)) {
    throw std::invalid_argument("horizon_days must be > 0 and the failure rate >= 0");
  }
  ParametricRun run(params, strategy, spares, seed);
  return run.Execute();
}

}  // namespace hf::sim
