#include "health_hook.h"

#include <spdlog/spdlog.h>

namespace hf::agent {

namespace {
const Clock& ClockOf(const HealthMonitorOptions& options) {
  static const SystemClock kSystemClock;
  return options.clock != nullptr ? *options.clock : kSystemClock;
}
}  // namespace

HealthHook::HealthHook(HealthMonitorOptions options, Duration interval,
                       const std::atomic<bool>& lifecycle_done)
    : monitor_(options), interval_(interval), lifecycle_done_(lifecycle_done),
      clock_(ClockOf(options)) {
  thread_ = std::thread([this] { Loop(); });
}

HealthHook::~HealthHook() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthHook::Fill(agentapi::HeartbeatRequest& request) {
  std::unique_lock lock(mu_);
  inputs_.control_plane_time = control_plane_time_;
  inputs_.services = lifecycle_done_.load();
  cv_.wait_for(lock, std::chrono::seconds(2), [&] { return stop_ || report_.has_value(); });
  request.health = report_;
}

void HealthHook::Take(const agentapi::HeartbeatResponse& response) {
  // The control plane's clock, when it sends one (epoch seconds), for the clock check.
  if (response.time) {
    std::lock_guard lock(mu_);
    control_plane_time_ = TimeSample{clock_.now(), FromEpochSeconds(*response.time)};
  }
}

void HealthHook::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    CheckInputs inputs = inputs_;
    lock.unlock();
    const HealthReport report = monitor_.Check(inputs);
    if (report.verdict() != last_verdict_) {
      std::string why;
      for (const auto& f : report.findings) {
        if (f.severity != Severity::kOk) why += "; " + f.check + ": " + f.message;
      }
      spdlog::warn("health verdict {} → {}{}", SeverityName(last_verdict_),
                   SeverityName(report.verdict()), why);
      last_verdict_ = report.verdict();
    }
    agentapi::HealthReport wire = report.ToWire();
    lock.lock();
    report_ = std::move(wire);
    cv_.notify_all();
    cv_.wait_for(lock, interval_, [&] { return stop_; });
  }
}

}  // namespace hf::agent
