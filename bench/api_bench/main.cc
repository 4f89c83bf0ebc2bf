// api_bench: closed-loop HTTP load generator for the Hyperfleet SageMaker API.
//
// It starts `hyperfleet server` itself (or targets --endpoint), creates one cluster of
// --nodes nodes through CreateCluster, waits for InService, then for each concurrency level
// in --clients and each operation (DescribeCluster; ListClusterNodes walking every page with
// MaxResults 100) runs a closed loop: C keep-alive connections, each sending a freshly signed
// request (the project's own SigV4 signer, new X-Amz-Date each time) and waiting for the
// reply before sending the next. Every reply must be 200. It prints throughput, latency
// percentiles, the server's RSS and the CPU used by the server, the generator and everything
// else on the machine during each measured window, then the project's targets next to the
// figures. See bench/README.md.
//
// The files: options.h (options, constants), proc.{h,cc} (/proc readings), client.{h,cc}
// (signed requests, a blocking client), closed_loop.{h,cc} (the measured cells),
// server_process.{h,cc} (the started server), cluster_setup.{h,cc} (the cluster),
// micro_profile.{h,cc} (--profile), report.{h,cc} (the table, --json, the targets).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "closed_loop.h"
#include "cluster_setup.h"
#include "micro_profile.h"
#include "options.h"
#include "proc.h"
#include "report.h"
#include "server_process.h"

namespace api_bench {
namespace {

/// Reads the command line into `o`; the exit code when the program must stop (--help, an
/// error), else nullopt.
std::optional<int> ParseOptions(int argc, char** argv, Options& o) {
  CLI::App app{"Closed-loop load generator for the Hyperfleet SageMaker API (SigV4-signed)"};
  app.add_option("--nodes", o.nodes, "Nodes in the benchmark cluster (groups of <= 5000)")
      ->capture_default_str()
      ->check(CLI::Range(1, 20000));
  app.add_option("--clients", o.clients, "Concurrency levels (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--seconds", o.seconds, "Measured seconds per cell")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--warmup", o.warmup, "Warm-up seconds before each cell's measurement")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--ops", o.ops, "Operations to run (DescribeCluster,ListClusterNodes)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"DescribeCluster", "ListClusterNodes"}));
  app.add_option("--endpoint", o.endpoint,
                 "HOST:PORT of a running server (default: start one from --server-binary)");
  app.add_option("--server-pid", o.server_pid,
                 "With --endpoint: the server's pid, to report its RSS and CPU");
  app.add_option("--server-binary", o.server_binary, "hyperfleet binary to start")
      ->capture_default_str();
  app.add_option("--io-threads", o.io_threads, "--io-threads passed to the server")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--client-threads", o.client_threads,
                 "Generator threads (the C connections are spread over them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--boot-delay-ms", o.boot_delay_ms, "--fake-boot-delay-ms for the server")
      ->capture_default_str();
  app.add_option("--create-timeout", o.create_timeout_s,
                 "Seconds to wait for the cluster to be InService")
      ->capture_default_str();
  app.add_option("--cluster-name", o.cluster_name, "Cluster to create (or reuse if it exists)")
      ->capture_default_str();
  app.add_option("--region", o.region, "SigV4 region")->capture_default_str();
  app.add_option("--access-key-id", o.access_key_id, "Access key id to sign with")
      ->capture_default_str();
  app.add_option("--secret-access-key", o.secret_access_key, "Secret to sign with");
  app.add_option("--server-log-level", o.server_log_level, "--log-level for the started server")
      ->capture_default_str();
  app.add_flag("--json", o.json, "Print one JSON document on stdout instead of the table");
  app.add_flag("--profile", o.profile,
               "Also time SigV4 and JSON pieces in-process (where a request's CPU goes)");
  app.add_flag("--keep-data-dir", o.keep_data_dir,
               "Keep the started server's data directory (its data/ can seed --data-dir-from)");
  app.add_option("--data-dir-from", o.data_dir_from,
                 "Start the server on a copy of this data dir (reuses the cluster in it)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--create-only", o.create_only,
               "Stop once the cluster is InService (measures creation only)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

/// The target at `host_port` (HOST:PORT), signed with o's key; nullopt (logged) otherwise.
std::optional<Target> TargetOf(const Options& o, const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    Log("api_bench: --endpoint must be HOST:PORT, got '%s'", host_port.c_str());
    return std::nullopt;
  }
  Target target;
  target.host = host_port.substr(0, colon);
  target.port = host_port.substr(colon + 1);
  target.host_header = host_port;
  target.key = {o.access_key_id, o.secret_access_key};
  target.region = o.region;
  return target;
}

/// --create-only's output.
void PrintCreation(const Options& o, const ClusterInfo& cluster, const Memory& after_create) {
  if (o.json) {
    std::printf("%s\n", Json{{"nodes", cluster.nodes},
                             {"create_to_in_service_seconds", cluster.create_seconds},
                             {"create_server_cpu_seconds", cluster.create_server_cpu_s},
                             {"server_rss_mib", after_create.rss_mib},
                             {"server_hwm_mib", after_create.hwm_mib}}
                             .dump(2)
                             .c_str());
  } else {
    std::printf("CreateCluster -> InService: %.2f s for %d nodes (server CPU %.2f s, RSS "
                "%.1f MiB, peak %.1f MiB)\n",
                cluster.create_seconds, cluster.nodes, cluster.create_server_cpu_s,
                after_create.rss_mib, after_create.hwm_mib);
  }
}

/// Every cell: each concurrency level of o.clients, each operation of o.ops.
std::vector<CellResult> RunCells(const Options& o, const Target& target,
                                 const ClusterInfo& cluster, int server_pid) {
  std::vector<CellResult> cells;
  for (int clients : o.clients) {
    for (const auto& op_name : o.ops) {
      const Op op = op_name == "DescribeCluster" ? Op::kDescribeCluster : Op::kListClusterNodes;
      Log("api_bench: %s with %d client(s) ...", op_name.c_str(), clients);
      cells.push_back(RunCell(o, target, op, clients, cluster.name, cluster.nodes, server_pid));
      const auto& c = cells.back();
      Log("api_bench:   %.0f req/s, p50 %.3f ms, p99 %.3f ms, %" PRIu64 " errors", c.throughput,
          c.p50_ms, c.p99_ms, c.errors);
    }
  }
  return cells;
}

/// The table or the JSON document, with the targets.
void Report(const Options& o, const ClusterInfo& cluster, const std::vector<CellResult>& cells,
            const std::vector<MicroResult>& micro, const CpuShare& idle,
            const Memory& after_create) {
  double max_rss = -1, max_hwm = -1;
  for (const auto& c : cells) {
    max_rss = std::max(max_rss, c.memory.rss_mib);
    max_hwm = std::max(max_hwm, c.memory.hwm_mib);
  }
  const auto checks = Checks(cells, max_rss, max_hwm);
  if (o.json) {
    const Json doc = ToJson(o, cluster, cells, checks, micro, idle, after_create);
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    PrintTable(o, cluster, cells, checks, micro, idle, after_create);
  }
  std::fflush(stdout);
}

// The started server, for the SIGINT/SIGTERM handler.
volatile pid_t g_server_pid = -1;

void OnStopSignal(int) {
  if (g_server_pid > 0) kill(g_server_pid, SIGKILL);
  _exit(130);
}

int Main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, OnStopSignal);
  signal(SIGTERM, OnStopSignal);
  Options o;
  o.server_binary = DefaultServerBinary();
  if (auto exit_code = ParseOptions(argc, argv, o)) return *exit_code;

  ServerProcess server;
  std::string host_port = o.endpoint;
  int server_pid = o.server_pid;
  if (o.endpoint.empty()) {
    Log("api_bench: starting %s (io threads %d)", o.server_binary.c_str(), o.io_threads);
    if (!server.start(o, &host_port)) return 2;
    server_pid = server.pid();
    g_server_pid = server_pid;
    Log("api_bench: server pid %d on %s, data dir %s", server_pid, host_port.c_str(),
        server.data_dir().c_str());
  }
  const std::optional<Target> target = TargetOf(o, host_port);
  if (!target) return 2;

  const double cpu_before_create = ProcessCpuSeconds(server_pid);
  ClusterInfo cluster = SetUpCluster(o, *target);
  if (!cluster.ok) return 2;
  const Memory after_create = ReadMemory(server_pid);
  if (cpu_before_create >= 0) {
    cluster.create_server_cpu_s = ProcessCpuSeconds(server_pid) - cpu_before_create;
  }
  if (cluster.create_seconds >= 0) {
    Log("api_bench: InService after %.2f s; %d nodes", cluster.create_seconds, cluster.nodes);
  }
  if (o.create_only) {
    PrintCreation(o, cluster, after_create);
    return 0;
  }

  // The server's own background cost with no requests (controller resyncs).
  const auto idle_start = SnapCpu(server_pid);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const CpuShare idle = Share(idle_start, SnapCpu(server_pid));

  const std::vector<CellResult> cells = RunCells(o, *target, cluster, server_pid);
  std::vector<MicroResult> micro;
  if (o.profile) micro = MicroProfile(*target, cluster);
  Report(o, cluster, cells, micro, idle, after_create);
  g_server_pid = -1;
  server.stop();

  uint64_t errors = 0;
  for (const auto& c : cells) errors += c.errors;
  return errors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace api_bench

int main(int argc, char** argv) { return api_bench::Main(argc, argv); }
