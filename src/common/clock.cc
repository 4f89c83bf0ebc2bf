#include "hyperfleet/common/clock.h"

#include <algorithm>
#include <cmath>

namespace hf {

double ToEpochSeconds(SystemTime t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  return static_cast<double>(us) / 1e6;
}

SystemTime FromEpochSeconds(double seconds) {
  // SystemTime counts nanoseconds in 64 bits (years 1678..2262): clamp instead of overflowing,
  // so that a far-future filter still means "after everything".
  constexpr double kLimit = 9.2e9;
  if (std::isnan(seconds)) seconds = 0;
  seconds = std::clamp(seconds, -kLimit, kLimit);
  auto us = static_cast<long long>(std::llround(seconds * 1e6));
  return SystemTime(std::chrono::microseconds(us));
}

}  // namespace hf
