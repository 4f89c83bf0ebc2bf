#include "simulate_report.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hyperfleet/sim/chart.h"
#include "hyperfleet/sim/job_ledger.h"

namespace hf::cli {
namespace {

/// `v` to 3 significant digits, shortest ("3.8", "2.34", "0.87", "52.8"), C locale.
std::string Num(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 3);
  return ec == std::errc() ? std::string(buf, end) : "?";
}

/// "2 %" style percent of a fraction.
std::string Pct(double fraction) { return Num(fraction * 100) + " %"; }

/// The key columns of a detail table row: strategy, N, spares, r_f (as sim::FormatTable).
std::string RowKey(const sim::Aggregate& a) {
  return absl::StrFormat("%-28s %6d %6d %5.2f", a.label.empty() ? a.strategy_id : a.label,
                         a.job_nodes, a.spares, a.rate_per_1000_node_days);
}

/// The aggregate of (strategy, N, rate, spares) in `rows`; nullptr if it was not run.
const sim::Aggregate* Find(const std::vector<sim::Aggregate>& rows, const std::string& id,
                           int nodes, double rate, int spares) {
  for (const auto& a : rows) {
    if (a.strategy_id == id && a.job_nodes == nodes && a.rate_per_1000_node_days == rate &&
        a.spares == spares) {
      return &a;
    }
  }
  return nullptr;
}

/// Aggregates for every strategy of `spec` at N = `nodes` over `rates` × `spares`: from
/// `rows` when all were run, else from a run of that grid.
std::vector<sim::Aggregate> Sweep(const SimulateRun& r, const std::vector<sim::Aggregate>& rows,
                                  int nodes, const std::vector<double>& rates,
                                  const std::vector<int>& spares) {
  std::vector<sim::Aggregate> out;
  for (const auto& s : r.spec.strategies) {
    for (double rate : rates) {
      for (int sp : spares) {
        const sim::Aggregate* a = Find(rows, s.id, nodes, rate, sp);
        if (!a && r.engine == "product") continue;  // seconds a replication: chart what ran
        if (!a) {
          sim::GridSpec spec = r.spec;
          spec.job_nodes = {nodes};
          spec.rates = rates;
          spec.spares = spares;
          return sim::RunGrid(spec, r.run_one);
        }
        out.push_back(*a);
      }
    }
  }
  return out;
}

std::vector<sim::EttrObservation> Observations(const std::vector<sim::Aggregate>& rows,
                                               bool by_spares) {
  std::vector<sim::EttrObservation> out;
  for (const auto& a : rows) {
    out.push_back({a.label, by_spares ? static_cast<double>(a.spares) : a.rate_per_1000_node_days,
                   a.ettr.mean, a.ettr.lo, a.ettr.hi,
                   a.strategy_id == "HF" || a.strategy_id == "HF0"});
  }
  return out;
}

}  // namespace

std::string Thousands(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string RunHeadline(const SimulateRun& r) {
  const sim::GridSpec& s = r.spec;
  return absl::StrCat(
      "FGUF-1, ", r.engine, " engine: ", Thousands(s.seeds),
      s.seeds == 1 ? " replication of " : " replications of ",
      Num(s.base.horizon_days), s.base.horizon_days == 1 ? " day" : " days",
      " per configuration (seeds ", s.first_seed, "..",
      s.first_seed + static_cast<uint64_t>(s.seeds) - 1, "); fleet ",
      s.fleet_nodes > 0 ? Thousands(s.fleet_nodes) + " nodes"
                        : std::string("max(N x 2,048 / 2,000, N + spares)"),
      "; lemons ", r.lemons ? "on" : "off", ", fail-slow ", r.fail_slow ? "on" : "off",
      ", cause mix ", r.hard_mix ? "hard" : "Llama 3");
}

std::vector<std::string> ModelAssumptions(const sim::FgufParams& p, bool hard_mix) {
  std::vector<std::string> out;
  out.push_back(absl::StrCat(
      "cause mix: ", hard_mix ? "the hard variant (8 % hangs, 2 % silent corruption)"
                              : "Llama 3's Table 5 (419 unexpected interruptions)",
      ", mapped to detectability and remedy (FGUF-1's mapping)"));
  out.push_back(absl::StrCat("planned interruptions: ", Num(p.planned_per_day),
                             " per day, checkpoint-aligned (Llama 3: 47 in 54 days)"));
  out.push_back(p.lemon_share > 0
                    ? absl::StrCat("lemons: ", Pct(p.lemon_share), " of nodes at ",
                                   Num(p.lemon_multiplier),
                                   "x the base rate, fleet average kept (Kokolis et al.: 40 "
                                   "lemons in ~2,000 nodes; the multiplier is assumed)")
                    : std::string("lemons: none (--no-lemons)"));
  out.push_back(absl::StrCat("correlated switch events: ", Pct(p.correlated_share),
                             " of faults evict a group of ", p.correlated_group,
                             " nodes (ByteRobust's weight)"));
  out.push_back(absl::StrCat("bad returns: ", Pct(p.bad_return_share),
                             " of repaired nodes come back faulty at ",
                             Num(p.bad_return_multiplier), "x the rate until caught (assumed)"));
  if (p.slow_node_share > 0 || p.fail_slow_per_day > 0) {
    out.push_back(absl::StrCat(
        "fail-slow: ", Pct(p.slow_node_share), " of nodes persistently ",
        Num(p.slow_node_factor), "x slower (MegaScale); ", Num(p.fail_slow_per_day),
        " transient slowdowns per day, mean ", Num(p.fail_slow_duration.mean_min), " min at ",
        Num(p.fail_slow_factor), "x (GREYHOUND's duration; the rate is assumed)"));
  } else {
    out.push_back("fail-slow: none (--no-fail-slow)");
  }
  out.push_back(absl::StrCat("repair pipeline: reboot ", Num(p.reboot.mean_min),
                             " min; parts repair lognormal, mean ", Num(p.repair.mean_min / 60),
                             " h (median 24 h, p90 5 days; assumed); a quarantined node: "
                             "diagnosis ", Num(p.quarantine_diagnosis.mean_min / 60),
                             " h, parts repair, deep check, then back in service (assumed)"));
  return out;
}

nlohmann::json ParamsJson(const SimulateRun& r) {
  const sim::FgufParams& p = r.spec.base;
  nlohmann::json causes = nlohmann::json::array();
  for (const auto& c : p.causes) {
    causes.push_back({{"cause", sim::ToString(c.cause)},
                      {"share", c.share},
                      {"detect", sim::ToString(c.detect)},
                      {"reboot_fixable", c.reboot_fixable},
                      {"node_fault", c.node_fault},
                      {"human_fix", c.human_fix}});
  }
  std::vector<std::string> ids;
  for (const auto& s : r.spec.strategies) ids.push_back(s.id);
  return {
      {"strategies", ids},
      {"job_nodes", r.spec.job_nodes},
      {"fleet_nodes", r.spec.fleet_nodes > 0 ? nlohmann::json(r.spec.fleet_nodes)
                                             : nlohmann::json("auto")},
      {"spares", r.spec.spares},
      {"rates_per_1000_node_days", r.spec.rates},
      {"days", p.horizon_days},
      {"replications", r.spec.seeds},
      {"first_seed", r.spec.first_seed},
      {"planned_per_day", p.planned_per_day},
      {"lemons", {{"share", p.lemon_share}, {"multiplier", p.lemon_multiplier}}},
      {"correlated", {{"share", p.correlated_share}, {"group", p.correlated_group}}},
      {"bad_returns", {{"share", p.bad_return_share}, {"multiplier", p.bad_return_multiplier}}},
      {"slow_nodes", {{"share", p.slow_node_share}, {"factor", p.slow_node_factor}}},
      {"fail_slow",
       {{"per_day", p.fail_slow_per_day},
        {"mean_min", p.fail_slow_duration.mean_min},
        {"factor", p.fail_slow_factor}}},
      {"repair",
       {{"reboot_mean_min", p.reboot.mean_min},
        {"repair_mean_min", p.repair.mean_min},
        {"quarantine_diagnosis_mean_min", p.quarantine_diagnosis.mean_min}}},
      {"cause_mix", r.hard_mix ? "hard" : "llama3"},
      {"causes", causes},
  };
}

std::string DetailTables(const std::vector<sim::Aggregate>& rows) {
  // Loss columns in sim::Loss order, short enough for a terminal.
  static constexpr const char* kLossHeads[sim::kLossCount] = {
      "ckpt", "rework", "detect", "locate", "wait", "restart", "slow", "sdc", "planned",
      "human", "idle"};
  std::string out = "\nLosses, % of wall time (mean over replications):\n";
  out += absl::StrFormat("%-28s %6s %6s %5s", "strategy", "N", "spares", "r_f");
  for (const char* h : kLossHeads) out += absl::StrFormat(" %7s", h);
  out += "\n";
  for (const auto& a : rows) {
    out += RowKey(a);
    for (const auto& loss : a.loss_pct) out += absl::StrFormat(" %7.2f", loss.mean);
    out += "\n";
  }
  out += "\nRecovery, per run (means over replications; MTTR in minutes):\n";
  out += absl::StrFormat("%-28s %6s %6s %5s %6s %6s %6s", "strategy", "N", "spares", "r_f",
                         "stops", "MTTR", "p95");
  for (int c = 0; c < sim::kStopClassCount; ++c) {
    out += absl::StrFormat(" %7s", sim::ToString(static_cast<sim::StopClass>(c)));
  }
  out += absl::StrFormat(" %9s %6s %9s %9s %7s %7s\n", "no-spare", "human", "hang-over",
                         "q-healthy", "lemons", "bad-ret");
  for (const auto& a : rows) {
    out += RowKey(a) + absl::StrFormat(" %6.1f %6.1f %6.1f", a.interruptions.mean,
                                       a.mttr_mean_min.mean, a.mttr_p95_min.mean);
    for (double m : a.mttr_by_class_min) out += absl::StrFormat(" %7.1f", m);
    out += absl::StrFormat(" %9.1f %6.1f %9.1f %9.1f %7.1f %7.1f\n", a.spare_exhaustions,
                           a.human_interventions, a.hang_overevicted, a.healthy_quarantined,
                           a.lemons_quarantined, a.bad_returns);
  }
  out += "(no-spare: a node was needed and no hot spare was left; hang-over: healthy nodes "
         "evicted with a hang's suspects (hang_overevicted); q-healthy: quarantines of nodes "
         "that are not lemons (healthy_quarantined); lemons: quarantines of real lemons; "
         "bad-ret: repaired nodes back still faulty)\n";
  return out;
}

std::string ChartsSvg(const SimulateRun& r, const std::vector<sim::Aggregate>& rows) {
  int nodes = *std::max_element(r.spec.job_nodes.begin(), r.spec.job_nodes.end());
  double rate = r.rates_given ? r.spec.rates.front() : 3.8;
  int spares = r.spares_given ? r.spec.spares.front() : 16;
  std::vector<double> rate_sweep = r.spec.rates.size() >= 2 ? r.spec.rates : kGridRates;
  std::vector<int> spare_sweep = r.spec.spares.size() >= 2 ? r.spec.spares : kGridSpares;
  if (r.spec.fleet_nodes > 0) {
    std::erase_if(spare_sweep, [&](int s) { return nodes + s > r.spec.fleet_nodes; });
  }
  auto by_spares = Sweep(r, rows, nodes, {rate}, spare_sweep);
  auto by_rate = Sweep(r, rows, nodes, rate_sweep, {spares});
  int fleet = sim::GridFleetNodes(r.spec, nodes, spare_sweep.empty() ? 0 : spare_sweep.back());
  std::string common = absl::StrCat(Thousands(r.spec.seeds),
                                    r.spec.seeds == 1 ? " replication of " : " replications of ",
                                    Num(r.spec.base.horizon_days),
                                    r.spec.base.horizon_days == 1 ? " day" : " days", " · lemons ",
                                    r.lemons ? "on" : "off", ", fail-slow ",
                                    r.fail_slow ? "on" : "off", " · ", r.engine,
                                    " engine · bars: 95 % interval");
  // Published full-job anchors (docs/simulator.md "Anchors"), for scale, not as targets met.
  std::vector<sim::ChartReference> anchors = {{0.97, "ByteRobust 97 % (9,600 GPUs)"},
                                              {0.90, "Llama 3 > 90 % (16,384 GPUs)"}};
  std::vector<sim::LineChart> charts = {
      sim::EttrAgainstSparesChart(
          Observations(by_spares, true),
          absl::StrCat("N = ", Thousands(nodes), " of F = ", Thousands(fleet), " nodes · ",
                       Num(rate), " failures per 1,000 node-days · ", common),
          anchors),
      sim::EttrAgainstFailureRateChart(
          Observations(by_rate, false),
          absl::StrCat("N = ", Thousands(nodes), " nodes · ", spares, " hot spares · ", common),
          anchors)};
  return sim::RenderSvg(charts);
}

}  // namespace hf::cli
