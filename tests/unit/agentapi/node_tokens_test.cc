// NodeTokens: the token of a node is the hex of HMAC-SHA256(secret, instance id), and the
// fleet secret is created once (32 random bytes, mode 0600) and read back on later starts.
#include "hyperfleet/agentapi/node_tokens.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hf::agentapi {
namespace {

class NodeTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-node-tokens-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

int ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

TEST(NodeTokens, TokenIsLowercaseHexOfHmacSha256) {
  // python3: hmac.new(b'k'*32, b'i-0123456789abcdef0', hashlib.sha256).hexdigest()
  const NodeTokens tokens(std::string(32, 'k'));
  const std::string token = tokens.tokenFor("i-0123456789abcdef0");
  EXPECT_EQ(token, "a63c26815d2d71a7efc97cedc7336a66245a3155dceac73ff8b179e753908eda");
  EXPECT_TRUE(tokens.verify("i-0123456789abcdef0", token));
  EXPECT_FALSE(tokens.verify("i-0123456789abcdef1", token));
  EXPECT_FALSE(tokens.verify("i-0123456789abcdef0", token.substr(1)));
}

TEST_F(NodeTokensTest, CreatesTheSecretOnceAndReadsItBack) {
  const mode_t old = ::umask(0);  // the modes must not depend on the caller's umask
  const std::string path = dir_ + "/state/secrets/node-secret";
  auto first = NodeTokens::LoadOrCreate(path);
  ::umask(old);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(std::filesystem::file_size(path), 32u);
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(dir_ + "/state/secrets"), 0700);
  auto again = NodeTokens::LoadOrCreate(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tokenFor("i-1"), first->tokenFor("i-1"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/state/secrets"),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left behind
}

TEST_F(NodeTokensTest, RefusesASecretOfTheWrongSize) {
  const std::string path = dir_ + "/node-secret";
  std::ofstream(path) << "short";
  auto tokens = NodeTokens::LoadOrCreate(path);
  ASSERT_FALSE(tokens.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(tokens.status())) << tokens.status();
  EXPECT_NE(tokens.status().message().find("found 5 bytes"), std::string::npos);
}

}  // namespace
}  // namespace hf::agentapi
