// json_text writes exactly what nlohmann's dump(-1, ' ', false, replace) writes for the same
// string or number, including escapes, UTF-8 kept as it is and invalid UTF-8 replaced.
#include "hyperfleet/common/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hf::json_text {
namespace {

std::string Dumped(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(JsonTextTest, StringsAsNlohmannDumpsThem) {
  std::vector<std::string> cases = {
      "", "plain", "i-0123456789abcdef0", "with space and ~!@#$%^&*()", "quote \" in",
      "back \\ slash", "/slash", "\b\f\n\r\t", "del \x7f", "caf\xc3\xa9",
      "\xe2\x9c\x93 \xf0\x9f\x9a\x80", "\xff", "bad \xc3\x28 pair", "cut \xe2\x9c",
      "\x80 lone continuation", "overlong \xc0\xaf", "surrogate \xed\xa0\x80"};
  for (int c = 0; c < 0x20; ++c) cases.push_back(std::string("ctl ") + static_cast<char>(c) + ".");
  cases.push_back(std::string("nul \0 inside", 12));
  for (const auto& s : cases) {
    std::string out = "[";
    AppendString(out, s);
    EXPECT_EQ(out, "[" + Dumped(s)) << s;
  }
}

TEST(JsonTextTest, NumbersAsNlohmannDumpsThem) {
  for (double v : {0.0, -0.0, 1.0, -3.0, 1.5, 0.1, 1'764'650'000.0, 1'764'650'000.123456,
                   1'764'650'001.000007, 1e-7, 1e21, 1e300, -2.5e-300,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                   std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    std::string out;
    AppendNumber(out, v);
    EXPECT_EQ(out, Dumped(v)) << v;
  }
}

}  // namespace
}  // namespace hf::json_text
