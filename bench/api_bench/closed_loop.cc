#include "closed_loop.h"

#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace api_bench {
namespace {

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
    if (plan_.op == Op::kListClusterNodes) onPage(res.body());
    if (!keep_alive) {
      close();
      return connect();
    }
    next();
  }

  // A ListClusterNodes page: the walk goes on with its NextToken or ends, complete.
  void onPage(std::string_view body) {
    walk_nodes_ += CountSummaries(body);
    token_ = ScanNextToken(body);
    if (!token_.empty()) return;
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

// The connections' results, summed into the cell's figures.
void Summarize(const std::vector<std::unique_ptr<Conn>>& conns, double seconds,
               CellResult& r) {
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
  r.throughput = static_cast<double>(all.size()) / seconds;
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(all.size() - 1) + 0.5);
    return all[std::min(i, all.size() - 1)] / 1000.0;
  };
  r.p50_ms = pct(0.50);
  r.p90_ms = pct(0.90);
  r.p99_ms = pct(0.99);
  r.max_ms = all.empty() ? 0 : all.back() / 1000.0;
}

}  // namespace

const char* OpName(Op op) {
  return op == Op::kDescribeCluster ? "DescribeCluster" : "ListClusterNodes";
}

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
  Summarize(conns, o.seconds, r);
  r.memory = ReadMemory(server_pid);
  return r;
}

}  // namespace api_bench
