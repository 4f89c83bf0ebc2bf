// ParseS3Uri, bucket naming and the unsafe-key rule.
#include <gtest/gtest.h>

#include "hyperfleet/bundle/bundle_source.h"

namespace hf::bundle {
namespace {

struct UriCase {
  const char* uri;
  const char* bucket;
  const char* prefix;
};

TEST(ParseS3Uri, AcceptsWhatSourceS3UriAllows) {
  const UriCase cases[] = {
      {"s3://my-bucket/lifecycle/", "my-bucket", "lifecycle/"},
      {"s3://my-bucket/lifecycle", "my-bucket", "lifecycle/"},
      {"s3://my-bucket/a/b/c", "my-bucket", "a/b/c/"},
      {"s3://my-bucket/", "my-bucket", ""},
      {"s3://my-bucket", "my-bucket", ""},
      {"s3://sagemaker-lifecycle.v2/scripts/", "sagemaker-lifecycle.v2", "scripts/"},
      {"https://my-bucket.s3.us-west-2.amazonaws.com/lifecycle/", "my-bucket", "lifecycle/"},
      {"https://my-bucket.s3.us-west-2.amazonaws.com/lifecycle", "my-bucket", "lifecycle/"},
      {"https://my-bucket.s3.amazonaws.com/p", "my-bucket", "p/"},
      {"https://my-bucket.s3-eu-west-1.amazonaws.com/p/", "my-bucket", "p/"},
      {"https://my.dotted.bucket.s3.us-east-1.amazonaws.com/x/y/", "my.dotted.bucket", "x/y/"},
      {"https://my-bucket.s3.cn-north-1.amazonaws.com.cn/p/", "my-bucket", "p/"},
      {"https://s3.us-west-2.amazonaws.com/my-bucket/lifecycle/", "my-bucket", "lifecycle/"},
      {"https://s3.amazonaws.com/my-bucket/lifecycle", "my-bucket", "lifecycle/"},
      {"https://s3-us-west-2.amazonaws.com/my-bucket", "my-bucket", ""},
      {"https://my-bucket.s3.us-west-2.amazonaws.com", "my-bucket", ""},
      {"https://my-bucket.s3.us-west-2.amazonaws.com/my%20scripts/", "my-bucket", "my scripts/"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseS3Uri(c.uri);
    ASSERT_TRUE(parsed.ok()) << c.uri << ": " << parsed.status();
    EXPECT_EQ(parsed->bucket, c.bucket) << c.uri;
    EXPECT_EQ(parsed->prefix, c.prefix) << c.uri;
  }
  EXPECT_EQ(ParseS3Uri("s3://b-1/p")->uri(), "s3://b-1/p/");
}

TEST(ParseS3Uri, RejectsEverythingElseNamingTheField) {
  const char* bad[] = {
      "",
      "s3:/my-bucket/p",
      "S3://my-bucket/p",
      "http://my-bucket.s3.us-west-2.amazonaws.com/p",
      "ftp://my-bucket/p",
      "my-bucket/p",
      "s3://",
      "s3:///p",
      "s3://My_Bucket/p",
      "s3://ab/p",
      "s3://../p",
      "s3://a..b/p",
      "s3://192.168.1.1/p",
      "s3://my-bucket/../etc/",
      "s3://my-bucket/a/../../etc",
      "s3://my-bucket/a//b/",
      "s3://my-bucket//p",
      "s3://my-bucket/./p",
      "s3://my-bucket/a\\b",
      "https://example.com/my-bucket/p",
      "https://my-bucket.s3.us-west-2.amazonaws.com:443/p",
      "https://my-bucket.s3.us-west-2.amazonaws.com/p?versionId=1",
      "https://my-bucket.s3.us-west-2.amazonaws.com/p#x",
      "https://my-bucket.s3.us-west-2.amazonaws.com/%zz",
      "https://my-bucket.s3.us-west-2.amazonaws.com/%2e%2e/x",
      "https://s3.us-west-2.amazonaws.com/",
      "https://s3.us_west.amazonaws.com/my-bucket/p",
      "https://amazonaws.com/my-bucket/p",
  };
  for (const char* uri : bad) {
    auto parsed = ParseS3Uri(uri);
    ASSERT_FALSE(parsed.ok()) << uri << " parsed as " << parsed->uri();
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << uri;
    EXPECT_TRUE(std::string(parsed.status().message()).starts_with("LifeCycleConfig.SourceS3Uri"))
        << parsed.status();
  }
  auto nul = ParseS3Uri(std::string_view("s3://my-bucket/a\0b", 18));
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(std::string(nul.status().message()).find("\\x00"), std::string::npos);
  auto named = ParseS3Uri("ftp://x/y", "SourceS3Uri");
  EXPECT_EQ(std::string(named.status().message()),
            "SourceS3Uri 'ftp://x/y' is not an S3 URI (expected s3://bucket/prefix or an https "
            "S3 URL)");
}

TEST(ValidateBucketName, FollowsS3Naming) {
  for (const char* ok : {"abc", "my-bucket", "my.bucket.1", "0bucket9",
                         "a23456789012345678901234567890123456789012345678901234567890123"}) {
    EXPECT_TRUE(ValidateBucketName(ok).ok()) << ok;
  }
  for (const char* bad : {"ab", "a234567890123456789012345678901234567890123456789012345678901234",
                          "-abc", "abc-", ".abc", "a..b", "ABC", "a_b", "a/b", "../x", "10.0.0.1",
                          "xn--abc", "sthree-x", "abc-s3alias", "abc--ol-s3", ""}) {
    Status s = ValidateBucketName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CheckRelativeKey, RefusesKeysThatCouldEscape) {
  const std::string where = "s3://b/p/";
  for (const char* ok : {"on_create.sh", "utils/install.sh", "a/b/c.d", "..x", "x..", ".hidden",
                         "a/.b", "my script.sh"}) {
    EXPECT_TRUE(CheckRelativeKey(ok, where).ok()) << ok;
  }
  struct Bad {
    std::string key;
    std::string message;
  };
  const Bad bad[] = {
      {"../x", "key '../x' under s3://b/p/ escapes the lifecycle script directory"},
      {"a/../../x", "key 'a/../../x' under s3://b/p/ escapes the lifecycle script directory"},
      {"a/..", "key 'a/..' under s3://b/p/ escapes the lifecycle script directory"},
      {"/etc/passwd", "key '/etc/passwd' under s3://b/p/ escapes the lifecycle script directory"},
      {"./x", "key './x' under s3://b/p/ has a '.' path segment"},
      {"a//b", "key 'a//b' under s3://b/p/ has an empty path segment"},
      {"a/", "key 'a/' under s3://b/p/ has an empty path segment"},
      {"a\\..\\x", "key 'a\\..\\x' under s3://b/p/ contains a backslash"},
      {std::string("a\0b", 3), "key 'a\\x00b' under s3://b/p/ contains a NUL byte"},
      {"", "an empty key under s3://b/p/ is not a file name"},
  };
  for (const auto& b : bad) {
    Status s = CheckRelativeKey(b.key, where);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << b.key;
    EXPECT_EQ(std::string(s.message()), b.message);
  }
}

}  // namespace
}  // namespace hf::bundle
