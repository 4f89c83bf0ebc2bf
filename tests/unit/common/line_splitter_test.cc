// LineSplitter: terminators, pieces fed in any sizes, over-long lines cut at UTF-8 boundaries.
#include "hyperfleet/common/line_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hf {
namespace {

struct Case {
  std::string name;
  std::size_t max;
  std::string input;
  std::vector<std::string> before_finish;  // lines out before Finish()
  std::vector<std::string> all;            // lines out after Finish()
};

TEST(LineSplitter, Table) {
  const std::vector<Case> cases = {
      {"terminators", 100, "a\nb\r\nc", {"a", "b"}, {"a", "b", "c"}},
      {"empty lines", 100, "\n\r\n\n", {"", "", ""}, {"", "", ""}},
      {"lone cr stays inside", 100, "a\rb\n", {"a\rb"}, {"a\rb"}},
      {"unterminated cr", 100, "x\r", {}, {"x"}},
      {"long line in pieces", 4, "abcdefghij\n", {"abcd", "efgh", "ij"}, {"abcd", "efgh", "ij"}},
      {"long unterminated goes early", 4, "abcdefgh", {"abcd"}, {"abcd", "efgh"}},
      // 'a' + U+00E9 (2 bytes) + U+20AC (3 bytes): a cut at 4 would split the euro sign.
      {"utf-8 boundary", 4, "a\xc3\xa9\xe2\x82\xac\n", {"a\xc3\xa9", "\xe2\x82\xac"},
       {"a\xc3\xa9", "\xe2\x82\xac"}},
      {"minimum 4", 1, "abcde\n", {"abcd", "e"}, {"abcd", "e"}},
  };
  for (const auto& c : cases) {
    for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, c.input.size()}) {
      std::vector<std::string> got;
      LineSplitter splitter(c.max, [&](std::string line) { got.push_back(std::move(line)); });
      for (std::size_t i = 0; i < c.input.size(); i += chunk) {
        splitter.Feed(std::string_view(c.input).substr(i, chunk));
      }
      if (chunk == c.input.size()) EXPECT_EQ(got, c.before_finish) << c.name;
      splitter.Finish();
      EXPECT_EQ(got, c.all) << c.name << " fed in pieces of " << chunk;
    }
  }
}

}  // namespace
}  // namespace hf
