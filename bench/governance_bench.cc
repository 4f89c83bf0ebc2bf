// governance_bench: the task-governance admission engine in virtual time (engine only, no
// I/O) on seeded traces (governance/trace.h; tiers S, M, L: bench/README.md). Prints
// decisions per CPU-second, cycle latency, bytes per pending workload, fairness error,
// lender reclaim latency and invariant violations. With --kueue it replays Kueue's own
// `baseline` or `large-scale` scheduler performance scenario in real (wall-clock) time
// (tier K). See bench/README.md.
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>

#include "CLI/CLI.hpp"
#include "hyperfleet/governance/checker.h"
#include "hyperfleet/governance/trace.h"

using namespace hf::governance;

namespace {

long RssKiB() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, rss = 0;
  in >> pages >> rss;
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Row {
  std::string name;
  SimReport rep;
  double bytes_per_pending = 0;
};

void Print(const Row& r) {
  const SimReport& s = r.rep;
  std::printf(
      "%-12s cycles %7lld  admitted %7lld  preempted %6lld  never-fit %5lld  considered %9lld\n"
      "             decisions/CPU-s %10.0f  considered/CPU-s %10.0f  engine CPU %.3f s "
      "(+ %.3f s events)\n"
      "             cycle CPU p50 %.1f us  p99 %.1f us  max %.1f us  max pending %lld\n"
      "             fairness CV %.3f  lender reclaim latency p50 %.1f s p99 %.1f s (n=%zu)  "
      "violations %lld\n"
      "             preemptions: in-team %lld, reclaim %lld, fair-share %lld\n",
      r.name.c_str(), (long long)s.cycles, (long long)s.admissions, (long long)s.preemptions,
      (long long)s.never_fits, (long long)s.considered,
      s.engine_cpu_s > 0 ? s.decisions / s.engine_cpu_s : 0,
      s.engine_cpu_s > 0 ? s.considered / s.engine_cpu_s : 0, s.engine_cpu_s, s.submit_cpu_s,
      Quantile(s.cycle_us, 0.5), Quantile(s.cycle_us, 0.99), Quantile(s.cycle_us, 1.0),
      (long long)s.max_pending, s.fairness_cv, Quantile(s.reclaim_latency_s, 0.5),
      Quantile(s.reclaim_latency_s, 0.99), s.reclaim_latency_s.size(),
      (long long)s.violations, (long long)s.preemptions_by_reason[0],
      (long long)s.preemptions_by_reason[1], (long long)s.preemptions_by_reason[2]);
  for (const auto& m : s.violation_messages) std::printf("             ! %s\n", m.c_str());
  std::fflush(stdout);
}

// ---- tier K: Kueue's scheduler performance scenarios, replayed in real time ----

// One workload class of a Kueue scenario (per ClusterQueue: `count` workloads created one
// every `interval_ms`, each requesting `cpu` CPUs and finishing `runtime_ms` after its
// admission).
struct KueueClass {
  const char* name;
  int count;
  int cpu;
  int runtime_ms;
  int kueue_priority;  // the scenario's WorkloadPriorityClass value
  int interval_ms;
  double kueue_tta_ms;  // Kueue's published mean time to admission
};

struct KueueScenario {
  const char* name;
  int cohorts;
  int cqs_per_cohort;
  KueueClass cls[3];
  double kueue_wall_s;
  double kueue_usage_pct;
};

// Kueue's scheduler performance scenarios (kubernetes-sigs/kueue
// test/performance/scheduler/configs/*): every CQ
// has nominal 20 CPU, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue
// LowerPriority.
const KueueScenario kBaseline{"baseline", 5, 6,
                              {{"small", 350, 1, 200, 50, 100, 215'468},
                               {"medium", 100, 5, 500, 100, 500, 76'768},
                               {"large", 50, 20, 1000, 200, 1200, 16'501}},
                              351.116, 55.9};
const KueueScenario kLargeScale{"large-scale", 10, 100,
                                {{"small", 35, 1, 150, 50, 60, 700'379},
                                 {"medium", 11, 5, 350, 100, 300, 256'413},
                                 {"large", 4, 20, 700, 200, 700, 105'604}},
                                1179.411, 38.64};

// One engine per Kueue cohort (a cluster), one team per ClusterQueue: every CQ has nominal
// 20 CPU and may borrow 100.
constexpr int kKueueNominalCpu = 20, kKueueBorrowCpu = 100;

std::vector<std::unique_ptr<Engine>> KueueEngines(const KueueScenario& sc, bool fair_share) {
  std::vector<std::unique_ptr<Engine>> engines;
  for (int c = 0; c < sc.cohorts; ++c) {
    auto e = std::make_unique<Engine>();
    InstanceTypeCapacity cpu{"cpu", 1, 0, 0, int64_t{sc.cqs_per_cohort} * kKueueNominalCpu};
    (void)e->SetCapacity({cpu});
    SchedulerPolicy pol;
    pol.fair_share = fair_share;
    pol.idle_resource_sharing = false;
    // Class weights are 0..100 in HyperPod; only their order matters to the engine, so
    // Kueue's 50 / 100 / 200 become 25 / 50 / 100.
    for (const KueueClass& k : sc.cls)
      pol.priority_classes.push_back({k.name, k.kueue_priority / 2});
    (void)e->SetPolicy(pol);
    for (int q = 0; q < sc.cqs_per_cohort; ++q) {
      TeamQuota tq;
      tq.team = "cq-" + std::to_string(q);
      tq.resources.push_back({"cpu", kKueueNominalCpu, {}, {}, {}});
      tq.absolute_borrow_limits.push_back({"cpu", kKueueBorrowCpu, {}, {}, {}});
      tq.strategy = SharingStrategy::kLendAndBorrow;
      tq.preempt_team_tasks = PreemptTeamTasks::kLowerPriority;
      tq.fair_share_weight = 1;
      (void)e->UpsertQuota(tq);
    }
    engines.push_back(std::move(e));
  }
  return engines;
}

// One workload of a scenario, created at `at_ms` in cohort `cohort`.
struct KueueArrival {
  int64_t at_ms;
  int cohort;
  int cls;
  WorkloadSpec spec;
};

// Every workload of `sc` in creation order, and the scenario's physical floor in seconds:
// a cohort cannot finish before its work over its capacity, nor before its last workload
// was created and ran.
std::vector<KueueArrival> KueueArrivals(const KueueScenario& sc, double& floor_s) {
  std::vector<KueueArrival> arrivals;
  uint64_t next_id = 1;
  double work_cpu_ms = 0;
  int64_t last_end_bound = 0;
  for (int c = 0; c < sc.cohorts; ++c)
    for (int q = 0; q < sc.cqs_per_cohort; ++q)
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < sc.cls[k].count; ++i) {
          KueueArrival a{int64_t{i} * sc.cls[k].interval_ms, c, k, {}};
          a.spec.id = next_id++;
          a.spec.team = "cq-" + std::to_string(q);
          a.spec.priority_class = sc.cls[k].name;
          a.spec.submit_time_ms = a.at_ms;
          a.spec.instance_type = "cpu";
          a.spec.count = 1;
          a.spec.per_pod = Resources{0, int64_t{sc.cls[k].cpu} * 1000, 0};
          work_cpu_ms += double(sc.cls[k].cpu) * sc.cls[k].runtime_ms;
          last_end_bound = std::max(last_end_bound, a.at_ms + sc.cls[k].runtime_ms);
          arrivals.push_back(std::move(a));
        }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const KueueArrival& a, const KueueArrival& b) { return a.at_ms < b.at_ms; });
  const double cohort_cpu = double(sc.cqs_per_cohort) * kKueueNominalCpu;
  floor_s = std::max(work_cpu_ms / sc.cohorts / cohort_cpu, double(last_end_bound)) / 1000.0;
  return arrivals;
}

// Replays `sc` in real time: workloads are submitted at their creation time on the wall
// clock; the engine runs a cycle whenever an event (creation or finish) arrives; an
// admitted workload finishes runtime_ms later (a preempted one restarts from zero when
// re-admitted).
class KueueReplay {
 public:
  KueueReplay(const KueueScenario& sc, bool fair_share)
      : sc_(sc), fair_share_(fair_share), engines_(KueueEngines(sc, fair_share)),
        arrivals_(KueueArrivals(sc, floor_s_)), dirty_(sc.cohorts, 0) {}

  void Run() {
    start_ = Clock::now();
    const int64_t total = static_cast<int64_t>(arrivals_.size());
    while (done_ < total) {
      int64_t due = std::numeric_limits<int64_t>::max();
      if (next_ < arrivals_.size()) due = arrivals_[next_].at_ms;
      if (!finishes_.empty()) due = std::min(due, finishes_.top().at_ms);
      if (due == std::numeric_limits<int64_t>::max()) {
        std::printf("K/%s: stuck with %lld of %lld done\n", sc_.name, (long long)done_,
                    (long long)total);
        return;
      }
      std::this_thread::sleep_until(start_ + std::chrono::milliseconds(due));
      const double wall = NowMs();
      const int64_t t = static_cast<int64_t>(wall);
      late_ms_max_ = std::max(late_ms_max_, wall - double(due));
      const double c0 = CpuSeconds();
      Account(t);
      FinishDue(t);
      ArriveDue(t);
      RunCycles(t);
      engine_cpu_s_ += CpuSeconds() - c0;
    }
    Print();
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Job {
    int cohort, cls;
    int64_t created_ms = 0, admitted_ms = -1;
    uint64_t epoch = 0;
    int cpu = 0;
  };
  struct Finish {
    int64_t at_ms;
    uint64_t id, epoch;
    bool operator>(const Finish& o) const {
      return at_ms != o.at_ms ? at_ms > o.at_ms : id > o.id;
    }
  };

  double NowMs() const {
    return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }
  void Account(int64_t t) {
    usage_integral_ += usage_cpu_ * double(t - last_change_);
    last_change_ = t;
  }
  // Workloads whose run ended by `t` (unless preempted meanwhile) leave their engine.
  void FinishDue(int64_t t) {
    while (!finishes_.empty() && finishes_.top().at_ms <= t) {
      const Finish f = finishes_.top();
      finishes_.pop();
      Job& j = jobs_[f.id];
      if (j.epoch != f.epoch || j.admitted_ms < 0) continue;  // preempted meanwhile
      (void)engines_[j.cohort]->Remove(f.id);
      usage_cpu_ -= j.cpu;
      ++done_;
      dirty_[j.cohort] = 1;
    }
  }
  // Workloads created by `t` are submitted.
  void ArriveDue(int64_t t) {
    while (next_ < arrivals_.size() && arrivals_[next_].at_ms <= t) {
      const KueueArrival& a = arrivals_[next_++];
      (void)engines_[a.cohort]->Submit(a.spec);
      jobs_[a.spec.id] = Job{a.cohort, a.cls, t, -1, 0, sc_.cls[a.cls].cpu};
      dirty_[a.cohort] = 1;
    }
  }
  // A cycle in every cohort that had an event; admissions start, victims stop.
  void RunCycles(int64_t t) {
    for (int c = 0; c < sc_.cohorts; ++c) {
      if (!dirty_[c]) continue;
      dirty_[c] = 0;
      const CycleResult res = engines_[c]->RunCycle(t);
      ++cycles_;
      for (const Admission& ad : res.admitted) {
        for (const Preemption& p : ad.victims) {
          Job& v = jobs_[p.victim];
          ++v.epoch;
          v.admitted_ms = -1;
          usage_cpu_ -= v.cpu;
          ++preemptions_;
        }
        Job& j = jobs_[ad.id];
        j.admitted_ms = t;
        ++j.epoch;
        usage_cpu_ += j.cpu;
        finishes_.push({t + sc_.cls[j.cls].runtime_ms, ad.id, j.epoch});
      }
    }
  }
  void Print() {
    const double wall_s = NowMs() / 1000.0;
    Account(static_cast<int64_t>(wall_s * 1000));
    // Time to admission counts the admission that ran to completion.
    double tta_sum[3] = {0, 0, 0};
    int64_t tta_n[3] = {0, 0, 0};
    for (const auto& [id, j] : jobs_) {
      tta_sum[j.cls] += double(j.admitted_ms - j.created_ms);
      ++tta_n[j.cls];
    }
    const double cohort_cpu = double(sc_.cqs_per_cohort) * kKueueNominalCpu;
    const double usage_pct =
        100.0 * usage_integral_ / (wall_s * 1000.0 * cohort_cpu * sc_.cohorts);
    std::printf(
        "K/%s (%s, %d cohorts x %d CQs, %lld workloads, real time): wall %.1f s; physical "
        "floor %.1f s (%.1f%% above); Kueue %.1f s (%.1fx faster)\n"
        "             mean time to admission (Kueue): ",
        sc_.name, fair_share_ ? "FairShare Enabled" : "FairShare Disabled", sc_.cohorts,
        sc_.cqs_per_cohort, (long long)arrivals_.size(), wall_s, floor_s_,
        100.0 * (wall_s / floor_s_ - 1), sc_.kueue_wall_s, sc_.kueue_wall_s / wall_s);
    for (int k = 0; k < 3; ++k)
      std::printf("%s %.0f ms (%.0f)%s", sc_.cls[k].name, tta_n[k] ? tta_sum[k] / tta_n[k] : 0.0,
                  sc_.cls[k].kueue_tta_ms, k < 2 ? ", " : "\n");
    std::printf(
        "             mean CQ usage %.1f%% of nominal (Kueue %.1f%%); preemptions %lld; cycles "
        "%lld; engine CPU %.3f s; max wake-up lateness %.1f ms\n",
        usage_pct, sc_.kueue_usage_pct, (long long)preemptions_, (long long)cycles_,
        engine_cpu_s_, late_ms_max_);
    std::fflush(stdout);
  }

  const KueueScenario& sc_;
  const bool fair_share_;
  std::vector<std::unique_ptr<Engine>> engines_;
  double floor_s_ = 0;
  std::vector<KueueArrival> arrivals_;
  std::unordered_map<uint64_t, Job> jobs_;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> finishes_;
  std::vector<char> dirty_;
  double usage_cpu_ = 0, usage_integral_ = 0;  // CPU in use, ∫ CPU dt (CPU·ms)
  int64_t last_change_ = 0, done_ = 0, preemptions_ = 0, cycles_ = 0;
  double engine_cpu_s_ = 0, late_ms_max_ = 0;
  size_t next_ = 0;
  Clock::time_point start_;
};

void RunKueue(const KueueScenario& sc, bool fair_share) { KueueReplay(sc, fair_share).Run(); }

// One tier in one mode through Simulate, with the checker's own work when it ran.
void RunTier(char tier, const std::string& mode, uint64_t seed, int64_t workloads, bool check,
             int full_every) {
  TraceConfig cfg = tier == 'S' ? TierS() : tier == 'M' ? TierM() : TierL();
  cfg.seed = seed;
  cfg.fair_share = mode == "fair";
  if (workloads >= 0) cfg.workloads = workloads;
  const Trace tr = GenerateTrace(cfg);
  SimOptions opt;
  opt.check = check;
  opt.full_check_every = full_every > 0 ? full_every : (tier == 'S' ? 1 : 100);
  Row row;
  row.name = std::string(1, tier) + "/" + mode;
  const InvariantChecker::Stats chk0 = InvariantChecker::ProcessTotals();
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = CpuSeconds();
  row.rep = Simulate(tr, opt);
  const double cpu_s = CpuSeconds() - cpu0;
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  Print(row);
  if (!check) return;
  // The checker's own work (Simulate owns the checker, so its process-wide totals).
  const InvariantChecker::Stats chk1 = InvariantChecker::ProcessTotals();
  std::printf(
      "             checker: %lld cycles checked (%lld full, %lld recounts), %lld "
      "queues checked, checker CPU %.1f s; run wall %.1f s, CPU %.1f s\n",
      (long long)(chk1.cycles - chk0.cycles), (long long)(chk1.full_checks - chk0.full_checks),
      (long long)(chk1.recounts - chk0.recounts),
      (long long)(chk1.queues_checked - chk0.queues_checked),
      (chk1.cpu_ns - chk0.cpu_ns) * 1e-9, wall_s, cpu_s);
  std::fflush(stdout);
}

// Memory per pending workload: load N pending workloads into an engine (one cycle, so
// that they are queued and classified) and divide the resident-set growth by N; then steady
// cycles with that backlog.
void RunPreload(char tier, uint64_t seed) {
  const int64_t n = tier == 'M' ? 100'000 : 1'000'000;
  TraceConfig cfg = TierM();
  cfg.seed = seed;
  cfg.workloads = 0;
  cfg.preload_pending = n;
  cfg.churn = false;
  const Trace tr = GenerateTrace(cfg);
  Engine eng;
  (void)eng.SetCapacity(tr.types);
  (void)eng.SetPolicy(tr.policy);
  for (const auto& q : tr.quotas) (void)eng.UpsertQuota(q);
  // Return what earlier runs freed to the system first, or the loaded engine reuses it
  // and the resident-set growth reads near zero.
  malloc_trim(0);
  const long before = RssKiB();
  const size_t heap_before = mallinfo2().uordblks;
  const double c0 = CpuSeconds();
  for (const auto& e : tr.events)
    if (e.kind == TraceEvent::kSubmit) (void)eng.Submit(e.spec);
  const double c1 = CpuSeconds();
  const auto res = eng.RunCycle(0);
  const double c2 = CpuSeconds();
  const long after = RssKiB();
  const double heap = static_cast<double>(mallinfo2().uordblks - heap_before);
  std::printf(
      "%c/preload   %lld pending: RSS +%.1f MiB = %.0f bytes/pending (heap in use %.0f, "
      "engine estimate %.0f); submit %.0f ns each; first cycle %.3f s (%zu admitted, %lld "
      "considered)\n",
      tier, (long long)n, (after - before) / 1024.0, (after - before) * 1024.0 / n, heap / n,
      static_cast<double>(eng.ApproxWorkloadBytes()) / n, (c1 - c0) * 1e9 / n, c2 - c1,
      res.admitted.size(), (long long)res.considered);
  // Steady cycles with that backlog: finish 20 admitted workloads per cycle.
  std::vector<double> us;
  std::vector<uint64_t> running;
  for (const auto& a : res.admitted) running.push_back(a.id);
  for (int c = 1; c <= 200 && !running.empty(); ++c) {
    for (int k = 0; k < 20 && !running.empty(); ++k) {
      (void)eng.Remove(running.back());
      running.pop_back();
    }
    const double t0 = CpuSeconds();
    const auto r = eng.RunCycle(c * 1000);
    us.push_back((CpuSeconds() - t0) * 1e6);
    for (const auto& a : r.admitted) running.insert(running.begin(), a.id);
  }
  std::printf("%c/preload   steady cycles with %lld pending: p50 %.1f us  p99 %.1f us  "
              "max %.1f us\n",
              tier, (long long)eng.PendingCount(), Quantile(us, 0.5), Quantile(us, 0.99),
              Quantile(us, 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"governance admission engine benchmark (virtual time)"};
  std::string tiers = "S,M";
  uint64_t seed = 1;
  int64_t workloads = -1;
  bool check = true;
  int full_every = 0;
  std::string modes = "fair,fcfs";
  std::string kueue;
  app.add_option("--tiers", tiers, "comma-separated tiers: S, M, L");
  app.add_option("--seed", seed, "trace seed");
  app.add_option("--workloads", workloads, "override the tier's workload count");
  app.add_option("--check", check, "run the invariant checker after every cycle");
  app.add_option("--full-check-every", full_every,
                 "the checker's full checks (from-scratch recount, every team's usage "
                 "against the engine, every queue) every N cycles (0: S every cycle, M/L "
                 "every 100)");
  app.add_option("--modes", modes, "fair, fcfs or both");
  app.add_option("--kueue", kueue,
                 "replay Kueue's scenario in real time instead of the tiers: baseline, "
                 "large-scale or both (comma-separated); --modes picks FairShare");
  CLI11_PARSE(app, argc, argv);

  if (!kueue.empty()) {
    for (const KueueScenario* sc : {&kBaseline, &kLargeScale}) {
      if (kueue.find(sc->name) == std::string::npos) continue;
      for (const std::string mode : {"fcfs", "fair"})
        if (modes.find(mode) != std::string::npos) RunKueue(*sc, mode == "fair");
    }
    return 0;
  }
  for (char tier : tiers) {
    if (tier == ',') continue;
    for (const std::string mode : {"fair", "fcfs"}) {
      if (modes.find(mode) == std::string::npos) continue;
      RunTier(tier, mode, seed, workloads, check, full_every);
    }
  }
  for (char tier : tiers) {
    if (tier == 'M' || tier == 'L') RunPreload(tier, seed);
  }
  return 0;
}
