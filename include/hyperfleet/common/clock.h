#pragma once
// Time is injected: every decision takes its `now` from a Clock so that controllers run
// deterministically under a fake clock in tests and in simulation.
#include <chrono>
#include <memory>

namespace hf {

using SystemTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;
using Duration = std::chrono::nanoseconds;

/// Source of wall-clock and monotonic time. Thread-safe implementations only.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Wall-clock time, as shown to users (epoch seconds on the wire).
  virtual SystemTime now() const = 0;
  /// Monotonic time, for timers and intervals (never jumps with the wall clock). The
  /// default reads now(), which suits clocks that only move forward (test clocks).
  virtual SteadyTime monotonic() const { return SteadyTime(now().time_since_epoch()); }
};

/// The real clock (std::chrono::system_clock, and steady_clock for monotonic()).
class SystemClock final : public Clock {
 public:
  SystemTime now() const override { return std::chrono::system_clock::now(); }
  SteadyTime monotonic() const override { return std::chrono::steady_clock::now(); }
};

/// Seconds since the Unix epoch, with fraction, as the AWS JSON protocol encodes timestamps.
double ToEpochSeconds(SystemTime t);
/// Inverse of ToEpochSeconds (microsecond precision); values beyond SystemTime's range
/// (about ±9.2e9 s) are clamped to it, NaN is 0.
SystemTime FromEpochSeconds(double seconds);

}  // namespace hf
