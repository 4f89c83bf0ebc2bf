#pragma once
// A settable clock for tests: time moves only when the test says so.
#include <atomic>

#include "hyperfleet/common/clock.h"

namespace hf::testing {

/// Thread-safe fake clock, starting at 2026-01-01T00:00:00Z; advance() moves the wall clock
/// and the monotonic one alike.
class FakeClock final : public Clock {
 public:
  SystemTime now() const override { return SystemTime(Duration(nanos_.load())); }
  SteadyTime monotonic() const override { return SteadyTime(Duration(nanos_.load())); }
  void advance(Duration d) { nanos_ += d.count(); }

 private:
  std::atomic<long long> nanos_{1767225600LL * 1000000000LL};
};

}  // namespace hf::testing
