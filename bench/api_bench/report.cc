#include "report.h"

#include <cinttypes>
#include <cstdio>
#include <thread>

namespace api_bench {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Pct(double v) { return v < 0 ? "n/a" : Fmt("%.0f%%", v); }

}  // namespace

std::vector<Check> Checks(const std::vector<CellResult>& cells, double max_rss, double max_hwm) {
  std::vector<Check> out;
  const CellResult* describe = nullptr;
  const CellResult* list = nullptr;
  for (const auto& c : cells) {
    if (c.clients != kReferenceClients) continue;
    if (c.op == "DescribeCluster") describe = &c;
    if (c.op == "ListClusterNodes") list = &c;
  }
  auto cell_check = [&](const CellResult* c, std::string what, double value, double limit,
                        bool at_least, const char* unit) {
    if (!c) {
      out.push_back({what, "not run (needs 16 clients)", std::nullopt});
    } else {
      out.push_back({what, Fmt("%.2f", value) + " " + unit,
                     at_least ? value >= limit : value <= limit});
    }
  };
  cell_check(describe, "DescribeCluster throughput at 16 clients >= 5000 req/s",
             describe ? describe->throughput : 0, kTargetThroughput, true, "req/s");
  cell_check(list, "ListClusterNodes page throughput at 16 clients >= 5000 req/s",
             list ? list->throughput : 0, kTargetThroughput, true, "req/s");
  cell_check(describe, "DescribeCluster p99 at 16 clients <= 5 ms",
             describe ? describe->p99_ms : 0, kTargetDescribeP99Ms, false, "ms");
  cell_check(list, "ListClusterNodes page p99 at 16 clients <= 10 ms", list ? list->p99_ms : 0,
             kTargetListP99Ms, false, "ms");
  if (max_rss < 0) {
    out.push_back({"Server RSS <= 64 MiB", "unknown (no server pid)", std::nullopt});
  } else {
    out.push_back({"Server RSS <= 64 MiB (largest VmRSS after a cell)",
                   Fmt("%.1f MiB", max_rss), max_rss <= kTargetRssMiB});
    out.push_back({"Server peak RSS <= 64 MiB (VmHWM, cluster creation included)",
                   Fmt("%.1f MiB", max_hwm), max_hwm <= kTargetRssMiB});
  }
  return out;
}

void PrintTable(const Options& o, const ClusterInfo& cluster, const std::vector<CellResult>& cells,
                const std::vector<Check>& checks, const std::vector<MicroResult>& micro,
                const CpuShare& idle, const Memory& after_create) {
  std::printf("\nHyperfleet API benchmark: %d nodes, %d server I/O threads, "
              "%d generator thread(s), "
              "%u CPUs, %g s per cell after %g s warm-up\n",
              cluster.nodes, o.io_threads, o.client_threads, std::thread::hardware_concurrency(),
              o.seconds, o.warmup);
  if (cluster.create_seconds >= 0) {
    std::printf("CreateCluster -> InService: %.2f s  (server CPU %.2f s, RSS %.1f MiB, peak "
                "%.1f MiB)\n",
                cluster.create_seconds, cluster.create_server_cpu_s, after_create.rss_mib,
                after_create.hwm_mib);
  } else {
    std::printf("Cluster %s reused (InService before the run)\n", cluster.name.c_str());
  }
  if (idle.wall > 0) {
    std::printf("Idle server (no requests, %.1f s): server CPU %s, machine busy %s of %u00%%\n",
                idle.wall, Pct(idle.server).c_str(), Pct(idle.machine).c_str(),
                std::thread::hardware_concurrency());
  }
  std::printf("\n%-17s %7s %9s %9s %8s %8s %8s %8s %6s %8s %8s %6s %6s %6s %7s %7s\n", "op",
              "clients", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors",
              "RSS MiB", "HWM MiB", "srv", "gen", "other", "srv us", "gen us");
  for (const auto& c : cells) {
    const double srv_us =
        c.cpu.server_seconds >= 0 && c.requests ? 1e6 * c.cpu.server_seconds / c.requests : -1;
    const double gen_us = c.requests ? 1e6 * c.cpu.generator_seconds / c.requests : -1;
    std::printf("%-17s %7d %9" PRIu64 " %9.0f %8.3f %8.3f %8.3f %8.3f %6" PRIu64
                " %8.1f %8.1f %6s %6s %6s %7s %7s\n",
                c.op.c_str(), c.clients, c.requests, c.throughput, c.p50_ms, c.p90_ms, c.p99_ms,
                c.max_ms, c.errors, c.memory.rss_mib, c.memory.hwm_mib, Pct(c.cpu.server).c_str(),
                Pct(c.cpu.generator).c_str(), Pct(c.cpu.other).c_str(),
                srv_us < 0 ? "n/a" : Fmt("%.0f", srv_us).c_str(), Fmt("%.0f", gen_us).c_str());
  }
  std::printf(
      "  srv/gen/other: CPU during the measured window, %% of one core (srv = server process,\n"
      "  gen = this generator, other = rest of the machine); srv us / gen us: CPU microseconds\n"
      "  per request. ListClusterNodes rows count pages (MaxResults %d); walks completed:",
      kPageSize);
  for (const auto& c : cells) {
    if (c.op == "ListClusterNodes") std::printf(" %d:%" PRIu64, c.clients, c.walks);
  }
  std::printf("\n");
  for (const auto& c : cells) {
    if (!c.first_error.empty()) {
      std::printf("  first error (%s, %d clients): %s\n", c.op.c_str(), c.clients,
                  c.first_error.c_str());
    }
  }
  if (!micro.empty()) {
    std::printf("\nPer-call costs measured in this process (one core):\n");
    for (const auto& m : micro) std::printf("  %8.1f us  %s\n", m.us, m.what.c_str());
  }
  std::printf("\nTargets (2 cores, generator included; informational):\n");
  for (const auto& c : checks) {
    std::printf("  %-4s %-62s %s\n", !c.pass ? "----" : *c.pass ? "PASS" : "MISS",
                c.what.c_str(), c.value.c_str());
  }
}

Json ToJson(const Options& o, const ClusterInfo& cluster, const std::vector<CellResult>& cells,
            const std::vector<Check>& checks, const std::vector<MicroResult>& micro,
            const CpuShare& idle, const Memory& after_create) {
  Json j;
  j["nodes"] = cluster.nodes;
  j["io_threads"] = o.io_threads;
  j["client_threads"] = o.client_threads;
  j["cpus"] = std::thread::hardware_concurrency();
  j["seconds_per_cell"] = o.seconds;
  j["warmup_seconds"] = o.warmup;
  j["create_to_in_service_seconds"] =
      cluster.create_seconds >= 0 ? Json(cluster.create_seconds) : Json();
  j["create_server_cpu_seconds"] = cluster.create_server_cpu_s;
  j["after_create"] = {{"rss_mib", after_create.rss_mib}, {"hwm_mib", after_create.hwm_mib}};
  j["idle"] = {{"seconds", idle.wall}, {"server_cpu_pct", idle.server},
               {"machine_cpu_pct", idle.machine}};
  Json rows = Json::array();
  for (const auto& c : cells) {
    rows.push_back({{"op", c.op},
                    {"clients", c.clients},
                    {"requests", c.requests},
                    {"throughput_rps", c.throughput},
                    {"p50_ms", c.p50_ms},
                    {"p90_ms", c.p90_ms},
                    {"p99_ms", c.p99_ms},
                    {"max_ms", c.max_ms},
                    {"errors", c.errors},
                    {"walks", c.walks},
                    {"first_error", c.first_error},
                    {"server_rss_mib", c.memory.rss_mib},
                    {"server_hwm_mib", c.memory.hwm_mib},
                    {"server_cpu_pct", c.cpu.server},
                    {"generator_cpu_pct", c.cpu.generator},
                    {"other_cpu_pct", c.cpu.other},
                    {"machine_cpu_pct", c.cpu.machine},
                    {"server_cpu_seconds", c.cpu.server_seconds},
                    {"generator_cpu_seconds", c.cpu.generator_seconds}});
  }
  j["cells"] = rows;
  Json targets = Json::array();
  for (const auto& c : checks) {
    targets.push_back({{"target", c.what},
                       {"value", c.value},
                       {"result", !c.pass ? "n/a" : *c.pass ? "PASS" : "MISS"}});
  }
  j["targets"] = targets;
  Json m = Json::object();
  for (const auto& r : micro) m[r.what] = r.us;
  j["micro_us"] = m;
  return j;
}

}  // namespace api_bench
