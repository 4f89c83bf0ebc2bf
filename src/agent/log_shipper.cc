#include "hyperfleet/agent/log_shipper.h"

#include <algorithm>
#include <utility>

namespace hf::agent {

using SteadyClock = std::chrono::steady_clock;

LogShipper::LogShipper(LogShipperOptions options, LogBatchSender send)
    : options_(options), send_(std::move(send)) {
  thread_ = std::thread([this] { Loop(); });
}

LogShipper::~LogShipper() {
  Abandon();
  if (thread_.joinable()) thread_.join();
}

void LogShipper::Add(LogEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_empty = pending_.empty();
  if (was_empty) oldest_added_ = SteadyClock::now();
  pending_bytes_ += event.message.size();
  pending_.push_back(std::move(event));
  // While the control plane is away, memory is bounded: the oldest lines go first.
  while (pending_bytes_ > options_.max_pending_bytes && pending_.size() > 1) {
    pending_bytes_ -= pending_.front().message.size();
    pending_.pop_front();
    ++dropped_;
  }
  // The thread waits for a first event (then for its flush time) or for enough bytes.
  if (was_empty || pending_bytes_ >= options_.flush_bytes) cv_.notify_all();
}

bool LogShipper::Close() {
  std::unique_lock<std::mutex> lock(mu_);
  closing_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return done_; });
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  return all_sent_;
}

void LogShipper::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_ = true;
  cv_.notify_all();
}

void LogShipper::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto delay = options_.retry_initial;
  std::vector<LogEvent> batch;  // taken but not yet acknowledged
  for (;;) {
    if (abandoned_) break;
    if (batch.empty()) {
      // Wait until a batch is due: enough bytes, old enough, or closing.
      cv_.wait(lock, [&] { return abandoned_ || closing_ || !pending_.empty(); });
      if (abandoned_) break;
      if (pending_.empty()) {
        if (closing_) {
          all_sent_ = true;
          break;
        }
        continue;
      }
      const auto due = oldest_added_ + options_.flush_interval;
      cv_.wait_until(lock, due, [&] {
        return abandoned_ || closing_ || pending_bytes_ >= options_.flush_bytes;
      });
      if (abandoned_) break;
      std::size_t bytes = 0;
      if (dropped_ > 0) {
        const int64_t ts = pending_.empty() ? 0 : pending_.front().timestamp_ms;
        batch.push_back({ts, "[hyperfleet-agent] " + std::to_string(dropped_) +
                                 " earlier lines were dropped while the control plane "
                                 "was unreachable"});
        dropped_ = 0;
      }
      while (!pending_.empty() && batch.size() < options_.max_batch_events &&
             (batch.empty() ||
              bytes + pending_.front().message.size() <= options_.max_batch_bytes)) {
        bytes += pending_.front().message.size();
        pending_bytes_ -= pending_.front().message.size();
        batch.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      if (!pending_.empty()) oldest_added_ = SteadyClock::now();
    }
    lock.unlock();
    const bool acknowledged = send_(batch);
    lock.lock();
    if (acknowledged) {
      batch.clear();
      delay = options_.retry_initial;
      continue;
    }
    cv_.wait_for(lock, delay, [&] { return abandoned_; });
    delay = std::min(delay * 2, options_.retry_max);
  }
  done_ = true;
  cv_.notify_all();
}

}  // namespace hf::agent
