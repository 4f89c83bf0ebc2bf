#include "hyperfleet/common/clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace hf {
namespace {

TEST(EpochSeconds, RoundTripsAtMicrosecondPrecision) {
  for (double t : {0.0, 1.5, 1796005047.604688, -12.25}) {
    EXPECT_DOUBLE_EQ(ToEpochSeconds(FromEpochSeconds(t)), t);
  }
}

TEST(EpochSeconds, OutOfRangeValuesClampInsteadOfOverflowing) {
  const SystemTime far = FromEpochSeconds(1e300);
  EXPECT_GT(far, FromEpochSeconds(4102444800.0));  // after 2100-01-01
  EXPECT_EQ(far, FromEpochSeconds(std::numeric_limits<double>::infinity()));
  EXPECT_LT(FromEpochSeconds(-1e300), FromEpochSeconds(0));
  EXPECT_EQ(FromEpochSeconds(std::nan("")), FromEpochSeconds(0));
}

}  // namespace
}  // namespace hf
