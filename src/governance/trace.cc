#include "hyperfleet/governance/trace.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hyperfleet/governance/checker.h"

namespace hf::governance {
namespace {

// xoshiro256** seeded through splitmix64: small, fast and identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& x : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      x = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Uniform() * static_cast<double>(n)); }
  double Normal() {  // Box-Muller; one value per call keeps the stream simple
    const double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }
  double Exp(double mean) { return -mean * std::log(std::max(Uniform(), 1e-300)); }
  // Index drawn with probability ∝ w[i].
  size_t Pick(const std::vector<double>& w) {
    double sum = 0;
    for (double x : w) sum += x;
    double u = Uniform() * sum;
    for (size_t i = 0; i < w.size(); ++i) {
      if (u < w[i]) return i;
      u -= w[i];
    }
    return w.size() - 1;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

const char* const kClasses[] = {"training", "fine-tuning", "batch", "experimentation",
                                "inference"};
const double kClassMix[] = {.50, .20, .15, .10, .05};

int64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

TraceConfig TierS() { return TraceConfig{}; }

TraceConfig TierM() {
  TraceConfig c;
  c.teams = 1000;
  c.nodes = 10'000;
  c.workloads = 100'000;
  return c;
}

TraceConfig TierL() {
  TraceConfig c = TierM();
  c.preload_pending = 1'000'000;
  return c;
}

namespace {

// GenerateTrace's steps. They draw from one Rng in this order, so a seed gives the same
// trace as long as the order stays.

/// The four instance types, split 40/30/20/10 % of `nodes`.
std::vector<InstanceTypeCapacity> ClusterTypes(int64_t nodes) {
  const double share[] = {.4, .3, .2, .1};
  std::vector<InstanceTypeCapacity> types = {
      {"ml.p5.48xlarge", 192, 2048, 8, 0},
      {"ml.p4d.24xlarge", 96, 1152, 8, 0},
      {"ml.trn1.32xlarge", 128, 512, 16, 0},
      {"ml.c5.24xlarge", 96, 192, 0, 0},
  };
  for (int f = 0; f < 4; ++f)
    types[f].instances = std::max<int64_t>(1, std::llround(nodes * share[f]));
  return types;
}

/// Which types each team holds (by type index) and how many instances of each.
struct TeamLayout {
  std::vector<std::vector<int>> holds;     ///< by team: type indexes
  std::vector<std::vector<int64_t>> count; ///< by team, by type: instances of quota
  std::vector<double> weight;              ///< by team: instances in all (job submission odds)
  std::vector<int> toggled;                ///< teams whose activation flips every hour
};

/// Teams: which types each holds, then Zipf(1.1) shares of 90% of each type.
TeamLayout LayOutTeams(Rng& rng, int n, const std::vector<InstanceTypeCapacity>& types) {
  TeamLayout l;
  l.holds.resize(n);
  for (int t = 0; t < n; ++t) {
    const int first = static_cast<int>(rng.Below(4));
    l.holds[t].push_back(first);
    if (rng.Uniform() < 0.3) l.holds[t].push_back((first + 1 + static_cast<int>(rng.Below(3))) % 4);
  }
  l.count.assign(n, std::vector<int64_t>(4, 0));
  for (int f = 0; f < 4; ++f) {
    std::vector<int> members;
    for (int t = 0; t < n; ++t)
      if (std::find(l.holds[t].begin(), l.holds[t].end(), f) != l.holds[t].end())
        members.push_back(t);
    if (members.empty()) continue;
    // Random rank order, then weight 1/rank^1.1.
    for (size_t i = members.size(); i > 1; --i) std::swap(members[i - 1], members[rng.Below(i)]);
    double sum = 0;
    for (size_t i = 0; i < members.size(); ++i) sum += 1 / std::pow(i + 1.0, 1.1);
    const double budget = 0.9 * static_cast<double>(types[f].instances);
    for (size_t i = 0; i < members.size(); ++i)
      l.count[members[i]][f] = std::max<int64_t>(
          1, static_cast<int64_t>(budget / std::pow(i + 1.0, 1.1) / sum));
  }
  l.weight.assign(n, 0);
  return l;
}

/// Each team's quota: its types (20 % of accelerator amounts given as accelerators),
/// strategy, borrow limit, weight and preemption mix. Fills l.weight and l.toggled.
std::vector<TeamQuota> MakeQuotas(Rng& rng, const std::vector<InstanceTypeCapacity>& types,
                                  TeamLayout& l) {
  std::vector<TeamQuota> quotas;
  for (int t = 0; t < static_cast<int>(l.holds.size()); ++t) {
    TeamQuota q;
    q.team = absl::StrFormat("team-%04d", t);
    for (int f : l.holds[t]) {
      QuotaResource qr;
      qr.instance_type = types[f].name;
      if (types[f].accelerators > 0 && rng.Uniform() < 0.2)
        qr.accelerators = static_cast<double>(l.count[t][f] * types[f].accelerators);
      else
        qr.count = l.count[t][f];
      q.resources.push_back(qr);
      l.weight[t] += static_cast<double>(l.count[t][f]);
    }
    const double s = rng.Uniform();
    if (s < 0.7) {
      q.strategy = SharingStrategy::kLendAndBorrow;
      const int limits[] = {50, 100, 200, 500};
      q.borrow_limit_percent = limits[rng.Pick({.4, .3, .2, .1})];
      if (rng.Uniform() < 0.05) {
        QuotaResource abs;
        abs.instance_type = q.resources[0].instance_type;
        abs.count = std::max<int64_t>(1, l.count[t][l.holds[t][0]] / 2);
        q.absolute_borrow_limits.push_back(abs);
      }
    } else if (s < 0.9) {
      q.strategy = SharingStrategy::kLend;
    } else {
      q.strategy = SharingStrategy::kDontLend;
    }
    q.fair_share_weight = rng.Uniform() < 0.05 ? 0 : 1 + static_cast<int>(rng.Below(100));
    q.preempt_team_tasks =
        rng.Uniform() < 0.8 ? PreemptTeamTasks::kLowerPriority : PreemptTeamTasks::kNever;
    if (rng.Uniform() < 0.02) l.toggled.push_back(t);
    quotas.push_back(q);
  }
  return quotas;
}

/// One job (id `id`), of a team drawn by quota size: gang size, class, 1 % that never fit,
/// 25 % sub-instance pods, log-normal run time. Adds its node-seconds to `node_seconds`
/// unless `preload`.
TraceEvent DrawJob(Rng& rng, uint64_t id, const Trace& tr, const TeamLayout& l, bool preload,
                   double& node_seconds) {
  static const int64_t sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const std::vector<double> size_p = {.30, .20, .15, .12, .09, .07, .04, .02, .01};
  static const std::vector<double> class_p(std::begin(kClassMix), std::end(kClassMix));
  const int t = static_cast<int>(rng.Pick(l.weight));
  const TeamQuota& q = tr.quotas[t];
  std::vector<double> fw;
  for (int f : l.holds[t]) fw.push_back(static_cast<double>(l.count[t][f]));
  const int f = l.holds[t][rng.Pick(fw)];
  const InstanceTypeCapacity& it = tr.types[f];
  TraceEvent e;
  e.kind = TraceEvent::kSubmit;
  e.spec.id = id;
  e.spec.team = q.team;
  e.spec.priority_class = kClasses[rng.Pick(class_p)];
  e.spec.instance_type = it.name;
  const double extra =
      q.strategy == SharingStrategy::kLendAndBorrow ? q.borrow_limit_percent / 100.0 : 0;
  const int64_t cap =
      std::max<int64_t>(1, static_cast<int64_t>(l.count[t][f] * (1 + extra)));
  double nodes_equiv;
  const double kind = rng.Uniform();
  if (kind < 0.01) {
    e.spec.count = static_cast<int32_t>(cap + 1 + rng.Below(4));  // never fits
    nodes_equiv = 0;
  } else if (kind < 0.76) {
    e.spec.count = static_cast<int32_t>(std::min(sizes[rng.Pick(size_p)], cap));
    nodes_equiv = e.spec.count;
  } else {
    const int64_t g = int64_t{1} << rng.Below(3);  // 1, 2 or 4 accelerators
    const double frac = it.accelerators > 0 ? static_cast<double>(g) / it.accelerators
                                            : static_cast<double>(g) / 8;
    Resources per{it.accelerators > 0 ? g : 0,
                  static_cast<int64_t>(frac * it.vcpus) * 1000,
                  static_cast<int64_t>(frac * it.memory_gib * 1024)};
    e.spec.per_pod = per;
    e.spec.count = 1;
    nodes_equiv = frac;
  }
  const double run_s =
      std::clamp(1200 * std::exp(1.5 * rng.Normal()), 60.0, 7 * 86400.0);
  e.runtime_ms = static_cast<int64_t>(run_s * 1000);
  if (!preload) node_seconds += nodes_equiv * run_s;
  return e;
}

/// Arrival times: the preload at 0, the rest uniformly over a horizon that offers
/// `offered_load` × the cluster's node-seconds (a Poisson process given its count).
/// Returns the horizon in seconds.
double SetArrivals(Rng& rng, const TraceConfig& cfg, double node_seconds,
                   std::vector<TraceEvent>& jobs) {
  const double horizon_s =
      std::max(60.0, node_seconds / (cfg.offered_load * static_cast<double>(cfg.nodes)));
  std::vector<int64_t> times(cfg.workloads);
  for (auto& x : times) x = static_cast<int64_t>(rng.Uniform() * horizon_s * 1000);
  std::sort(times.begin(), times.end());
  for (int64_t i = 0; i < cfg.workloads; ++i) {
    TraceEvent& e = jobs[cfg.preload_pending + i];
    e.time_ms = times[i];
  }
  for (auto& e : jobs) e.spec.submit_time_ms = e.time_ms;
  return horizon_s;
}

/// Cancels of 2 % of the jobs, then hourly configuration churn until `horizon_s`: quota
/// sizes and weights of 1 % of the teams, the toggled teams' activation, and one team
/// deleted and created again an hour later.
std::vector<TraceEvent> Churn(Rng& rng, const std::vector<TraceEvent>& jobs,
                              const std::vector<TeamQuota>& quotas,
                              const std::vector<int>& toggled, double horizon_s) {
  std::vector<TraceEvent> extra_events;
  for (const auto& e : jobs) {
    if (rng.Uniform() < 0.02) {
      TraceEvent c;
      c.kind = TraceEvent::kCancel;
      c.id = e.spec.id;
      c.time_ms = e.time_ms + static_cast<int64_t>(rng.Exp(1800) * 1000);
      extra_events.push_back(c);
    }
  }
  const int n = static_cast<int>(quotas.size());
  std::vector<TeamQuota> current = quotas;
  int removed = -1;
  for (int64_t h = 1; h * 3600 < horizon_s; ++h) {
    const int64_t at = h * 3600 * 1000;
    const int changes = std::max(1, n / 100);
    for (int k = 0; k < changes; ++k) {
      const int t = static_cast<int>(rng.Below(n));
      if (t == removed) continue;
      TeamQuota& q = current[t];
      if (rng.Uniform() < 0.5) {
        const double factor = rng.Uniform() < 0.5 ? 0.8 : 1.2;
        for (auto& qr : q.resources) {
          if (qr.count) qr.count = std::max<int64_t>(1, std::llround(*qr.count * factor));
          if (qr.accelerators)
            qr.accelerators = std::max(1.0, std::round(*qr.accelerators * factor));
        }
      } else {
        q.fair_share_weight = rng.Uniform() < 0.05 ? 0 : 1 + static_cast<int>(rng.Below(100));
      }
      extra_events.push_back({TraceEvent::kUpsertQuota, at, {}, 0, 0, q});
    }
    for (int t : toggled) {
      current[t].active = !current[t].active;
      extra_events.push_back({TraceEvent::kUpsertQuota, at, {}, 0, 0, current[t]});
    }
    // One team deleted, and created again an hour later.
    if (removed >= 0) {
      extra_events.push_back({TraceEvent::kUpsertQuota, at, {}, 0, 0, current[removed]});
      removed = -1;
    } else if (n > 2) {
      removed = static_cast<int>(rng.Below(n));
      TraceEvent e{TraceEvent::kRemoveQuota, at, {}, 0, 0, {}};
      e.quota.team = current[removed].team;
      extra_events.push_back(e);
    }
  }
  return extra_events;
}

}  // namespace

Trace GenerateTrace(const TraceConfig& cfg) {
  Rng rng(cfg.seed);
  Trace tr;
  tr.types = ClusterTypes(cfg.nodes);
  tr.policy.fair_share = cfg.fair_share;
  tr.policy.idle_resource_sharing = cfg.idle_resource_sharing;
  tr.policy.priority_classes = {{"inference", 100},
                                {"experimentation", 80},
                                {"training", 70},
                                {"fine-tuning", 50},
                                {"batch", 10}};
  TeamLayout teams = LayOutTeams(rng, cfg.teams, tr.types);
  tr.quotas = MakeQuotas(rng, tr.types, teams);
  if (teams.toggled.empty() && cfg.churn) {
    teams.toggled.push_back(static_cast<int>(rng.Below(cfg.teams)));
  }
  const int64_t total = cfg.workloads + cfg.preload_pending;
  std::vector<TraceEvent> jobs;
  jobs.reserve(total);
  double node_seconds = 0;
  for (int64_t i = 0; i < total; ++i) {
    jobs.push_back(DrawJob(rng, static_cast<uint64_t>(i + 1), tr, teams,
                           i < cfg.preload_pending, node_seconds));
  }
  const double horizon_s = SetArrivals(rng, cfg, node_seconds, jobs);
  std::vector<TraceEvent> extra_events;
  if (cfg.churn) extra_events = Churn(rng, jobs, tr.quotas, teams.toggled, horizon_s);
  tr.events = std::move(jobs);
  tr.events.insert(tr.events.end(), extra_events.begin(), extra_events.end());
  std::stable_sort(tr.events.begin(), tr.events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.time_ms < b.time_ms; });
  return tr;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

namespace {

/// One run of Simulate: the engine, the checker that mirrors it, and the workloads in
/// flight, advanced one tick at a time.
class Simulation {
 public:
  Simulation(const Trace& tr, const SimOptions& opt)
      : tr_(tr), opt_(opt), chk_(tr.types, tr.policy) {
    Must(eng_.SetCapacity(tr.types), "SetCapacity");
    Must(eng_.SetPolicy(tr.policy), "SetPolicy");
    for (const auto& q : tr.quotas)
      if (Must(eng_.UpsertQuota(q), "UpsertQuota") && opt.check) chk_.UpsertQuota(q);
    runs_.reserve(tr.events.size());
  }

  /// Runs every tick that has an event or a finish, then sums up.
  SimReport Run() {
    const int64_t period = opt_.cycle_period_ms;
    while (next_ < tr_.events.size() || !finishes_.empty()) {
      int64_t t = std::numeric_limits<int64_t>::max();
      if (next_ < tr_.events.size()) t = tr_.events[next_].time_ms;
      if (!finishes_.empty()) t = std::min(t, finishes_.top().at);
      const int64_t tick = (t + period - 1) / period * period;
      Tick(tick);
      rep_.end_time_ms = tick;
      if (next_ >= tr_.events.size() && finishes_.empty()) break;
    }
    rep_.decisions = rep_.admissions + rep_.preemptions + rep_.never_fits;
    rep_.violations += chk_.violations();
    for (const auto& m : chk_.messages())
      if (rep_.violation_messages.size() < 50) rep_.violation_messages.push_back(m);
    rep_.fairness_cv = cv_n_ ? cv_sum_ / cv_n_ : 0;
    rep_.log_hash = hash_;
    return std::move(rep_);
  }

 private:
  struct Workload {
    int64_t runtime_ms = 0;
    uint64_t epoch = 0;
    bool admitted = false;
    int64_t reclaim_from = -1;  // submit time, when it fit the unused nominal at submission
  };
  struct Finish {
    int64_t at;
    uint64_t id, epoch;
    bool operator>(const Finish& o) const {
      return at != o.at ? at > o.at : id > o.id;
    }
  };

  /// Counts a failed engine call as a violation (the first 50 with their message).
  bool Must(const Status& s, const char* what) {
    if (!s.ok()) {
      ++rep_.violations;
      if (rep_.violation_messages.size() < 50)
        rep_.violation_messages.push_back(absl::StrCat(what, ": ", s.ToString()));
    }
    return s.ok();
  }

  /// Adds `line` to the decision log (FNV-1a, and the text when kept).
  void Log(const std::string& line) {
    for (unsigned char c : line) hash_ = (hash_ ^ c) * 1099511628211ULL;
    if (opt_.keep_log) rep_.log += line;
  }

  /// One tick: the finishes and events due, a cycle, its decisions and checks.
  void Tick(int64_t tick) {
    const int64_t cpu0 = CpuNs();
    while (!finishes_.empty() && finishes_.top().at <= tick) {
      const Finish f = finishes_.top();
      finishes_.pop();
      auto it = runs_.find(f.id);
      if (it == runs_.end() || it->second.epoch != f.epoch || !it->second.admitted) continue;
      Must(eng_.Remove(f.id), "Remove(finish)");
      if (opt_.check) chk_.Removed(f.id);
      runs_.erase(it);
      Log(absl::StrCat(tick, " f ", f.id, "\n"));
    }
    while (next_ < tr_.events.size() && tr_.events[next_].time_ms <= tick) {
      Apply(tr_.events[next_++], tick);
    }
    const int64_t cpu1 = CpuNs();
    rep_.submit_cpu_s += (cpu1 - cpu0) * 1e-9;
    const CycleResult res = eng_.RunCycle(tick);
    const int64_t cpu2 = CpuNs();
    rep_.engine_cpu_s += (cpu2 - cpu1) * 1e-9;
    rep_.cycle_us.push_back((cpu2 - cpu1) * 1e-3);
    ++rep_.cycles;
    rep_.considered += res.considered;
    rep_.max_pending = std::max(rep_.max_pending, eng_.PendingCount());
    Record(res, tick);
    if (opt_.check) Check(res, tick);
  }

  /// One trace event, told to the engine (and the checker once the engine took it).
  void Apply(const TraceEvent& e, int64_t tick) {
    switch (e.kind) {
      case TraceEvent::kSubmit: {
        if (!Must(eng_.Submit(e.spec), "Submit")) break;
        Workload r;
        r.runtime_ms = e.runtime_ms;
        if (opt_.check) {
          chk_.Submitted(e.spec);
          if (chk_.FitsUnusedNominal(e.spec)) r.reclaim_from = e.time_ms;
        }
        runs_[e.spec.id] = r;
        break;
      }
      case TraceEvent::kCancel: {
        auto it = runs_.find(e.id);
        if (it == runs_.end() || it->second.admitted) break;
        Must(eng_.Remove(e.id), "Remove(cancel)");
        if (opt_.check) chk_.Removed(e.id);
        runs_.erase(it);
        Log(absl::StrCat(tick, " c ", e.id, "\n"));
        break;
      }
      case TraceEvent::kUpsertQuota:
        if (Must(eng_.UpsertQuota(e.quota), "UpsertQuota") && opt_.check) chk_.UpsertQuota(e.quota);
        break;
      case TraceEvent::kRemoveQuota:
        if (Must(eng_.RemoveQuota(e.quota.team), "RemoveQuota") && opt_.check)
          chk_.RemoveQuota(e.quota.team);
        break;
    }
  }

  /// A cycle's admissions (their victims restart from zero when admitted again) and
  /// never-fit classifications: counted, logged, and each admission's finish scheduled.
  void Record(const CycleResult& res, int64_t tick) {
    for (const Admission& a : res.admitted) {
      ++rep_.admissions;
      std::string line = absl::StrCat(tick, " a ", a.id);
      for (const Preemption& p : a.victims) {
        ++rep_.preemptions;
        ++rep_.preemptions_by_reason[static_cast<int>(p.reason)];
        absl::StrAppend(&line, " v", p.victim, ":", std::string(PreemptionReasonName(p.reason)));
        auto it = runs_.find(p.victim);
        if (it != runs_.end()) {
          it->second.admitted = false;
          ++it->second.epoch;
        }
      }
      Log(line + "\n");
      Workload& r = runs_[a.id];
      r.admitted = true;
      ++r.epoch;
      if (r.reclaim_from >= 0) {
        rep_.reclaim_latency_s.push_back((tick - r.reclaim_from) * 1e-3);
        r.reclaim_from = -1;
      }
      finishes_.push({tick + r.runtime_ms, a.id, r.epoch});
    }
    for (uint64_t id : res.never_fits) {
      if (never_fit_seen_.insert(id).second) ++rep_.never_fits;
      Log(absl::StrCat(tick, " n ", id, "\n"));
    }
  }

  /// The invariant checker on this cycle, and every 10 minutes a fairness sample.
  void Check(const CycleResult& res, int64_t tick) {
    const bool full = opt_.full_check_every > 0 && rep_.cycles % opt_.full_check_every == 0;
    const int64_t before = chk_.violations();
    chk_.CheckCycle(res, eng_, full);
    if (getenv("GOV_DEBUG") && chk_.violations() > before) DebugAbort();
    if (tick >= next_fair_sample_) {
      next_fair_sample_ = tick + 600'000;
      SampleFairness();
    }
  }

  /// GOV_DEBUG: prints the new violation and the engine's view of its job, then aborts.
  void DebugAbort() const {
    fprintf(stderr, "%s\n", chk_.messages().back().c_str());
    for (const auto& m : {chk_.messages().back()}) {
      auto p = m.find("job ");
      if (p == std::string::npos) continue;
      uint64_t id = strtoull(m.c_str() + p + 4, nullptr, 10);
      auto why = eng_.Explain(id);
      if (why.ok()) fprintf(stderr, "%s", RenderWhyPending(*why).c_str());
    }
    abort();
  }

  /// The coefficient of variation of the weighted shares of borrowing teams with demand.
  void SampleFairness() {
    std::vector<double> shares;
    for (const auto& tv : chk_.Teams())
      if (tv.active && tv.weight > 0 && tv.weighted_share > 0 && tv.pending > 0)
        shares.push_back(tv.weighted_share);
    if (shares.size() < 2) return;
    const double mean = std::accumulate(shares.begin(), shares.end(), 0.0) / shares.size();
    double var = 0;
    for (double s : shares) var += (s - mean) * (s - mean);
    cv_sum_ += std::sqrt(var / shares.size()) / mean;
    ++cv_n_;
  }

  const Trace& tr_;
  const SimOptions& opt_;
  SimReport rep_;
  Engine eng_;
  InvariantChecker chk_;
  std::unordered_map<uint64_t, Workload> runs_;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> finishes_;
  uint64_t hash_ = 1469598103934665603ULL;
  std::unordered_set<uint64_t> never_fit_seen_;  // a reclassification is no new decision
  size_t next_ = 0;
  int64_t next_fair_sample_ = 600'000;
  double cv_sum_ = 0;
  int cv_n_ = 0;
};

}  // namespace

SimReport Simulate(const Trace& tr, const SimOptions& opt) { return Simulation(tr, opt).Run(); }

}  // namespace hf::governance
