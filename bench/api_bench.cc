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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/http/http.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;

// The fixed key the spawned server is told to accept.
constexpr char kBenchKeyId[] = "AKIAHFBENCH000000001";
constexpr char kBenchSecret[] = "hyperfleetBenchSecretKey0000000000000000";
constexpr char kContentType[] = "application/x-amz-json-1.1";
constexpr int kMaxGroupSize = 5000;  // service model: InstanceCount <= 6758 per group
constexpr int kPageSize = 100;

// Targets (2 cores, generator included). Informational only.
constexpr double kTargetThroughput = 5000;   // req/s at 16 clients
constexpr double kTargetDescribeP99Ms = 5;   // DescribeCluster p99 at 16 clients
constexpr double kTargetListP99Ms = 10;      // ListClusterNodes page p99 at 16 clients
constexpr double kTargetRssMiB = 64;
constexpr int kReferenceClients = 16;

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

// Progress and diagnostics: stderr, so that --json leaves stdout machine-readable.
template <class... Args>
void Log(const char* fmt, Args... args) {
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

double SecondsSince(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

// ---- /proc readings ----------------------------------------------------------------------

struct Memory {
  double rss_mib = -1, hwm_mib = -1;
};

Memory ReadMemory(int pid) {
  Memory m;
  if (pid <= 0) return m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) m.rss_mib = kb / 1024.0;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kb) == 1) m.hwm_mib = kb / 1024.0;
  }
  return m;
}

/// CPU seconds (user + system) used so far by process `pid`; -1 when unknown.
double ProcessCpuSeconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // Fields after the command: state(3) ... utime(14) stime(15).
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

/// Machine-wide busy and total CPU seconds from /proc/stat.
struct MachineCpu {
  double busy = 0, total = 0;
};

MachineCpu ReadMachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[10] = {};
  in >> cpu;
  for (auto& x : v) in >> x;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  // user nice system idle iowait irq softirq steal guest guest_nice
  const double idle = static_cast<double>(v[3] + v[4]);
  const double total = static_cast<double>(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]);
  return {(total - idle) / tick, total / tick};
}

struct CpuSnapshot {
  double server = -1, self = 0;
  MachineCpu machine;
  Steady::time_point at;
};

CpuSnapshot SnapCpu(int server_pid) {
  return {ProcessCpuSeconds(server_pid), SelfCpuSeconds(), ReadMachineCpu(), Steady::now()};
}

/// CPU used between two snapshots, in percent of one core.
struct CpuShare {
  double server = -1, generator = 0, other = 0, machine = 0, wall = 0;
  double server_seconds = -1, generator_seconds = 0;
};

CpuShare Share(const CpuSnapshot& a, const CpuSnapshot& b) {
  CpuShare s;
  s.wall = std::chrono::duration<double>(b.at - a.at).count();
  if (s.wall <= 0) return s;
  s.generator_seconds = b.self - a.self;
  s.generator = 100 * s.generator_seconds / s.wall;
  const double busy = b.machine.busy - a.machine.busy;
  const double total = b.machine.total - a.machine.total;
  const double cores = static_cast<double>(std::thread::hardware_concurrency());
  s.machine = total > 0 ? 100 * cores * busy / total : 0;
  if (a.server >= 0 && b.server >= 0) {
    s.server_seconds = b.server - a.server;
    s.server = 100 * s.server_seconds / s.wall;
  }
  s.other = std::max(0.0, s.machine - s.generator - std::max(0.0, s.server));
  return s;
}

// ---- requests ----------------------------------------------------------------------------

struct Target {
  std::string host;
  std::string port;
  std::string host_header;  // host:port as signed
  hf::auth::AccessKey key;
  std::string region;
};

/// A POST / for SageMaker.<op>, signed now with the project's SigV4 signer.
bhttp::request<bhttp::string_body> SignedRequest(const Target& t, std::string_view op,
                                                 std::string body) {
  hf::http::HttpRequest r;
  r.method = "POST";
  r.target = "/";
  r.headers = {{"Content-Type", kContentType},
               {"X-Amz-Target", std::string("SageMaker.") + std::string(op)}};
  r.body = std::move(body);
  hf::auth::SignSigV4(r, t.key, t.region, "sagemaker", t.host_header,
                      std::chrono::system_clock::now());
  bhttp::request<bhttp::string_body> m{bhttp::verb::post, "/", 11};
  for (const auto& [name, value] : r.headers) m.insert(name, value);
  m.body() = std::move(r.body);
  m.keep_alive(true);
  m.prepare_payload();
  return m;
}

std::string DescribeBody(const std::string& cluster) {
  return Json{{"ClusterName", cluster}}.dump();
}

std::string ListNodesBody(const std::string& cluster, const std::string& token) {
  Json j = {{"ClusterName", cluster}, {"MaxResults", kPageSize}};
  if (!token.empty()) j["NextToken"] = token;
  return j.dump();
}

/// Cheap scans of a ListClusterNodes page (a full parse would cost the generator more CPU
/// than the server spends producing the page): the NextToken (hex, no escapes) and the
/// number of node summaries.
std::string ScanNextToken(std::string_view body) {
  constexpr std::string_view kKey = "\"NextToken\":\"";
  auto pos = body.find(kKey);
  if (pos == std::string_view::npos) return {};
  pos += kKey.size();
  auto end = body.find('"', pos);
  return end == std::string_view::npos ? std::string() : std::string(body.substr(pos, end - pos));
}

int CountSummaries(std::string_view body) {
  int n = 0;
  for (size_t pos = 0; (pos = body.find("\"NodeLogicalId\"", pos)) != std::string_view::npos;
       pos += 15) {
    ++n;
  }
  return n;
}

/// A blocking client for setup and polling (one keep-alive connection).
class SyncClient {
 public:
  explicit SyncClient(const Target& target) : target_(target), stream_(ioc_) {}

  struct Reply {
    int status = 0;
    std::string body;
    std::string error;  // transport failure
  };

  Reply call(std::string_view op, const std::string& body) {
    Reply r;
    for (int attempt = 0; attempt < 2; ++attempt) {
      beast::error_code ec;
      if (!connected_) {
        tcp::resolver resolver(ioc_);
        auto results = resolver.resolve(target_.host, target_.port, ec);
        if (!ec) {
          stream_.expires_after(std::chrono::seconds(10));
          stream_.connect(results, ec);
        }
        if (ec) {
          r.error = "connect: " + ec.message();
          continue;
        }
        stream_.socket().set_option(tcp::no_delay(true), ec);
        connected_ = true;
      }
      auto req = SignedRequest(target_, op, body);
      stream_.expires_after(std::chrono::seconds(60));
      bhttp::write(stream_, req, ec);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(256u << 20);
      if (!ec) bhttp::read(stream_, buffer_, parser, ec);
      if (ec) {
        r.error = ec.message();
        close();
        continue;
      }
      auto res = parser.release();
      r.status = static_cast<int>(res.result_int());
      r.body = std::move(res.body());
      r.error.clear();
      if (!res.keep_alive()) close();
      return r;
    }
    return r;
  }

 private:
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
    connected_ = false;
  }

  const Target& target_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
};

// ---- closed loop -------------------------------------------------------------------------

enum class Op { kDescribeCluster, kListClusterNodes };

const char* OpName(Op op) {
  return op == Op::kDescribeCluster ? "DescribeCluster" : "ListClusterNodes";
}

/// What one cell measures, shared read-only by all connections.
struct CellPlan {
  const Target* target;
  Op op;
  std::string cluster;
  int expected_nodes = 0;
  Steady::time_point measure_start, end;
};

/// Per-connection results; touched only by the connection's thread.
struct ConnStats {
  std::vector<uint32_t> latency_us;  // completed in the measured window
  uint64_t errors = 0;               // any time in the cell (warm-up included)
  uint64_t walks = 0;                // complete ListClusterNodes walks
  std::string first_error;
};

/// One keep-alive connection running the closed loop on an io_context.
class Conn {
 public:
  Conn(asio::io_context& ioc, const CellPlan& plan, tcp::resolver::results_type endpoints)
      : plan_(plan), endpoints_(std::move(endpoints)), stream_(ioc), retry_(ioc) {}

  void start() { connect(); }
  ConnStats& stats() { return stats_; }

 private:
  void connect() {
    if (Steady::now() >= plan_.end) return;
    stream_.expires_after(std::chrono::seconds(10));
    stream_.async_connect(endpoints_, [this](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return fail("connect", ec.message(), /*reconnect=*/true);
      beast::error_code ignored;
      stream_.socket().set_option(tcp::no_delay(true), ignored);
      next();
    });
  }

  void next() {
    if (Steady::now() >= plan_.end) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_.close();
      return;
    }
    std::string body = plan_.op == Op::kDescribeCluster ? DescribeBody(plan_.cluster)
                                                        : ListNodesBody(plan_.cluster, token_);
    req_ = SignedRequest(*plan_.target, OpName(plan_.op), std::move(body));
    sent_ = Steady::now();
    stream_.expires_after(std::chrono::seconds(30));
    bhttp::async_write(stream_, req_, [this](beast::error_code ec, std::size_t) {
      if (ec) return fail("write", ec.message(), true);
      parser_.emplace();
      parser_->body_limit(64u << 20);
      bhttp::async_read(stream_, buffer_, *parser_,
                        [this](beast::error_code ec2, std::size_t) { onRead(ec2); });
    });
  }

  void onRead(beast::error_code ec) {
    const auto done = Steady::now();
    if (ec) return fail("read", ec.message(), true);
    const auto& res = parser_->get();
    if (done >= plan_.measure_start && done <= plan_.end) {
      stats_.latency_us.push_back(static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(done - sent_).count()));
    }
    const bool keep_alive = res.keep_alive();
    if (res.result_int() != 200) {
      fail("status", std::to_string(res.result_int()) + " " + res.body().substr(0, 300),
           !keep_alive);
      if (keep_alive) next();
      return;
    }
    if (plan_.op == Op::kListClusterNodes) {
      const std::string_view body = res.body();
      walk_nodes_ += CountSummaries(body);
      token_ = ScanNextToken(body);
      if (token_.empty()) {
        if (walk_nodes_ != plan_.expected_nodes) {
          fail("walk",
               "a ListClusterNodes walk returned " + std::to_string(walk_nodes_) +
                   " nodes, expected " + std::to_string(plan_.expected_nodes),
               false);
        } else {
          ++stats_.walks;
        }
        walk_nodes_ = 0;
      }
    }
    if (!keep_alive) {
      close();
      return connect();
    }
    next();
  }

  void fail(const char* where, const std::string& what, bool reconnect) {
    ++stats_.errors;
    if (stats_.first_error.empty()) stats_.first_error = std::string(where) + ": " + what;
    if (!reconnect) return;
    close();
    token_.clear();
    walk_nodes_ = 0;
    // Back off a little so that a dead server does not turn into a busy loop.
    retry_.expires_after(std::chrono::milliseconds(10));
    retry_.async_wait([this](beast::error_code) { connect(); });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
  }

  const CellPlan& plan_;
  tcp::resolver::results_type endpoints_;
  beast::tcp_stream stream_;
  asio::steady_timer retry_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> req_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  Steady::time_point sent_;
  std::string token_;
  int walk_nodes_ = 0;
  ConnStats stats_;
};

struct CellResult {
  std::string op;
  int clients = 0;
  uint64_t requests = 0;
  double seconds = 0;
  double throughput = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  uint64_t errors = 0;
  uint64_t walks = 0;
  std::string first_error;
  Memory memory;
  CpuShare cpu;
};

CellResult RunCell(const Options& o, const Target& target, Op op, int clients,
                   const std::string& cluster, int expected_nodes, int server_pid) {
  CellPlan plan;
  plan.target = &target;
  plan.op = op;
  plan.cluster = cluster;
  plan.expected_nodes = expected_nodes;
  const auto start = Steady::now();
  plan.measure_start = start + std::chrono::duration_cast<Steady::duration>(
                                   std::chrono::duration<double>(o.warmup));
  plan.end = plan.measure_start + std::chrono::duration_cast<Steady::duration>(
                                      std::chrono::duration<double>(o.seconds));

  const int threads = std::max(1, std::min(o.client_threads, clients));
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<Conn>> conns;
  for (int t = 0; t < threads; ++t) contexts.push_back(std::make_unique<asio::io_context>(1));
  tcp::resolver resolver(*contexts[0]);
  auto endpoints = resolver.resolve(target.host, target.port);
  for (int c = 0; c < clients; ++c) {
    conns.push_back(std::make_unique<Conn>(*contexts[c % threads], plan, endpoints));
    conns.back()->start();
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&ctx = *contexts[t]] { ctx.run(); });
  }
  std::this_thread::sleep_until(plan.measure_start);
  const CpuSnapshot before = SnapCpu(server_pid);
  std::this_thread::sleep_until(plan.end);
  const CpuSnapshot after = SnapCpu(server_pid);
  for (auto& w : workers) w.join();

  CellResult r;
  r.op = OpName(op);
  r.clients = clients;
  r.seconds = o.seconds;
  r.cpu = Share(before, after);
  std::vector<uint32_t> all;
  for (auto& c : conns) {
    auto& s = c->stats();
    all.insert(all.end(), s.latency_us.begin(), s.latency_us.end());
    r.errors += s.errors;
    r.walks += s.walks;
    if (r.first_error.empty()) r.first_error = s.first_error;
  }
  std::sort(all.begin(), all.end());
  r.requests = all.size();
  r.throughput = static_cast<double>(all.size()) / o.seconds;
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(all.size() - 1) + 0.5);
    return all[std::min(i, all.size() - 1)] / 1000.0;
  };
  r.p50_ms = pct(0.50);
  r.p90_ms = pct(0.90);
  r.p99_ms = pct(0.99);
  r.max_ms = all.empty() ? 0 : all.back() / 1000.0;
  r.memory = ReadMemory(server_pid);
  return r;
}

// ---- the server process ------------------------------------------------------------------

class ServerProcess {
 public:
  ~ServerProcess() { stop(); }

  /// Starts `binary server ...` and waits for its "listening on http://HOST:PORT" line.
  bool start(const Options& o, std::string* host_port) {
    char dir_template[] = "/tmp/hf-api-bench-XXXXXX";
    if (!mkdtemp(dir_template)) {
      Log("api_bench: mkdtemp: %s", std::strerror(errno));
      return false;
    }
    data_dir_ = dir_template;
    keep_ = o.keep_data_dir;
    log_path_ = data_dir_ + "/server.log";
    if (!o.data_dir_from.empty()) {
      std::error_code ec;
      fs::copy(o.data_dir_from, data_dir_ + "/data", fs::copy_options::recursive, ec);
      if (ec) {
        Log("api_bench: cannot copy %s: %s", o.data_dir_from.c_str(), ec.message().c_str());
        return false;
      }
    }
    std::vector<std::string> args = {o.server_binary,
                                     "server",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     data_dir_ + "/data",
                                     "--access-key-id",
                                     o.access_key_id,
                                     "--secret-access-key",
                                     o.secret_access_key,
                                     "--provider",
                                     "fake",
                                     "--fake-boot-delay-ms",
                                     std::to_string(o.boot_delay_ms),
                                     "--max-instances-per-cluster",
                                     "20000",
                                     "--io-threads",
                                     std::to_string(o.io_threads),
                                     "--region",
                                     o.region,
                                     "--log-level",
                                     o.server_log_level};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      Log("api_bench: pipe: %s", std::strerror(errno));
      return false;
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      Log("api_bench: fork: %s", std::strerror(errno));
      return false;
    }
    if (pid_ == 0) {
      // Never outlive the benchmark. SIGKILL, not SIGTERM: the server's graceful stop joins
      // its controller, which can be busy for minutes while a large cluster launches.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];

    // Read lines until the listening line (or exit, or 60 s).
    const auto deadline = Steady::now() + std::chrono::seconds(60);
    std::string pending;
    while (Steady::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) < 0 && errno != EINTR) break;
      if (p.revents & (POLLIN | POLLHUP)) {
        char buf[4096];
        ssize_t n = read(out_fd_, buf, sizeof buf);
        if (n <= 0) break;
        pending.append(buf, static_cast<size_t>(n));
        early_output_.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
          std::string line = pending.substr(0, nl);
          pending.erase(0, nl + 1);
          constexpr std::string_view kPrefix = "hyperfleet server listening on http://";
          auto at = line.find(kPrefix);
          if (at == std::string::npos) continue;
          std::string rest = line.substr(at + kPrefix.size());
          *host_port = rest.substr(0, rest.find_first_of(" /"));
          drain_ = std::thread([this] { drain(); });
          return true;
        }
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
    }
    Log("api_bench: the server did not report its listening address. Its output:\n%s",
        early_output_.c_str());
    return false;
  }

  int pid() const { return pid_; }
  const std::string& data_dir() const { return data_dir_; }

  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      bool exited = false;
      for (int i = 0; i < 200 && !exited; ++i) {  // 10 s
        exited = waitpid(pid_, &status, WNOHANG) == pid_;
        if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!exited) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    if (!data_dir_.empty()) {
      if (keep_) {
        Log("api_bench: kept data dir %s", data_dir_.c_str());
      } else {
        std::error_code ec;
        fs::remove_all(data_dir_, ec);
      }
      data_dir_.clear();
    }
  }

 private:
  // Keeps reading the server's output (so it never blocks on a full pipe) into server.log.
  void drain() {
    std::ofstream log(log_path_, std::ios::app);
    log << early_output_;
    char buf[4096];
    ssize_t n;
    while ((n = read(out_fd_, buf, sizeof buf)) > 0) log.write(buf, n);
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool keep_ = false;
  std::string data_dir_, log_path_, early_output_;
  std::thread drain_;
};

std::string DefaultServerBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "bin/hyperfleet";
  for (fs::path candidate : {self.parent_path() / "hyperfleet",
                             self.parent_path() / "bin" / "hyperfleet"}) {
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return (self.parent_path() / "hyperfleet").string();
}

// ---- cluster setup -----------------------------------------------------------------------

struct ClusterInfo {
  std::string name;
  int nodes = 0;
  double create_seconds = -1;  // -1: reused
  double create_server_cpu_s = -1;
  bool ok = false;
  std::string describe_body, page_body;  // samples for --profile
};

int SumCounts(const Json& describe, const char* member) {
  int n = 0;
  for (const auto& g : describe.value("InstanceGroups", Json::array())) n += g.value(member, 0);
  return n;
}

ClusterInfo SetUpCluster(const Options& o, const Target& target) {
  ClusterInfo info;
  info.name = o.cluster_name;
  SyncClient client(target);
  auto existing = client.call("DescribeCluster", DescribeBody(info.name));
  const auto t0 = Steady::now();
  if (existing.status == 200) {
    Log("api_bench: cluster %s exists; reusing it", info.name.c_str());
  } else {
    Json groups = Json::array();
    const int count = (o.nodes + kMaxGroupSize - 1) / kMaxGroupSize;
    for (int g = 0; g < count; ++g) {
      const int size = o.nodes / count + (g < o.nodes % count ? 1 : 0);
      groups.push_back({{"InstanceGroupName", "group-" + std::to_string(g + 1)},
                        {"InstanceType", "ml.c5.xlarge"},
                        {"InstanceCount", size},
                        {"LifeCycleConfig",
                         {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "on_create.sh"}}},
                        {"ExecutionRole", "arn:aws:iam::123456789012:role/R"}});
    }
    Json body = {{"ClusterName", info.name}, {"InstanceGroups", groups}};
    auto created = client.call("CreateCluster", body.dump());
    if (created.status != 200) {
      Log("api_bench: CreateCluster failed: %d %s %s", created.status, created.error.c_str(),
          created.body.c_str());
      return info;
    }
    Log("api_bench: CreateCluster %s (%d nodes in %d groups) accepted in %.3f s",
        info.name.c_str(), o.nodes, count, SecondsSince(t0));
  }
  const auto deadline = t0 + std::chrono::seconds(o.create_timeout_s);
  auto last_report = Steady::now();
  for (;;) {
    auto d = client.call("DescribeCluster", DescribeBody(info.name));
    if (d.status == 200) {
      Json j = Json::parse(d.body, nullptr, false);
      const std::string status = j.is_object() ? j.value("ClusterStatus", "") : "";
      if (status == "InService") {
        info.nodes = SumCounts(j, "TargetCount");
        info.describe_body = d.body;
        if (existing.status != 200) info.create_seconds = SecondsSince(t0);
        break;
      }
      if (status == "Failed" || status == "Deleting") {
        Log("api_bench: cluster is %s: %s", status.c_str(), d.body.c_str());
        return info;
      }
      if (SecondsSince(last_report) >= 5) {
        last_report = Steady::now();
        Log("api_bench:   %s after %.0f s: %d/%d nodes running", status.c_str(),
            SecondsSince(t0), SumCounts(j, "CurrentCount"), SumCounts(j, "TargetCount"));
      }
    } else {
      Log("api_bench: DescribeCluster while waiting: %d %s %s", d.status, d.error.c_str(),
          d.body.substr(0, 300).c_str());
      if (d.status != 0 && d.status < 500) return info;
    }
    if (Steady::now() >= deadline) {
      Log("api_bench: cluster not InService after %d s (--create-timeout)", o.create_timeout_s);
      return info;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto page = client.call("ListClusterNodes", ListNodesBody(info.name, ""));
  if (page.status != 200) {
    Log("api_bench: ListClusterNodes failed: %d %s", page.status, page.body.c_str());
    return info;
  }
  info.page_body = page.body;
  info.ok = true;
  return info;
}

// ---- micro-profile -----------------------------------------------------------------------

struct MicroResult {
  std::string what;
  double us = 0;
};

// Keeps results alive so that the optimiser cannot drop the work being timed.
volatile size_t g_sink = 0;
void Sink(size_t v) { g_sink = g_sink + v; }

template <class Fn>
double MicrosPerCall(Fn&& fn) {
  // Run for about 0.3 s after a short warm-up.
  for (int i = 0; i < 50; ++i) fn();
  int n = 0;
  const auto t0 = Steady::now();
  while (SecondsSince(t0) < 0.3) {
    for (int i = 0; i < 20; ++i) fn();
    n += 20;
  }
  return 1e6 * SecondsSince(t0) / n;
}

/// Per-call costs, in this process, of the pieces a request goes through on the server.
std::vector<MicroResult> MicroProfile(const Target& target, const ClusterInfo& cluster) {
  std::vector<MicroResult> out;
  hf::http::HttpRequest req;
  req.method = "POST";
  req.target = "/";
  req.headers = {{"Content-Type", kContentType}, {"X-Amz-Target", "SageMaker.DescribeCluster"}};
  req.body = DescribeBody(cluster.name);
  out.push_back({"SigV4 sign (client side, per request)", MicrosPerCall([&] {
                   hf::http::HttpRequest copy = req;
                   hf::auth::SignSigV4(copy, target.key, target.region, "sagemaker",
                                       target.host_header, std::chrono::system_clock::now());
                   Sink(copy.headers.size());
                 })});
  hf::auth::SignSigV4(req, target.key, target.region, "sagemaker", target.host_header,
                      std::chrono::system_clock::now());
  hf::auth::SigV4Policy policy;
  policy.region = target.region;
  policy.services = {"sagemaker"};
  hf::auth::SecretLookup secrets = [&](std::string_view id) -> std::optional<std::string> {
    if (id == target.key.access_key_id) return target.key.secret_access_key;
    return std::nullopt;
  };
  bool verified = true;
  out.push_back({"SigV4 verify (server side, per request)", MicrosPerCall([&] {
                   auto v = hf::auth::VerifySigV4(req, secrets, policy,
                                                  std::chrono::system_clock::now());
                   verified = verified && v.ok();
                 })});
  if (!verified) out.back().what += " [verification FAILED]";
  out.push_back({"JSON parse of the request body", MicrosPerCall([&] {
                   Sink(Json::parse(req.body, nullptr, false).size());
                 })});
  const Json describe = Json::parse(cluster.describe_body, nullptr, false);
  out.push_back({"JSON dump of a DescribeCluster reply (" +
                     std::to_string(cluster.describe_body.size()) + " B)",
                 MicrosPerCall([&] { Sink(describe.dump().size()); })});
  const Json page = Json::parse(cluster.page_body, nullptr, false);
  out.push_back({"JSON build of a 100-node page (copy of parsed summaries)", MicrosPerCall([&] {
                   Json copy = Json::array();
                   for (const auto& s : page["ClusterNodeSummaries"]) copy.push_back(s);
                   Sink(copy.size());
                 })});
  out.push_back({"JSON dump of a 100-node page (" + std::to_string(cluster.page_body.size()) +
                     " B)",
                 MicrosPerCall([&] { Sink(page.dump().size()); })});
  out.push_back({"JSON parse of a 100-node page (client side, not done per request)",
                 MicrosPerCall([&] {
                   Sink(Json::parse(cluster.page_body, nullptr, false).size());
                 })});
  return out;
}

// ---- output ------------------------------------------------------------------------------

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Pct(double v) { return v < 0 ? "n/a" : Fmt("%.0f%%", v); }

struct Check {
  std::string what, value;
  std::optional<bool> pass;  // nullopt: not measured
};

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

}  // namespace

// The started server, for the SIGINT/SIGTERM handler.
static volatile pid_t g_server_pid = -1;

static void OnStopSignal(int) {
  if (g_server_pid > 0) kill(g_server_pid, SIGKILL);
  _exit(130);
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, OnStopSignal);
  signal(SIGTERM, OnStopSignal);
  Options o;
  o.server_binary = DefaultServerBinary();
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
  CLI11_PARSE(app, argc, argv);

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
  Target target;
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    Log("api_bench: --endpoint must be HOST:PORT, got '%s'", host_port.c_str());
    return 2;
  }
  target.host = host_port.substr(0, colon);
  target.port = host_port.substr(colon + 1);
  target.host_header = host_port;
  target.key = {o.access_key_id, o.secret_access_key};
  target.region = o.region;

  const double cpu_before_create = ProcessCpuSeconds(server_pid);
  ClusterInfo cluster = SetUpCluster(o, target);
  if (!cluster.ok) return 2;
  const Memory after_create = ReadMemory(server_pid);
  if (cpu_before_create >= 0) {
    cluster.create_server_cpu_s = ProcessCpuSeconds(server_pid) - cpu_before_create;
  }
  if (cluster.create_seconds >= 0) {
    Log("api_bench: InService after %.2f s; %d nodes", cluster.create_seconds, cluster.nodes);
  }

  if (o.create_only) {
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
    return 0;
  }

  // The server's own background cost with no requests (controller resyncs).
  CpuShare idle;
  {
    const auto a = SnapCpu(server_pid);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    idle = Share(a, SnapCpu(server_pid));
  }

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

  std::vector<MicroResult> micro;
  if (o.profile) micro = MicroProfile(target, cluster);

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
  g_server_pid = -1;
  server.stop();

  uint64_t errors = 0;
  for (const auto& c : cells) errors += c.errors;
  return errors > 0 ? 1 : 0;
}
