#pragma once
// Ships lifecycle output to the control plane in batches (POST /agent/v1/logs), keeping
// order and retrying while the control plane is unreachable.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hf::agent {

/// One CloudWatch-style log event.
struct LogEvent {
  int64_t timestamp_ms = 0;  ///< milliseconds since the Unix epoch
  std::string message;
};

/// Batching rules.
struct LogShipperOptions {
  /// A batch goes out at the latest this long after its first event was added.
  std::chrono::milliseconds flush_interval{250};
  /// ... or as soon as this many message bytes are pending.
  std::size_t flush_bytes = 64 * 1024;
  /// Upper bounds of one batch (CloudWatch PutLogEvents: 1 MiB, 10,000 events).
  std::size_t max_batch_bytes = 1024 * 1024;
  std::size_t max_batch_events = 10000;
  /// Retry delays after a failed send: doubled from `retry_initial` up to `retry_max`.
  std::chrono::milliseconds retry_initial{200};
  std::chrono::milliseconds retry_max{5000};
  /// Pending bytes kept while the control plane is unreachable; beyond it the oldest
  /// events are dropped (and one event saying how many were dropped takes their place).
  std::size_t max_pending_bytes = 64u * 1024 * 1024;
};

/// Sends one batch; returns true when the control plane acknowledged it (2xx). Called from
/// the shipper's own thread only.
using LogBatchSender = std::function<bool(const std::vector<LogEvent>&)>;

/// A background thread that batches events and sends them in order with `send`.
class LogShipper {
 public:
  LogShipper(LogShipperOptions options, LogBatchSender send);
  /// Abandons whatever is still pending (use Close() to deliver it first).
  ~LogShipper();
  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  /// Queues one event (thread-safe, never blocks on the network).
  void Add(LogEvent event);
  /// Sends everything still pending at once, retrying until acknowledged, then stops the
  /// thread. Returns false if Abandon() cut it short.
  bool Close();
  /// Makes a running or future Close() give up (the agent is stopping). Thread-safe.
  void Abandon();

 private:
  void Loop();

  const LogShipperOptions options_;
  const LogBatchSender send_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LogEvent> pending_;
  std::size_t pending_bytes_ = 0;
  std::chrono::steady_clock::time_point oldest_added_{};
  std::size_t dropped_ = 0;
  bool closing_ = false;
  bool abandoned_ = false;
  bool done_ = false;  ///< the thread finished
  bool all_sent_ = false;
  std::thread thread_;
};

}  // namespace hf::agent
