// governance_trace_dump: writes a seeded governance trace (governance/trace.h, tiers S/M/L)
// as JSONL so that another scheduler can replay the identical workload
// (bench/slurm_side_by_side.py replays it on real slurmctld; bench/README.md). Optionally runs the same
// trace through our engine in virtual time (the governance_bench driver) and writes the
// figures the side-by-side compares: decisions per engine CPU-second, cycle latency,
// makespan and the submit-to-first-admission wait distribution.
//
// Output lines (one JSON object each; times in ms of trace time, runtime in ms):
//   {"kind":"cluster","tier","seed","types":[{name,vcpus,memory_gib,accelerators,instances}],
//    "priority_classes":[{name,weight}],"fair_share","idle_resource_sharing"}
//   {"kind":"quota", team, resources:[{instance_type,count|accelerators}], strategy,
//    borrow_limit_percent, fair_share_weight, active, preempt_team_tasks}     (initial quotas)
//   {"kind":"submit","t_ms","id","team","class","type","count","runtime_ms"
//    [,"per_pod":{"accelerators","vcpu_milli","memory_mib"}]}
//   {"kind":"cancel","t_ms","id"}
//   {"kind":"upsert_quota","t_ms",...quota fields} / {"kind":"remove_quota","t_ms","team"}
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>

#include "CLI/CLI.hpp"
#include "hyperfleet/governance/trace.h"
#include "nlohmann/json.hpp"

using namespace hf::governance;
using nlohmann::json;

namespace {

const char* StrategyName(SharingStrategy s) {
  switch (s) {
    case SharingStrategy::kLendAndBorrow: return "LendAndBorrow";
    case SharingStrategy::kLend: return "Lend";
    case SharingStrategy::kDontLend: return "DontLend";
  }
  return "?";
}

json QuotaResourceJson(const QuotaResource& r) {
  json j{{"instance_type", r.instance_type}};
  if (r.count) j["count"] = *r.count;
  if (r.accelerators) j["accelerators"] = *r.accelerators;
  if (r.vcpu) j["vcpu"] = *r.vcpu;
  if (r.memory_gib) j["memory_gib"] = *r.memory_gib;
  return j;
}

json QuotaJson(const TeamQuota& q) {
  json res = json::array(), abs = json::array();
  for (const auto& r : q.resources) res.push_back(QuotaResourceJson(r));
  for (const auto& r : q.absolute_borrow_limits) abs.push_back(QuotaResourceJson(r));
  return json{{"team", q.team},
              {"resources", res},
              {"absolute_borrow_limits", abs},
              {"strategy", StrategyName(q.strategy)},
              {"borrow_limit_percent", q.borrow_limit_percent},
              {"fair_share_weight", q.fair_share_weight},
              {"active", q.active},
              {"preempt_team_tasks",
               q.preempt_team_tasks == PreemptTeamTasks::kNever ? "Never" : "LowerPriority"}};
}

// Engine figures for one mode: runs Simulate with the decision log kept and derives each
// workload's first admission from it ("<tick> a <id> ..." lines).
json EngineFigures(const Trace& tr, bool check) {
  SimOptions opt;
  opt.check = check;
  opt.full_check_every = 100;
  opt.keep_log = true;
  const SimReport rep = Simulate(tr, opt);
  std::unordered_map<uint64_t, const TraceEvent*> submits;
  for (const auto& e : tr.events)
    if (e.kind == TraceEvent::kSubmit) submits[e.spec.id] = &e;
  std::unordered_map<uint64_t, int64_t> first_admit;
  std::istringstream in(rep.log);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int64_t tick = 0;
    std::string op;
    uint64_t id = 0;
    if (!(ls >> tick >> op >> id) || op != "a") continue;
    first_admit.emplace(id, tick);
  }
  std::vector<double> wait_all;
  std::unordered_map<std::string, std::vector<double>> wait_class;
  for (const auto& [id, tick] : first_admit) {
    const TraceEvent* e = submits.at(id);
    const double w = (tick - e->time_ms) * 1e-3;
    wait_all.push_back(w);
    wait_class[e->spec.priority_class].push_back(w);
  }
  auto quantiles = [](const std::vector<double>& v) {
    return json{{"n", v.size()},
                {"p50", Quantile(v, 0.5)},
                {"p90", Quantile(v, 0.9)},
                {"p99", Quantile(v, 0.99)},
                {"max", Quantile(v, 1.0)}};
  };
  json per_class = json::object();
  for (const auto& [c, v] : wait_class) per_class[c] = quantiles(v);
  return json{{"fair_share", tr.policy.fair_share},
              {"cycles", rep.cycles},
              {"admissions", rep.admissions},
              {"started_jobs", first_admit.size()},
              {"preemptions", rep.preemptions},
              {"never_fits", rep.never_fits},
              {"decisions", rep.decisions},
              {"engine_cpu_s", rep.engine_cpu_s},
              {"decisions_per_cpu_s", rep.engine_cpu_s > 0 ? rep.decisions / rep.engine_cpu_s : 0},
              {"admissions_per_cpu_s",
               rep.engine_cpu_s > 0 ? rep.admissions / rep.engine_cpu_s : 0},
              {"cycle_us", {{"p50", Quantile(rep.cycle_us, 0.5)},
                            {"p99", Quantile(rep.cycle_us, 0.99)},
                            {"max", Quantile(rep.cycle_us, 1.0)}}},
              {"makespan_s", rep.end_time_ms * 1e-3},
              {"wait_s", quantiles(wait_all)},
              {"wait_s_by_class", per_class},
              {"violations", rep.violations}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dump a governance trace as JSONL (and the engine's figures on it)"};
  std::string tier = "S", out = "-", engine_out, modes = "fcfs,fair";
  uint64_t seed = 1;
  int64_t workloads = -1, nodes = -1;
  int teams = -1;
  bool check = true;
  app.add_option("--tier", tier, "S, M or L")->check(CLI::IsMember({"S", "M", "L"}));
  app.add_option("--seed", seed, "trace seed");
  app.add_option("--workloads", workloads, "override the tier's workload count");
  app.add_option("--nodes", nodes, "override the tier's node count");
  app.add_option("--teams", teams, "override the tier's team count");
  app.add_option("--out", out, "JSONL trace file ('-' = stdout)");
  app.add_option("--engine-out", engine_out,
                 "also simulate the engine and write its figures (JSON) here");
  app.add_option("--modes", modes, "engine modes for --engine-out: fcfs, fair or both");
  app.add_option("--check", check, "invariant checker during the engine run");
  CLI11_PARSE(app, argc, argv);

  TraceConfig cfg = tier == "S" ? TierS() : tier == "M" ? TierM() : TierL();
  cfg.seed = seed;
  if (workloads >= 0) cfg.workloads = workloads;
  if (nodes > 0) cfg.nodes = nodes;
  if (teams > 0) cfg.teams = teams;
  const Trace tr = GenerateTrace(cfg);

  std::ofstream file;
  if (out != "-") {
    file.open(out);
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", out.c_str());
      return 1;
    }
  }
  std::ostream& os = out == "-" ? std::cout : file;
  json types = json::array(), classes = json::array();
  for (const auto& t : tr.types)
    types.push_back({{"name", t.name},
                     {"vcpus", t.vcpus},
                     {"memory_gib", t.memory_gib},
                     {"accelerators", t.accelerators},
                     {"instances", t.instances}});
  for (const auto& c : tr.policy.priority_classes)
    classes.push_back({{"name", c.name}, {"weight", c.weight}});
  os << json{{"kind", "cluster"},
             {"tier", tier},
             {"seed", seed},
             {"types", types},
             {"priority_classes", classes},
             {"fair_share", tr.policy.fair_share},
             {"idle_resource_sharing", tr.policy.idle_resource_sharing}}
            .dump()
     << '\n';
  for (const auto& q : tr.quotas) {
    json j = QuotaJson(q);
    j["kind"] = "quota";
    os << j.dump() << '\n';
  }
  for (const auto& e : tr.events) {
    json j;
    switch (e.kind) {
      case TraceEvent::kSubmit:
        j = {{"kind", "submit"},         {"t_ms", e.time_ms},
             {"id", e.spec.id},          {"team", e.spec.team},
             {"class", e.spec.priority_class}, {"type", e.spec.instance_type},
             {"count", e.spec.count},    {"runtime_ms", e.runtime_ms}};
        if (e.spec.per_pod)
          j["per_pod"] = {{"accelerators", (*e.spec.per_pod)[kAccelerators]},
                          {"vcpu_milli", (*e.spec.per_pod)[kVCpuMilli]},
                          {"memory_mib", (*e.spec.per_pod)[kMemoryMiB]}};
        break;
      case TraceEvent::kCancel:
        j = {{"kind", "cancel"}, {"t_ms", e.time_ms}, {"id", e.id}};
        break;
      case TraceEvent::kUpsertQuota:
        j = QuotaJson(e.quota);
        j["kind"] = "upsert_quota";
        j["t_ms"] = e.time_ms;
        break;
      case TraceEvent::kRemoveQuota:
        j = {{"kind", "remove_quota"}, {"t_ms", e.time_ms}, {"team", e.quota.team}};
        break;
    }
    os << j.dump() << '\n';
  }
  os.flush();

  if (!engine_out.empty()) {
    json figures = json::object();
    for (const std::string mode : {"fcfs", "fair"}) {
      if (modes.find(mode) == std::string::npos) continue;
      TraceConfig c = cfg;
      c.fair_share = mode == "fair";
      figures[mode] = EngineFigures(GenerateTrace(c), check);
    }
    std::ofstream eo(engine_out);
    eo << figures.dump(2) << '\n';
    if (!eo) {
      std::fprintf(stderr, "cannot write %s\n", engine_out.c_str());
      return 1;
    }
  }
  return 0;
}
