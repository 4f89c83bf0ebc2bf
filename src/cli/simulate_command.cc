#include "hyperfleet/cli/simulate_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/sim/fguf.h"
#include "hyperfleet/sim/grid.h"
#include "hyperfleet/sim/parametric_engine.h"
#include "hyperfleet/sim/product/product_engine.h"
#include "hyperfleet/sim/report.h"
#include "hyperfleet/sim/strategy.h"
#include "simulate_report.h"

namespace hf::cli {
namespace {

/// The flags as typed: lists stay text so that a bad element is reported with its flag.
struct RawFlags {
  std::string engine = "parametric";
  std::vector<std::string> strategies{"all"};
  int nodes = 2000;
  int fleet = 0;
  std::vector<std::string> spares{"16"};
  std::vector<std::string> rates{"3.8"};
  double days = 54;
  int replications = 20;
  uint64_t seed = 1;
  bool no_lemons = false, no_fail_slow = false, hard_mix = false;
  bool grid = false, json = false;
  std::string svg;
  // The numbers as typed, read in decimal by Validate (CLI11 read 010 as 8 and 0x10 as 16, and
  // a --seed of -1 as 2^64 - 1).
  std::string nodes_text = "2000", fleet_text = "0", days_text = "54", replications_text = "20",
              seed_text = "1";
};

void AddFlags(CLI::App& app, RawFlags& f) {
  app.add_option("--engine", f.engine,
                 "parametric (closed form between events, every strategy) or product "
                 "(Hyperfleet's real controller under a simulated clock)")
      ->capture_default_str();
  app.add_option("--strategy", f.strategies,
                 "Strategy ids, comma-separated, or all: A0 manual ops, A0t manual tuned, A1 "
                 "Llama-3-like, B1 HyperPod classic, B1b HyperPod per AWS's cost blog, B2 "
                 "HyperPod checkpointless, C the target, HF0 Hyperfleet today (measured, nothing "
                 "assumed it does not do), HF Hyperfleet planned (measured + C's targets)")
      ->delimiter(',');
  app.add_option("--nodes", f.nodes_text, "Nodes the training job needs (N)")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--fleet", f.fleet_text,
                 "Fleet nodes (F); default: max(N * 2048 / 2000, N + spares), FGUF-1's 2.4 % "
                 "buffer")
      ->type_name("INT");
  app.add_option("--spares", f.spares, "Hot spares reserved for the job, one or a list")
      ->delimiter(',');
  app.add_option("--rate", f.rates,
                 "Unexpected failures per 1,000 node-days (fleet average), one or a list")
      ->delimiter(',');
  app.add_option("--days", f.days_text, "Wall-clock days simulated")
      ->type_name("FLOAT")
      ->capture_default_str();
  app.add_option("--replications", f.replications_text, "Seeds per configuration (95 % intervals)")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--seed", f.seed_text, "First seed; replication k uses seed + k")
      ->type_name("UINT")
      ->capture_default_str();
  app.add_flag("--no-lemons", f.no_lemons, "No lemon nodes (default: 2 % of nodes at 10x)");
  app.add_flag("--no-fail-slow", f.no_fail_slow,
               "No slow nodes and no transient fail-slow periods");
  app.add_flag("--hard-mix", f.hard_mix,
               "The hard cause mix: 8 % hangs and 2 % silent corruption (out of loud faults)");
  app.add_flag("--grid", f.grid,
               "Sweep every dimension not given: N 128,512,2000; rates 1.2,2.34,3.8,6.5,9.4; "
               "spares 0,4,8,16,32,48");
  app.add_flag("--json", f.json, "Print the results as JSON on stdout instead of the table");
  app.add_option("--svg", f.svg,
                 "Write the charts (ETTR against spares at the first rate, against failure "
                 "rate at the first spare count) to FILE");
}

/// `text` as a decimal number of type T, whole text or an error naming `flag`.
template <typename T>
StatusOr<T> ParseNumber(std::string_view flag, std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool whole = end == text.data() + text.size() && !text.empty();
  if (ec == std::errc::result_out_of_range && whole) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(flag), ": '", AbslView(text), "' is out of range"));
  }
  if (ec != std::errc() || !whole) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(flag), ": '", AbslView(text), "' is not a number"));
  }
  return value;
}

Status OutOfRange(std::string_view flag, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(flag), " must be ", AbslView(what)));
}

StatusOr<std::vector<sim::Strategy>> PickStrategies(const std::vector<std::string>& ids) {
  std::vector<sim::Strategy> all = sim::AllStrategies();
  std::vector<std::string> known;
  for (const auto& s : all) known.push_back(s.id);
  std::vector<sim::Strategy> out;
  std::set<std::string> seen;
  for (const auto& id : ids) {
    if (absl::AsciiStrToLower(id) == "all") {
      for (const auto& s : all) {
        if (seen.insert(s.id).second) out.push_back(s);
      }
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const sim::Strategy& s) {
      return absl::AsciiStrToLower(s.id) == absl::AsciiStrToLower(id);
    });
    if (it == all.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--strategy: unknown strategy '", id,
                                                     "' (one of ", absl::StrJoin(known, ", "),
                                                     ", or all)"));
    }
    if (seen.insert(it->id).second) out.push_back(*it);
  }
  if (out.empty()) return absl::InvalidArgumentError("--strategy: name at least one strategy");
  return out;
}

/// The FGUF-1 parameters the flags leave: defaults with lemons, fail-slow and the cause mix
/// switched as asked.
sim::FgufParams BaseParams(const RawFlags& f) {
  sim::FgufParams p;
  p.horizon_days = f.days;
  if (f.no_lemons) p.lemon_share = 0;
  if (f.no_fail_slow) p.slow_node_share = 0, p.fail_slow_per_day = 0;
  if (f.hard_mix) p.causes = sim::HardCauseMix();
  return p;
}

/// The product engine as an EngineFn that says on stderr how far it is (a replication takes
/// seconds): "hyperfleet simulate: product engine: replication 3 of 20 (...) in 4.1 s".
sim::EngineFn ProductWithProgress(int total) {
  auto done = std::make_shared<int>(0);
  return [done, total](const sim::FgufParams& p, const sim::Strategy& s, int spares,
                       uint64_t seed) {
    auto start = std::chrono::steady_clock::now();
    sim::RunResult result = sim::product::RunProduct(p, s, spares, seed);
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr,
                 "hyperfleet simulate: product engine: replication %d of %d (N %d, %d spares, "
                 "r_f %g, seed %llu) in %.1f s\n",
                 ++*done, total, p.job_nodes, spares, p.rate_per_1000_node_days,
                 static_cast<unsigned long long>(seed), took.count());
    return result;
  };
}

/// The parametric engine as an EngineFn that says on stderr how far a long run is: nothing for
/// the first 5 s (most runs end before), then a line at most every 30 s, so that a large grid
/// (hours at --replications 10000) does not hold the terminal silently.
sim::EngineFn ParametricWithProgress(int total) {
  using Clock = std::chrono::steady_clock;
  struct State {
    int done = 0;
    Clock::time_point start = Clock::now(), next = start + std::chrono::seconds(5);
  };
  auto st = std::make_shared<State>();
  return [st, total](const sim::FgufParams& p, const sim::Strategy& s, int spares,
                     uint64_t seed) {
    sim::RunResult result = sim::RunParametric(p, s, spares, seed);
    ++st->done;
    const Clock::time_point now = Clock::now();
    if (now >= st->next && st->done < total) {
      const double took = std::chrono::duration<double>(now - st->start).count();
      std::fprintf(stderr,
                   "hyperfleet simulate: replication %d of %d after %.0f s, about %.0f s left\n",
                   st->done, total, took, took / st->done * (total - st->done));
      st->next = now + std::chrono::seconds(30);
    }
    return result;
  };
}

/// Refuses an --svg target that the write would clobber or that cannot be written, before the
/// run (which can take minutes): empty, an existing non-regular file (the atomic write renames
/// over it, so `--svg /dev/null` as root would replace the device), a parent that is missing.
Status CheckSvgPath(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return absl::InvalidArgumentError("--svg: needs a file name");
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--svg: ", path, " exists and is not a regular file"));
  }
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--svg: ", parent.string(), " is not a directory"));
  }
  return absl::OkStatus();
}

/// Checks the flags and turns them into a grid. `app` tells which flags were given.
StatusOr<SimulateRun> Validate(const RawFlags& raw, const CLI::App& app) {
  RawFlags f = raw;
  HF_ASSIGN_OR_RETURN(f.nodes, ParseNumber<int>("--nodes", f.nodes_text));
  HF_ASSIGN_OR_RETURN(f.fleet, ParseNumber<int>("--fleet", f.fleet_text));
  HF_ASSIGN_OR_RETURN(f.days, ParseNumber<double>("--days", f.days_text));
  HF_ASSIGN_OR_RETURN(f.replications, ParseNumber<int>("--replications", f.replications_text));
  HF_ASSIGN_OR_RETURN(f.seed, ParseNumber<uint64_t>("--seed", f.seed_text));
  SimulateRun r;
  if (f.engine != "parametric" && f.engine != "product") {
    return absl::InvalidArgumentError(
        absl::StrCat("--engine: '", f.engine, "' is not an engine (parametric or product)"));
  }
  r.engine = f.engine;
  HF_ASSIGN_OR_RETURN(r.spec.strategies, PickStrategies(f.strategies));
  if (r.engine == "product") {
    // The product engine runs Hyperfleet's own code: its strategies only (today's and the
    // planned one, which differ in what the application layer above the controller does).
    if (app.count("--strategy") == 0) r.spec.strategies = {sim::HyperfleetStrategy()};
    for (const auto& s : r.spec.strategies) {
      if (s.id != "HF" && s.id != "HF0") {
        return absl::InvalidArgumentError(absl::StrCat(
            "--strategy ", s.id, ": the product engine runs Hyperfleet's strategies (HF0, HF) "
            "only; use --engine parametric for the others"));
      }
    }
  }
  if (f.nodes < 1 || f.nodes > 100000) return OutOfRange("--nodes", "between 1 and 100000");
  if (f.fleet < 0 || f.fleet > 200000) return OutOfRange("--fleet", "between 0 (auto) and 200000");
  // Below ~1e-17 days the engines' clock rounds the horizon to nothing and report ETTR 0.
  if (!(f.days >= 0.001 && f.days <= 3650)) {
    return OutOfRange("--days", "between 0.001 and 3650");
  }
  if (f.replications < 1 || f.replications > 10000) {
    return OutOfRange("--replications", "between 1 and 10000");
  }
  r.spares_given = app.count("--spares") > 0;
  r.rates_given = app.count("--rate") > 0;
  bool nodes_given = app.count("--nodes") > 0;
  r.spec.spares.clear();
  for (const auto& s : f.spares) {
    HF_ASSIGN_OR_RETURN(int v, ParseNumber<int>("--spares", s));
    if (v < 0 || v > 100000) return OutOfRange("--spares", "between 0 and 100000");
    // A value given twice is one configuration (as a strategy named twice), not a repeated row.
    if (std::find(r.spec.spares.begin(), r.spec.spares.end(), v) == r.spec.spares.end()) {
      r.spec.spares.push_back(v);
    }
  }
  r.spec.rates.clear();
  for (const auto& s : f.rates) {
    HF_ASSIGN_OR_RETURN(double v, ParseNumber<double>("--rate", s));
    if (!(v > 0 && v <= 1000)) return OutOfRange("--rate", "above 0 and at most 1000");
    if (std::find(r.spec.rates.begin(), r.spec.rates.end(), v) == r.spec.rates.end()) {
      r.spec.rates.push_back(v);
    }
  }
  r.spec.job_nodes = {f.nodes};
  if (f.grid) {
    if (!nodes_given) r.spec.job_nodes = kGridNodes;
    if (!r.rates_given) r.spec.rates = kGridRates;
    if (!r.spares_given) r.spec.spares = kGridSpares;
  }
  r.spec.fleet_nodes = f.fleet;
  if (f.fleet > 0) {
    int most = *std::max_element(r.spec.spares.begin(), r.spec.spares.end());
    for (int n : r.spec.job_nodes) {
      if (n + most > f.fleet) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--fleet ", f.fleet, " is smaller than the job (", n, " nodes) and its ", most,
            " spares"));
      }
    }
  }
  r.spec.base = BaseParams(f);
  r.spec.seeds = f.replications;
  r.spec.first_seed = f.seed;
  r.lemons = !f.no_lemons;
  r.fail_slow = !f.no_fail_slow;
  r.hard_mix = f.hard_mix;
  r.json = f.json;
  r.svg = f.svg;
  if (app.count("--svg") > 0) HF_RETURN_IF_ERROR(CheckSvgPath(r.svg));
  if (r.engine == "product") {
    // Past the scale the controller is benchmarked at (controller_scale_bench, 10,000 nodes) a
    // replication runs for hours with nothing on stderr and memory growing.
    int most_spares = *std::max_element(r.spec.spares.begin(), r.spec.spares.end());
    int most_nodes = *std::max_element(r.spec.job_nodes.begin(), r.spec.job_nodes.end());
    if (most_nodes + most_spares > 10000) {
      return OutOfRange("--nodes", "at most 10000 with its spares for --engine product");
    }
  }
  // Every strategy counts: "replication 3 of 2" was printed for --strategy HF0,HF.
  const int64_t runs = static_cast<int64_t>(r.spec.strategies.size()) *
                       static_cast<int64_t>(r.spec.job_nodes.size() * r.spec.rates.size() *
                                            r.spec.spares.size()) * r.spec.seeds;
  if (runs > 100000000) return OutOfRange("the grid", "at most 100,000,000 replications in all");
  r.run_one = r.engine == "product" ? ProductWithProgress(static_cast<int>(runs))
                                    : ParametricWithProgress(static_cast<int>(runs));
  return r;
}

[[noreturn]] void BadInput(std::string_view message) {
  std::fprintf(stderr, "hyperfleet simulate: %s\n", std::string(message).c_str());
  std::exit(2);
}

void Run(const SimulateRun& r) {
  std::vector<sim::Aggregate> rows = sim::RunGrid(r.spec, r.run_one);
  std::vector<std::string> assumptions = ModelAssumptions(r.spec.base, r.hard_mix);
  if (!r.svg.empty()) {
    Status written = WriteFileAtomically(r.svg, ChartsSvg(r, rows), 0644);
    if (!written.ok()) BadInput(absl::StrCat("--svg: ", written.message()));  // names the path
  }
  if (r.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const auto& a : rows) results.push_back(sim::ToJson(a));
    nlohmann::json out = {{"engine", r.engine},
                          {"parameters", ParamsJson(r)},
                          {"results", results},
                          {"assumptions", assumptions}};
    if (!r.svg.empty()) out["svg"] = r.svg;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::string text = RunHeadline(r) + "\n\n" + sim::FormatTable(rows) + DetailTables(rows);
  text += "\nModel (FGUF-1; sources in docs/simulator.md):\n";
  for (const auto& line : assumptions) text += "  - " + line + "\n";
  if (!r.svg.empty()) text += "\nCharts written to " + r.svg + "\n";
  std::fputs(text.c_str(), stdout);
}

}  // namespace

void AddSimulateCommand(CLI::App& app) {
  // The flags are parsed by a second parser in the callback, so that every bad flag (unknown,
  // missing value, not a number) exits 2 with the flag named, as the rest of the checks do.
  auto* cmd = app.add_subcommand(
      "simulate",
      "Fleet simulator: ETTR, goodput and losses of recovery strategies under FGUF-1 failures "
      "(hyperfleet simulate --help)");
  cmd->prefix_command();
  cmd->set_help_flag();
  cmd->callback([cmd] {
    CLI::App parser{"Fleet simulator (FGUF-1): what a recovery strategy, a spare pool and a "
                    "failure rate do to a training job's ETTR. docs/simulator.md",
                    "hyperfleet simulate"};
    RawFlags flags;
    AddFlags(parser, flags);
    std::vector<std::string> args = cmd->remaining();
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
    try {
      parser.parse(args);
    } catch (const CLI::CallForHelp&) {
      std::fputs(parser.help().c_str(), stdout);
      std::exit(0);
    } catch (const CLI::ParseError& e) {
      BadInput(e.what());
    }
    StatusOr<SimulateRun> request = Validate(flags, parser);
    if (!request.ok()) BadInput(StdView(request.status().message()));
    // The product engine runs the real controller, which logs (to stdout by default): its
    // warnings about simulated clusters broke --json. Errors only, on stderr.
    auto log = spdlog::stderr_logger_mt("hyperfleet-simulate");
    log->set_pattern("hyperfleet simulate: controller: %l: %v");
    spdlog::set_default_logger(log);
    spdlog::set_level(spdlog::level::err);
    try {
      Run(*request);
    } catch (const std::invalid_argument& e) {
      BadInput(e.what());
    }
    // A full disk or closed pipe must not pass for results written (exit 1, as a failed run).
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "hyperfleet simulate: cannot write the results to stdout: %s\n",
                   std::strerror(errno));
      std::exit(1);
    }
  });
}

}  // namespace hf::cli
