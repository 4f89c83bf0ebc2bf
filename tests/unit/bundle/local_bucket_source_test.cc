// LocalBucketSource on a real temporary directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "hyperfleet/bundle/bundle_source.h"

namespace hf::bundle {
namespace {
namespace fs = std::filesystem;

class LocalBucketSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "hf-bundle-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    root_ = dir_ / "s3";
    fs::create_directories(root_ / "my-bucket");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  fs::path Bucket() const { return root_ / "my-bucket"; }

  fs::path dir_;
  fs::path root_;
};

S3Location Loc(std::string bucket, std::string prefix) { return {std::move(bucket), std::move(prefix)}; }

TEST_F(LocalBucketSourceTest, ListsNestedFilesSortedAndReadsThem) {
  Write(Bucket() / "lc/on_create.sh", "#!/bin/bash\necho hi\n");
  Write(Bucket() / "lc/utils/install.sh", "x");
  Write(Bucket() / "lc/utils/deep/er/file.txt", "12345");
  Write(Bucket() / "lc/provisioning_parameters.json", "{}");
  Write(Bucket() / "other/not-in-prefix.sh", "no");
  Write(Bucket() / "lcx/similar-prefix.sh", "no");
  ASSERT_EQ(mkfifo((Bucket() / "lc/a-fifo").c_str(), 0600), 0);  // not a regular file: skipped

  LocalBucketSource source(root_);
  auto listed = source.list(Loc("my-bucket", "lc/"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<BundleObject> expected = {{"on_create.sh", 20},
                                        {"provisioning_parameters.json", 2},
                                        {"utils/deep/er/file.txt", 5},
                                        {"utils/install.sh", 1}};
  EXPECT_EQ(*listed, expected);

  auto bytes = source.read(Loc("my-bucket", "lc/"), "on_create.sh");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "#!/bin/bash\necho hi\n");
  EXPECT_EQ(*source.read(Loc("my-bucket", "lc/"), "utils/deep/er/file.txt"), "12345");

  // The whole bucket (empty prefix).
  auto all = source.list(Loc("my-bucket", ""));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 6u);
  EXPECT_EQ(all->front().key, "lc/on_create.sh");
}

TEST_F(LocalBucketSourceTest, EmptyOrMissingPrefixIsNotFound) {
  fs::create_directories(Bucket() / "empty/sub");
  LocalBucketSource source(root_);
  for (const char* prefix : {"empty/", "missing/"}) {
    auto listed = source.list(Loc("my-bucket", prefix));
    ASSERT_FALSE(listed.ok());
    EXPECT_EQ(listed.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(std::string(listed.status().message()),
              "no lifecycle scripts found at s3://my-bucket/" + std::string(prefix) +
                  " (the prefix is empty)");
  }
  Write(Bucket() / "lc/on_create.sh", "x");
  auto missing = source.read(Loc("my-bucket", "lc/"), "on_init.sh");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(missing.status().message()),
            "lifecycle script 'on_init.sh' not found at s3://my-bucket/lc/");
  // A directory is not a script.
  fs::create_directories(Bucket() / "lc/dir");
  EXPECT_EQ(source.read(Loc("my-bucket", "lc/"), "dir").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(LocalBucketSourceTest, MissingBucketIsNotFound) {
  LocalBucketSource source(root_);
  auto listed = source.list(Loc("no-such-bucket", "lc/"));
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(listed.status().message()).find("bucket 'no-such-bucket' does not exist"),
            std::string::npos)
      << listed.status();
}

TEST_F(LocalBucketSourceTest, BadBucketNamesCannotEscapeTheRoot) {
  Write(dir_ / "secret/lc/on_create.sh", "secret");
  LocalBucketSource source(root_);
  for (const char* bucket : {"../secret", "..", ".", "a/b", "", "/etc"}) {
    auto listed = source.list(Loc(bucket, "lc/"));
    EXPECT_EQ(listed.status().code(), absl::StatusCode::kInvalidArgument) << bucket;
    EXPECT_EQ(source.read(Loc(bucket, "lc/"), "on_create.sh").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bucket;
  }
  // A prefix with ".." is refused too (S3Location built by hand, not by ParseS3Uri).
  EXPECT_EQ(source.list(Loc("my-bucket", "../../secret/lc/")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalBucketSourceTest, SymlinkOutOfTheBucketIsAnUnsafeKey) {
  Write(dir_ / "outside/passwd", "root:x:0:0");
  Write(Bucket() / "lc/on_create.sh", "x");
  fs::create_symlink(dir_ / "outside/passwd", Bucket() / "lc/passwd");
  LocalBucketSource source(root_);
  auto listed = source.list(Loc("my-bucket", "lc/"));
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(listed.status().message())
                .find("key 'passwd' under s3://my-bucket/lc/ escapes the lifecycle script "
                      "directory"),
            std::string::npos)
      << listed.status();
  auto read = source.read(Loc("my-bucket", "lc/"), "passwd");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();

  // Relative links and directory links escaping are caught the same way.
  fs::remove(Bucket() / "lc/passwd");
  fs::create_symlink("../../../outside", Bucket() / "lc/dirlink");
  EXPECT_EQ(source.list(Loc("my-bucket", "lc/")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(source.read(Loc("my-bucket", "lc/"), "dirlink/passwd").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The prefix itself a link out of the bucket.
  fs::create_symlink(dir_ / "outside", Bucket() / "linked");
  EXPECT_EQ(source.list(Loc("my-bucket", "linked/")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LocalBucketSourceTest, SymlinksInsideTheBucketAreFollowedAndLoopsEnd) {
  Write(Bucket() / "shared/common.sh", "common");
  Write(Bucket() / "lc/on_create.sh", "x");
  fs::create_symlink("../shared/common.sh", Bucket() / "lc/common.sh");
  fs::create_symlink("../lc", Bucket() / "lc/loop");             // a loop back to the prefix
  fs::create_symlink("does-not-exist", Bucket() / "lc/dangling");  // skipped
  LocalBucketSource source(root_);
  auto listed = source.list(Loc("my-bucket", "lc/"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<BundleObject> expected = {{"common.sh", 6}, {"on_create.sh", 1}};
  EXPECT_EQ(*listed, expected);
  EXPECT_EQ(*source.read(Loc("my-bucket", "lc/"), "common.sh"), "common");
}

TEST_F(LocalBucketSourceTest, UnsafeKeysAreRefusedOnRead) {
  Write(Bucket() / "lc/on_create.sh", "x");
  Write(root_ / "other-bucket/lc/x", "other");
  LocalBucketSource source(root_);
  for (const char* key : {"../on_create.sh", "../../other-bucket/lc/x", "/etc/passwd", "a//b",
                          "./on_create.sh", "a\\b", ""}) {
    EXPECT_EQ(source.read(Loc("my-bucket", "lc/"), key).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << key;
  }
  // A file name with a backslash on disk is an unsafe key in the listing.
  Write(Bucket() / "lc/a\\b", "x");
  EXPECT_EQ(source.list(Loc("my-bucket", "lc/")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LocalBucketSourceTest, LimitsAreEnforced) {
  Write(Bucket() / "lc/a.sh", std::string(600, 'a'));
  Write(Bucket() / "lc/b.sh", std::string(600, 'b'));
  Write(Bucket() / "lc/c.sh", "c");
  LocalBucketSource by_size(root_, BundleLimits{1000, 100});
  auto listed = by_size.list(Loc("my-bucket", "lc/"));
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(listed.status().message()).find("larger than 1000 bytes"),
            std::string::npos)
      << listed.status();
  EXPECT_TRUE(by_size.read(Loc("my-bucket", "lc/"), "a.sh").ok());
  LocalBucketSource tiny(root_, BundleLimits{500, 100});
  EXPECT_EQ(tiny.read(Loc("my-bucket", "lc/"), "a.sh").status().code(),
            absl::StatusCode::kFailedPrecondition);

  LocalBucketSource by_count(root_, BundleLimits{1 << 20, 2});
  auto counted = by_count.list(Loc("my-bucket", "lc/"));
  EXPECT_EQ(counted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(counted.status().message()).find("more than 2 objects"),
            std::string::npos)
      << counted.status();
}

}  // namespace
}  // namespace hf::bundle
