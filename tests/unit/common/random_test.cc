// RandomBytes/RandomHex/RandomString on OpenSSL, and the injectable Random sources.
#include "hyperfleet/common/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace hf {
namespace {

TEST(RandomBytes, SizesAndFreshness) {
  EXPECT_EQ(RandomBytes(0), "");
  EXPECT_EQ(RandomBytes(33).size(), 33u);
  EXPECT_EQ(RandomBytes(3 << 20).size(), 3u << 20);  // more than one RAND_bytes call
  EXPECT_NE(RandomBytes(16), RandomBytes(16));
}

TEST(RandomHex, LowercaseHexOfTwiceTheLength) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string h = RandomHex(16);
    EXPECT_TRUE(std::regex_match(h, std::regex("[0-9a-f]{32}"))) << h;
    EXPECT_TRUE(seen.insert(h).second);
  }
}

TEST(RandomString, UsesOnlyTheAlphabetUniformly) {
  const std::string s = RandomString("abc", 30000);
  ASSERT_EQ(s.size(), 30000u);
  std::map<char, int> counts;
  for (char c : s) ++counts[c];
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [c, n] : counts) {
    // 10000 expected, standard deviation about 82: +-500 is over six of them.
    EXPECT_NEAR(n, 10000, 500) << c;
  }
  EXPECT_EQ(RandomString("x", 5), "xxxxx");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(RandomString(all, 100).size(), 100u);
  EXPECT_THROW(RandomString("", 1), std::invalid_argument);
  EXPECT_THROW(RandomString(all + "x", 1), std::invalid_argument);
}

TEST(SeededRandom, IsTheStandardEngine) {
  // C++ [rand.predef]: the 10000th value of a default-constructed mt19937_64 (seed 5489).
  SeededRandom r(5489);
  uint64_t v = 0;
  for (int i = 0; i < 10000; ++i) v = r.next();
  EXPECT_EQ(v, 9981545732273789042ULL);
}

TEST(SeededRandom, SameSeedSameStreamAcrossThreads) {
  SeededRandom serial(42), shared(42), other(43);
  std::vector<uint64_t> expected;
  for (int i = 0; i < 4000; ++i) expected.push_back(serial.next());
  EXPECT_NE(other.next(), expected[0]);
  std::vector<std::vector<uint64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) got[t].push_back(shared.next());
    });
  }
  for (auto& th : threads) th.join();
  std::vector<uint64_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);  // each value handed out once, none lost to a race
}

TEST(Random, BelowAndUnit) {
  SeededRandom r(7);
  EXPECT_EQ(r.below(0), 0u);
  EXPECT_EQ(r.below(1), 0u);
  std::set<uint64_t> faces;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = r.below(6);
    ASSERT_LT(v, 6u);
    faces.insert(v);
    const double u = r.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_EQ(faces.size(), 6u);
  EXPECT_LT(r.below(UINT64_MAX), UINT64_MAX);
}

TEST(SecureRandom, DrawsFreshValues) {
  SecureRandom r;
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(seen.insert(r.next()).second);
  EXPECT_LT(r.below(10), 10u);
}

}  // namespace
}  // namespace hf
