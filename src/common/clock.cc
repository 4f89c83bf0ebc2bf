#include "hyperfleet/common/clock.h"

#include <cmath>

namespace hf {

double ToEpochSeconds(SystemTime t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  return static_cast<double>(us) / 1e6;
}

SystemTime FromEpochSeconds(double seconds) {
  auto us = static_cast<long long>(std::llround(seconds * 1e6));
  return SystemTime(std::chrono::microseconds(us));
}

}  // namespace hf
