#include "hyperfleet/sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace hf::sim {
namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (pos - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

nlohmann::json IntervalJson(const Interval& i) {
  return {{"mean", i.mean}, {"lo", i.lo}, {"hi", i.hi}};
}

}  // namespace

void FillRunIdentity(const FgufParams& params, const Strategy& strategy, int spares,
                     uint64_t seed, RunResult* r) {
  r->strategy_id = strategy.id;
  r->fleet_nodes = params.fleet_nodes;
  r->job_nodes = params.job_nodes;
  r->spares = spares;
  r->rate_per_1000_node_days = params.rate_per_1000_node_days;
  r->seed = seed;
  r->horizon_min = params.horizon_min();
  r->tau_min = strategy.CheckpointFor(params).interval_min;
  r->assumptions = strategy.assumptions;
}

void FillFromLedger(const JobLedger& ledger, RunResult* r) {
  const double wall = ledger.wall_min();
  r->ettr = wall > 0 ? ledger.productive_min() / wall : 0;
  r->fleet_goodput = r->fleet_nodes > 0 && r->horizon_min > 0
                         ? ledger.productive_min() * r->job_nodes /
                               (static_cast<double>(r->fleet_nodes) * r->horizon_min)
                         : 0;
  r->min_window_ettr = ledger.MinWindowEttr(60);
  for (int i = 0; i < kLossCount; ++i) {
    r->loss_pct[i] = wall > 0 ? 100.0 * ledger.losses()[i] / wall : 0;
  }
  const auto& ints = ledger.interruptions();
  r->interruptions = static_cast<int>(ints.size());
  std::vector<double> down;
  std::array<double, kStopClassCount> sum{};
  r->interruptions_by_class = {};
  for (const Interruption& i : ints) {
    down.push_back(i.downtime_min);
    sum[static_cast<int>(i.cls)] += i.downtime_min;
    ++r->interruptions_by_class[static_cast<int>(i.cls)];
  }
  double total = 0;
  for (double d : down) total += d;
  r->mttr_mean_min = down.empty() ? 0 : total / static_cast<double>(down.size());
  r->mttr_p95_min = Percentile(down, 0.95);
  for (int c = 0; c < kStopClassCount; ++c) {
    const int n = r->interruptions_by_class[c];
    r->mttr_by_class_min[c] = n > 0 ? sum[c] / n : 0;
  }
}

double StudentT95(int dof) {
  // Two-sided 95 % quantiles of Student's t (standard tables) for 1..30, then the normal
  // approximation with the first Cornish-Fisher correction.
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof < 1) dof = 1;
  if (dof <= 30) return kT[dof - 1];
  const double z = 1.959963984540054;
  return z + (z * z * z + z) / (4.0 * dof);
}

Interval MeanInterval(const std::vector<double>& values) {
  Interval out;
  if (values.empty()) return out;
  double sum = 0;
  for (double v : values) sum += v;
  const double n = static_cast<double>(values.size());
  out.mean = sum / n;
  out.lo = out.hi = out.mean;
  if (values.size() < 2) return out;
  double ss = 0;
  for (double v : values) ss += (v - out.mean) * (v - out.mean);
  const double half = StudentT95(static_cast<int>(values.size()) - 1) * std::sqrt(ss / (n - 1) / n);
  out.lo = out.mean - half;
  out.hi = out.mean + half;
  return out;
}

Aggregate AggregateRuns(const std::vector<RunResult>& runs, const std::string& label) {
  Aggregate a;
  a.label = label;
  a.replications = static_cast<int>(runs.size());
  if (runs.empty()) return a;
  const RunResult& first = runs.front();
  a.strategy_id = first.strategy_id;
  a.fleet_nodes = first.fleet_nodes;
  a.job_nodes = first.job_nodes;
  a.spares = first.spares;
  a.rate_per_1000_node_days = first.rate_per_1000_node_days;
  a.tau_min = first.tau_min;
  a.assumptions = first.assumptions;
  auto collect = [&](auto field) {
    std::vector<double> v;
    v.reserve(runs.size());
    for (const RunResult& r : runs) v.push_back(static_cast<double>(field(r)));
    return MeanInterval(v);
  };
  a.ettr = collect([](const RunResult& r) { return r.ettr; });
  a.fleet_goodput = collect([](const RunResult& r) { return r.fleet_goodput; });
  a.min_window_ettr = collect([](const RunResult& r) { return r.min_window_ettr; });
  a.mttr_mean_min = collect([](const RunResult& r) { return r.mttr_mean_min; });
  a.mttr_p95_min = collect([](const RunResult& r) { return r.mttr_p95_min; });
  a.interruptions = collect([](const RunResult& r) { return r.interruptions; });
  for (int i = 0; i < kLossCount; ++i) {
    a.loss_pct[i] = collect([i](const RunResult& r) { return r.loss_pct[i]; });
  }
  for (int c = 0; c < kStopClassCount; ++c) {
    double sum = 0;
    int n = 0;
    for (const RunResult& r : runs) {
      if (r.interruptions_by_class[c] > 0) {
        sum += r.mttr_by_class_min[c];
        ++n;
      }
    }
    a.mttr_by_class_min[c] = n > 0 ? sum / n : 0;
  }
  const double n = static_cast<double>(runs.size());
  for (const RunResult& r : runs) {
    a.spare_exhaustions += r.spare_exhaustions / n;
    a.human_interventions += r.human_interventions / n;
    a.hang_overevicted += r.false_positive_evictions / n;
    a.healthy_quarantined += r.healthy_quarantined / n;
    a.lemons_quarantined += r.lemons_quarantined / n;
    a.bad_returns += r.bad_returns / n;
  }
  return a;
}

nlohmann::json ToJson(const RunResult& r) {
  nlohmann::json loss = nlohmann::json::object(), mttr = nlohmann::json::object(),
                 count = nlohmann::json::object();
  for (int i = 0; i < kLossCount; ++i) loss[ToString(static_cast<Loss>(i))] = r.loss_pct[i];
  for (int c = 0; c < kStopClassCount; ++c) {
    mttr[ToString(static_cast<StopClass>(c))] = r.mttr_by_class_min[c];
    count[ToString(static_cast<StopClass>(c))] = r.interruptions_by_class[c];
  }
  return {{"strategy", r.strategy_id},
          {"fleet_nodes", r.fleet_nodes},
          {"job_nodes", r.job_nodes},
          {"spares", r.spares},
          {"rate_per_1000_node_days", r.rate_per_1000_node_days},
          {"seed", r.seed},
          {"horizon_min", r.horizon_min},
          {"tau_min", r.tau_min},
          {"ettr", r.ettr},
          {"fleet_goodput", r.fleet_goodput},
          {"min_window_ettr", r.min_window_ettr},
          {"loss_pct", loss},
          {"interruptions", r.interruptions},
          {"interruptions_by_class", count},
          {"job_faults", r.job_faults},
          {"planned", r.planned},
          {"mttr_mean_min", r.mttr_mean_min},
          {"mttr_p95_min", r.mttr_p95_min},
          {"mttr_by_class_min", mttr},
          {"spare_exhaustions", r.spare_exhaustions},
          {"human_interventions", r.human_interventions},
          {"hang_overevicted", r.false_positive_evictions},
          {"healthy_quarantined", r.healthy_quarantined},
          {"lemons_quarantined", r.lemons_quarantined},
          {"straggler_evictions", r.straggler_evictions},
          {"bad_returns", r.bad_returns},
          {"correlated_events", r.correlated_events},
          {"assumptions", r.assumptions}};
}

nlohmann::json ToJson(const Aggregate& a) {
  nlohmann::json loss = nlohmann::json::object(), mttr = nlohmann::json::object();
  for (int i = 0; i < kLossCount; ++i) {
    loss[ToString(static_cast<Loss>(i))] = IntervalJson(a.loss_pct[i]);
  }
  for (int c = 0; c < kStopClassCount; ++c) {
    mttr[ToString(static_cast<StopClass>(c))] = a.mttr_by_class_min[c];
  }
  return {{"strategy", a.strategy_id},
          {"label", a.label},
          {"fleet_nodes", a.fleet_nodes},
          {"job_nodes", a.job_nodes},
          {"spares", a.spares},
          {"rate_per_1000_node_days", a.rate_per_1000_node_days},
          {"replications", a.replications},
          {"tau_min", a.tau_min},
          {"ettr", IntervalJson(a.ettr)},
          {"fleet_goodput", IntervalJson(a.fleet_goodput)},
          {"min_window_ettr", IntervalJson(a.min_window_ettr)},
          {"mttr_mean_min", IntervalJson(a.mttr_mean_min)},
          {"mttr_p95_min", IntervalJson(a.mttr_p95_min)},
          {"interruptions", IntervalJson(a.interruptions)},
          {"loss_pct", loss},
          {"mttr_by_class_min", mttr},
          {"spare_exhaustions", a.spare_exhaustions},
          {"human_interventions", a.human_interventions},
          {"hang_overevicted", a.hang_overevicted},
          {"healthy_quarantined", a.healthy_quarantined},
          {"lemons_quarantined", a.lemons_quarantined},
          {"bad_returns", a.bad_returns},
          {"assumptions", a.assumptions}};
}

std::string FormatTable(const std::vector<Aggregate>& rows) {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line, "%-28s %6s %6s %5s %17s %7s %7s %8s  %s\n", "strategy", "N",
                "spares", "r_f", "ETTR (95% CI)", "fleet", "min 1h", "MTTR min",
                "largest losses (% of wall)");
  out += line;
  std::vector<std::string> notes;
  for (const Aggregate& a : rows) {
    // The three largest losses.
    std::array<int, kLossCount> idx{};
    for (int i = 0; i < kLossCount; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(),
              [&](int x, int y) { return a.loss_pct[x].mean > a.loss_pct[y].mean; });
    std::string losses;
    for (int k = 0; k < 3; ++k) {
      char part[64];
      std::snprintf(part, sizeof part, "%s%s %.2f", k ? ", " : "",
                    ToString(static_cast<Loss>(idx[k])), a.loss_pct[idx[k]].mean);
      losses += part;
    }
    const std::string name = a.label.empty() ? a.strategy_id : a.label;
    // One replication has no interval: "± n/a", not a zero width that reads as certainty.
    char half[16] = "n/a";
    if (a.replications > 1) std::snprintf(half, sizeof half, "%.4f", (a.ettr.hi - a.ettr.lo) / 2);
    std::snprintf(line, sizeof line, "%-28s %6d %6d %5.2f %7.4f ± %-7s %7.4f %7.4f %8.1f  %s%s\n",
                  name.c_str(), a.job_nodes, a.spares, a.rate_per_1000_node_days, a.ettr.mean,
                  half, a.fleet_goodput.mean, a.min_window_ettr.mean, a.mttr_mean_min.mean,
                  losses.c_str(), a.assumptions.empty() ? "" : " *");
    out += line;
    if (!a.assumptions.empty() &&
        std::find(notes.begin(), notes.end(), a.strategy_id) == notes.end()) {
      notes.push_back(a.strategy_id);
    }
  }
  for (const std::string& id : notes) {
    for (const Aggregate& a : rows) {
      if (a.strategy_id != id) continue;
      out += "* " + (a.label.empty() ? a.strategy_id : a.label) + ": assumptions, not measured:\n";
      for (const std::string& s : a.assumptions) out += "    - " + s + "\n";
      break;
    }
  }
  return out;
}

}  // namespace hf::sim
