#pragma once
// api_bench's options, constants and progress log (see main.cc and bench/README.md).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace api_bench {

using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;

// The fixed key the spawned server is told to accept.
inline constexpr char kBenchKeyId[] = "AKIAHFBENCH000000001";
inline constexpr char kBenchSecret[] = "hyperfleetBenchSecretKey0000000000000000";
inline constexpr char kContentType[] = "application/x-amz-json-1.1";
inline constexpr int kMaxGroupSize = 5000;  // service model: InstanceCount <= 6758 per group
inline constexpr int kPageSize = 100;

// Targets (2 cores, generator included). Informational only.
inline constexpr double kTargetThroughput = 5000;   // req/s at 16 clients
inline constexpr double kTargetDescribeP99Ms = 5;   // DescribeCluster p99 at 16 clients
inline constexpr double kTargetListP99Ms = 10;      // ListClusterNodes page p99 at 16 clients
inline constexpr double kTargetRssMiB = 64;
inline constexpr int kReferenceClients = 16;

/// The command line (main.cc ParseOptions).
struct Options {
  int nodes = 10000;
  std::vector<int> clients = {1, 16, 64};
  double seconds = 5;
  double warmup = 1;
  std::string endpoint;  // host:port; empty: spawn a server
  std::string server_binary;
  int io_threads = 2;
  int client_threads = 1;
  int boot_delay_ms = 0;
  int create_timeout_s = 900;
  int server_pid = 0;  // with --endpoint: where to read RSS / CPU from
  std::string cluster_name = "api-bench";
  std::string region = "us-west-2";
  std::string access_key_id = kBenchKeyId;
  std::string secret_access_key = kBenchSecret;
  std::string server_log_level = "warn";
  std::vector<std::string> ops = {"DescribeCluster", "ListClusterNodes"};
  bool json = false;
  bool profile = false;
  bool keep_data_dir = false;
  std::string data_dir_from;  // copied in as the started server's data dir
  bool create_only = false;
};

/// Progress and diagnostics: stderr, so that --json leaves stdout machine-readable.
template <class... Args>
void Log(const char* fmt, Args... args) {
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

inline double SecondsSince(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

}  // namespace api_bench
