#include "hyperfleet/common/json_value.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hf {
namespace {

using nlohmann::json;

TEST(JsonFitsTest, AssignsOnlyWhenTheTypeFitsAndLeavesTheTargetOtherwise) {
  std::string s = "keep";
  EXPECT_FALSE(JsonFits(json(3), s));
  EXPECT_FALSE(JsonFits(json(nullptr), s));
  EXPECT_EQ(s, "keep");
  EXPECT_TRUE(JsonFits(json("x"), s));
  EXPECT_EQ(s, "x");

  bool b = false;
  EXPECT_FALSE(JsonFits(json(1), b));
  EXPECT_TRUE(JsonFits(json(true), b));
  EXPECT_TRUE(b);

  double d = 7;
  EXPECT_FALSE(JsonFits(json("1.5"), d));
  EXPECT_EQ(d, 7);
  EXPECT_TRUE(JsonFits(json(3), d));  // any number
  EXPECT_EQ(d, 3);
  EXPECT_TRUE(JsonFits(json(1.5), d));
  EXPECT_EQ(d, 1.5);
}

TEST(JsonFitsTest, IntegersAreRangeCheckedAndNeverFractions) {
  int i = 5;
  EXPECT_FALSE(JsonFits(json(1.5), i));
  EXPECT_FALSE(JsonFits(json(int64_t{1} << 31), i));
  EXPECT_EQ(i, 5);
  EXPECT_TRUE(JsonFits(json(-3), i));
  EXPECT_EQ(i, -3);

  int64_t l = 0;
  EXPECT_FALSE(JsonFits(json::parse("9223372036854775808"), l));  // parsed as unsigned
  EXPECT_TRUE(JsonFits(json::parse("9223372036854775807"), l));
  EXPECT_EQ(l, std::numeric_limits<int64_t>::max());

  uint64_t u = 1;
  EXPECT_FALSE(JsonFits(json(-1), u));
  EXPECT_TRUE(JsonFits(json(4), u));  // built from a signed integer in C++
  EXPECT_EQ(u, 4u);
  EXPECT_TRUE(JsonFits(json::parse("18446744073709551615"), u));
  EXPECT_EQ(u, std::numeric_limits<uint64_t>::max());

  unsigned small = 2;
  EXPECT_FALSE(JsonFits(json(uint64_t{1} << 32), small));
  EXPECT_EQ(small, 2u);
}

TEST(JsonFitsTest, AnArrayOfStringsKeepsItsStringEntries) {
  std::vector<std::string> v{"old"};
  EXPECT_FALSE(JsonFits(json("a"), v));
  EXPECT_EQ(v, std::vector<std::string>{"old"});
  EXPECT_TRUE(JsonFits(json::parse(R"(["a", 1, null, "b"])"), v));
  EXPECT_EQ(v, (std::vector<std::string>{"a", "b"}));
}

TEST(JsonFitsTest, TypeNamesForMessages) {
  EXPECT_STREQ(JsonTypeName<std::string>(), "a string");
  EXPECT_STREQ(JsonTypeName<int64_t>(), "an integer");
  EXPECT_STREQ(JsonTypeName<uint64_t>(), "a non-negative integer");
  EXPECT_STREQ(JsonTypeName<double>(), "a number");
}

}  // namespace
}  // namespace hf
