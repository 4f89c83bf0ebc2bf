#include "hyperfleet/common/ids.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace hf {
namespace {

TEST(IdSource, RandomIdsMatchTheModelPatterns) {
  RandomIdSource ids;
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto c = ids.clusterId();
    EXPECT_TRUE(std::regex_match(c, std::regex("[a-z0-9]{12}"))) << c;
    auto n = ids.instanceId();
    EXPECT_TRUE(std::regex_match(n, std::regex("i-[a-f0-9]{17}"))) << n;
    auto u = ids.uuid();
    EXPECT_TRUE(std::regex_match(
        u, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
        << u;
    EXPECT_TRUE(seen.insert(n).second) << "duplicate " << n;
  }
}

TEST(IdSource, SequentialIdsAreDeterministicPerSeed) {
  SequentialIdSource a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    auto x = a.instanceId();
    EXPECT_EQ(x, b.instanceId());
    EXPECT_NE(x, c.instanceId());
    EXPECT_TRUE(std::regex_match(x, std::regex("i-[a-f0-9]{17}"))) << x;
  }
}

}  // namespace
}  // namespace hf
