#pragma once
// Time is injected: every decision takes its `now` from a Clock so that controllers run
// deterministically under a fake clock in tests and in simulation.
#include <chrono>
#include <memory>

namespace hf {

using SystemTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

/// Source of wall-clock time. Thread-safe implementations only.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Wall-clock time, as shown to users (epoch seconds on the wire).
  virtual SystemTime now() const = 0;
};

/// The real clock (std::chrono::system_clock).
class SystemClock final : public Clock {
 public:
  SystemTime now() const override { return std::chrono::system_clock::now(); }
};

/// Seconds since the Unix epoch, with fraction, as the AWS JSON protocol encodes timestamps.
double ToEpochSeconds(SystemTime t);
/// Inverse of ToEpochSeconds (microsecond precision); values beyond SystemTime's range
/// (about ±9.2e9 s) are clamped to it, NaN is 0.
SystemTime FromEpochSeconds(double seconds);

}  // namespace hf
