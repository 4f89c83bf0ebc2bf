// The URI codec against RFC 3986 and SigV4's UriEncode rules (as botocore applies them:
// quote(s, safe='-_.~') for query parts, safe='/~' for paths).
#include "hyperfleet/common/uri.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hf {
namespace {

struct EncodeCase {
  std::string in;
  bool keep_slash;
  std::string out;
};

TEST(UriEncode, SigV4Table) {
  const std::vector<EncodeCase> cases = {
      {"", false, ""},
      {"AZaz09-_.~", false, "AZaz09-_.~"},  // RFC 3986 §2.3 unreserved
      {" ", false, "%20"},                   // never '+'
      {"+", false, "%2B"},
      {"*", false, "%2A"},  // SigV4 encodes '*' (some encoders keep it)
      {"%", false, "%25"},
      {"/", false, "%2F"},
      {"/", true, "/"},
      {"a b/c d", true, "a%20b/c%20d"},
      {"!$&'()*+,;=", false, "%21%24%26%27%28%29%2A%2B%2C%3B%3D"},  // sub-delims
      {":/?#[]@", false, "%3A%2F%3F%23%5B%5D%40"},                    // gen-delims
      {"\n", false, "%0A"},                                            // upper-case hex
      {std::string("\0", 1), false, "%00"},
      {"\xff", false, "%FF"},
      {"\xc3\xa9", false, "%C3%A9"},  // UTF-8 bytes one by one
      {"photos/2026/\xe2\x82\xac.jpg", true, "photos/2026/%E2%82%AC.jpg"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(UriEncode(c.in, c.keep_slash), c.out) << c.in;
    std::string appended = "x";
    AppendUriEncoded(c.in, c.keep_slash, &appended);
    EXPECT_EQ(appended, "x" + c.out);
  }
}

TEST(UriEncode, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string encoded = UriEncode(all);
  EXPECT_EQ(encoded.find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~%"),
            std::string::npos);
  EXPECT_EQ(encoded.size(), 66u + 3u * (256u - 66u));
  EXPECT_EQ(UriDecode(encoded).value(), all);
  EXPECT_EQ(FormDecode(encoded).value(), all);
  EXPECT_EQ(FormDecodeLenient(encoded), all);
}

TEST(UriDecode, StrictTable) {
  EXPECT_EQ(UriDecode("%41%42c").value(), "ABc");
  EXPECT_EQ(UriDecode("%4a%4A").value(), "JJ");  // either case
  EXPECT_EQ(UriDecode("a+b").value(), "a+b");    // '+' is no space outside forms
  EXPECT_EQ(UriDecode("%2525").value(), "%25");  // decoded once
  EXPECT_EQ(UriDecode("").value(), "");
  for (const char* bad : {"%", "%4", "a%", "%zz", "%%41", "%4g", "%g4"}) {
    const auto r = UriDecode(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
  }
  EXPECT_EQ(UriDecode("ab%4").status().message(), "malformed percent-escape at offset 2");
}

TEST(FormDecode, PlusIsASpace) {
  EXPECT_EQ(FormDecode("a+b%20c%2B").value(), "a b c+");
  EXPECT_FALSE(FormDecode("a+%").ok());
}

TEST(FormDecodeLenient, MalformedEscapesStayLiteral) {
  // WHATWG URLSearchParams: what SigV4 verification canonicalizes with.
  EXPECT_EQ(FormDecodeLenient("100%"), "100%");
  EXPECT_EQ(FormDecodeLenient("%zz%4"), "%zz%4");
  EXPECT_EQ(FormDecodeLenient("%%41"), "%A");
  EXPECT_EQ(FormDecodeLenient("a+b%20c"), "a b c");
}

TEST(ParseQuery, PairsInOrder) {
  const auto params = ParseQuery("a=1&b=&c&&d=x=y&a=2&e+f=%26%3D").value();
  const std::vector<QueryParam> want = {
      {"a", "1"}, {"b", ""}, {"c", ""}, {"d", "x=y"}, {"a", "2"}, {"e f", "&="}};
  EXPECT_EQ(params, want);
  EXPECT_TRUE(ParseQuery("").value().empty());
  EXPECT_TRUE(ParseQuery("&&").value().empty());
}

TEST(ParseQuery, MalformedEscapeNamesTheParameter) {
  const auto r = ParseQuery("ok=1&key=%4");
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_EQ(r.status().message(), "query parameter 'key': malformed percent-escape at offset 0");
  EXPECT_FALSE(ParseQuery("%zz=1").ok());
}

TEST(ParseQueryLenient, NeverFails) {
  const std::vector<QueryParam> want = {{"key", "%4"}, {"a b", "1"}};
  EXPECT_EQ(ParseQueryLenient("key=%4&a+b=1"), want);
}

}  // namespace
}  // namespace hf
