// governance_bench: the task-governance admission engine in virtual time (engine only, no
// I/O) on the seeded traces of ../shared/research/governance.md §5 (tiers S, M, L). Prints
// decisions per CPU-second, cycle latency, bytes per pending workload, fairness error,
// lender reclaim latency and invariant violations. See bench/README.md.
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"governance admission engine benchmark (virtual time)"};
  std::string tiers = "S,M";
  uint64_t seed = 1;
  int64_t workloads = -1;
  bool check = true;
  int full_every = 0;
  std::string modes = "fair,fcfs";
  app.add_option("--tiers", tiers, "comma-separated tiers: S, M, L");
  app.add_option("--seed", seed, "trace seed");
  app.add_option("--workloads", workloads, "override the tier's workload count");
  app.add_option("--check", check, "run the invariant checker after every cycle");
  app.add_option("--full-check-every", full_every,
                 "whole-queue checks every N cycles (0: S every cycle, M/L every 100)");
  app.add_option("--modes", modes, "fair, fcfs or both");
  CLI11_PARSE(app, argc, argv);

  for (char tier : tiers) {
    if (tier == ',') continue;
    for (const std::string mode : {"fair", "fcfs"}) {
      if (modes.find(mode) == std::string::npos) continue;
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
      row.rep = Simulate(tr, opt);
      Print(row);
    }
  }
  // Memory per pending workload: load N pending workloads into an engine (one cycle, so
  // that they are queued and classified) and divide the resident-set growth by N.
  for (char tier : tiers) {
    if (tier != 'M' && tier != 'L') continue;
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
    const long before = RssKiB();
    const double c0 = CpuSeconds();
    for (const auto& e : tr.events)
      if (e.kind == TraceEvent::kSubmit) (void)eng.Submit(e.spec);
    const double c1 = CpuSeconds();
    const auto res = eng.RunCycle(0);
    const double c2 = CpuSeconds();
    const long after = RssKiB();
    std::printf(
        "%c/preload   %lld pending: RSS +%.1f MiB = %.0f bytes/pending (engine estimate %.0f); "
        "submit %.0f ns each; first cycle %.3f s (%zu admitted, %lld considered)\n",
        tier, (long long)n, (after - before) / 1024.0, (after - before) * 1024.0 / n,
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
    std::printf("%c/preload   steady cycles with %lld pending: p50 %.1f us  p99 %.1f us  max %.1f us\n",
                tier, (long long)eng.PendingCount(), Quantile(us, 0.5), Quantile(us, 0.99),
                Quantile(us, 1.0));
  }
  return 0;
}
