#include "hyperfleet/sim/failure_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace hf::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTwoPi = 6.283185307179586;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Picks exactly `count` distinct nodes out of `n` (partial Fisher-Yates).
std::vector<int> PickNodes(SimRng& rng, int n, int count) {
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  count = std::clamp(count, 0, n);
  for (int i = 0; i < count; ++i) {
    const int j = i + static_cast<int>(rng.Next() % static_cast<uint64_t>(n - i));
    std::swap(all[i], all[j]);
  }
  all.resize(count);
  return all;
}

}  // namespace

uint64_t SimRng::StreamSeed(uint64_t seed, uint64_t process, uint64_t index) {
  return Mix(Mix(Mix(seed) ^ (process * 0x9e3779b97f4a7c15ULL)) + index);
}

uint64_t SimRng::Next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return Mix(state_);
}

double SimRng::Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }

double SimRng::Exp(double mean) { return -mean * std::log(Uniform()); }

double SimRng::Normal() {
  const double u1 = Uniform(), u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

double SimRng::Sample(const Dist& d) { return d.cv > 0 ? d.Sample(Normal()) : d.mean_min; }

FailureProcess::FailureProcess(const FgufParams& params, uint64_t seed)
    : params_(params), horizon_(params.horizon_min()) {
  const int n = params.fleet_nodes;
  if (n <= 0) throw std::invalid_argument("fleet_nodes must be positive");
  if (params.causes.empty()) throw std::invalid_argument("causes must not be empty");
  double total = 0;
  for (const CauseSpec& c : params.causes) total += c.share;
  if (!(total > 0)) throw std::invalid_argument("causes: shares must sum to more than 0");
  cum_share_.reserve(params.causes.size());
  double acc = 0;
  for (const CauseSpec& c : params.causes) cum_share_.push_back(acc += c.share / total);

  // Traits: exactly round(share · n) lemons and slow nodes, so runs differ only in which.
  SimRng traits_rng(SimRng::StreamSeed(seed, kStreamTraits, 0));
  traits_.assign(n, NodeTraits{});
  const int lemons = static_cast<int>(std::lround(params.lemon_share * n));
  const double mult = params.lemon_multiplier;
  // Base rate rescaled so the fleet average is the nominal rate.
  const double avg = params.rate_per_1000_node_days / 1000.0 / kMinutesPerDay;
  const double base = avg * n / (n - lemons + lemons * mult);
  for (NodeTraits& t : traits_) t.rate_per_min = base;
  for (int k : PickNodes(traits_rng, n, lemons)) {
    traits_[k].lemon = true;
    traits_[k].rate_per_min = base * mult;
  }
  const int slow = static_cast<int>(std::lround(params.slow_node_share * n));
  for (int k : PickNodes(traits_rng, n, slow)) traits_[k].slow_factor = params.slow_node_factor;

  next_fault_.assign(n, kInf);
  bad_gen_.assign(n, 0);
  fault_rng_.resize(n);
  cause_rng_.resize(n);
  repair_rng_.resize(n);
  std::vector<Entry> entries;
  entries.reserve(n + 2);
  for (int k = 0; k < n; ++k) {
    fault_rng_[k] = SimRng(SimRng::StreamSeed(seed, kStreamFaults, k));
    cause_rng_[k] = SimRng(SimRng::StreamSeed(seed, kStreamCauses, k));
    repair_rng_[k] = SimRng(SimRng::StreamSeed(seed, kStreamRepair, k));
    const double t = traits_[k].rate_per_min > 0 ? fault_rng_[k].Exp(1.0 / traits_[k].rate_per_min)
                                                 : kInf;
    if (t <= horizon_) {
      next_fault_[k] = t;
      entries.push_back(Entry{t, k, EventKind::kFault, 0, false});
    }
  }
  planned_rng_ = SimRng(SimRng::StreamSeed(seed, kStreamPlanned, 0));
  slow_rng_ = SimRng(SimRng::StreamSeed(seed, kStreamFailSlow, 0));
  if (params.planned_per_day > 0) {
    const double t = planned_rng_.Exp(kMinutesPerDay / params.planned_per_day);
    if (t <= horizon_) entries.push_back(Entry{t, -1, EventKind::kPlanned, 0, false});
  }
  if (params.fail_slow_per_day > 0) {
    const double t = slow_rng_.Exp(kMinutesPerDay / params.fail_slow_per_day);
    if (t <= horizon_) entries.push_back(Entry{t, -1, EventKind::kFailSlowStart, 0, false});
  }
  heap_ = decltype(heap_)(std::greater<Entry>(), std::move(entries));
}

double FailureProcess::JobMtbfMin(int nodes) const {
  const double rate = params_.rate_per_1000_node_days / 1000.0 / kMinutesPerDay;
  return 1.0 / (nodes * rate);
}

void FailureProcess::SkipStale() {
  while (!heap_.empty()) {
    const Entry& e = heap_.top();
    if (e.bad && e.gen != bad_gen_[e.node]) {
      heap_.pop();
      continue;
    }
    break;
  }
}

double FailureProcess::PeekTime() const {
  const_cast<FailureProcess*>(this)->SkipStale();
  return heap_.empty() ? kInf : heap_.top().t;
}

FleetEvent FailureProcess::MakeFault(int node, double t, bool bad) {
  // A fixed number of draws per fault keeps node k's i-th fault identical across strategies;
  // a bad return's fault (its timing depends on the strategy's repairs) draws from the repair
  // stream so that it does not shift the node's regular causes.
  SimRng& rng = bad ? repair_rng_[node] : cause_rng_[node];
  const double u_cause = rng.Uniform(), u_remedy = rng.Uniform(), u_human = rng.Uniform(),
               u_corr = rng.Uniform();
  size_t i = std::upper_bound(cum_share_.begin(), cum_share_.end(), u_cause) - cum_share_.begin();
  i = std::min(i, params_.causes.size() - 1);
  const CauseSpec& spec = params_.causes[i];
  FleetEvent ev;
  ev.t_min = t;
  ev.kind = EventKind::kFault;
  ev.node = node;
  ev.cause = spec.cause;
  ev.detect = spec.detect;
  ev.bad_return = bad;
  if (!spec.node_fault) {
    ev.remedy = Remedy::kRestartInPlace;
  } else {
    ev.remedy = u_remedy < spec.reboot_fixable ? Remedy::kReboot : Remedy::kReplace;
  }
  if (bad) ev.remedy = Remedy::kReplace;  // it was not fixed the first time
  ev.needs_human = u_human < spec.human_fix;
  const int g = params_.correlated_group;
  if (!bad && spec.node_fault && g > 1 && u_corr < params_.correlated_share) {
    ev.group_first = node / g * g;
    ev.group_size = std::min(g, fleet_nodes() - ev.group_first);
    ev.cause = Cause::kNetwork;
    ev.detect = DetectClass::kD2Network;
    ev.remedy = Remedy::kReplace;
  }
  return ev;
}

FleetEvent FailureProcess::Pop() {
  SkipStale();
  const Entry e = heap_.top();
  heap_.pop();
  switch (e.kind) {
    case EventKind::kFault:
      if (e.bad) {
        ++bad_gen_[e.node];  // one accelerated fault per bad return
        return MakeFault(e.node, e.t, true);
      }
      PushNodeFault(e.node, e.t);
      return MakeFault(e.node, e.t, false);
    case EventKind::kPlanned: {
      const double next = e.t + planned_rng_.Exp(kMinutesPerDay / params_.planned_per_day);
      if (next <= horizon_) heap_.push(Entry{next, -1, EventKind::kPlanned, 0, false});
      FleetEvent ev;
      ev.t_min = e.t;
      ev.kind = EventKind::kPlanned;
      return ev;
    }
    case EventKind::kFailSlowStart: {
      const double end = e.t + slow_rng_.Sample(params_.fail_slow_duration);
      // The next start is drawn after this one ends: slow periods do not overlap.
      const double next = end + slow_rng_.Exp(kMinutesPerDay / params_.fail_slow_per_day);
      if (end <= horizon_) heap_.push(Entry{end, -1, EventKind::kFailSlowEnd, 0, false});
      if (next <= horizon_) heap_.push(Entry{next, -1, EventKind::kFailSlowStart, 0, false});
      FleetEvent ev;
      ev.t_min = e.t;
      ev.kind = EventKind::kFailSlowStart;
      ev.factor = params_.fail_slow_factor;
      return ev;
    }
    case EventKind::kFailSlowEnd: {
      FleetEvent ev;
      ev.t_min = e.t;
      ev.kind = EventKind::kFailSlowEnd;
      return ev;
    }
  }
  return FleetEvent{};
}

void FailureProcess::PushNodeFault(int node, double after_min) {
  const double rate = traits_[node].rate_per_min;
  const double t = rate > 0 ? after_min + fault_rng_[node].Exp(1.0 / rate) : kInf;
  next_fault_[node] = t <= horizon_ ? t : kInf;
  if (t <= horizon_) heap_.push(Entry{t, node, EventKind::kFault, 0, false});
}

RepairOutcome FailureProcess::Repair(int node, Remedy remedy, double t_min,
                                     double deep_check_min, double deep_check_catch) {
  SimRng& rng = repair_rng_[node];
  const double u_bad = rng.Uniform(), u_catch = rng.Uniform();
  const double z = rng.Normal();
  const Dist& d = remedy == Remedy::kReboot ? params_.reboot : params_.repair;
  RepairOutcome out;
  out.done_min = t_min + (d.cv > 0 ? d.Sample(z) : d.mean_min) + deep_check_min;
  out.bad = u_bad < params_.bad_return_share;
  out.caught_by_check = out.bad && deep_check_min > 0 && u_catch < deep_check_catch;
  return out;
}

void FailureProcess::ReturnBad(int node, double t_min) {
  const double rate = traits_[node].rate_per_min * params_.bad_return_multiplier;
  if (!(rate > 0)) return;
  const double t = t_min + repair_rng_[node].Exp(1.0 / rate);
  ++bad_gen_[node];
  if (t <= horizon_) heap_.push(Entry{t, node, EventKind::kFault, bad_gen_[node], true});
}

void FailureProcess::ClearBad(int node) { ++bad_gen_[node]; }

}  // namespace hf::sim
