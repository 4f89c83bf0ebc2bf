#include "hyperfleet/cli/client_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace hf::cli {
namespace {

class ClientConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-client-XXXXXX";
    home_ = mkdtemp(tmpl);
    env_["HOME"] = home_;
    env_["HYPERFLEET_DATA_DIR"] = home_ + "/data";
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  EnvLookup Env() {
    return [this](std::string_view n) -> std::optional<std::string> {
      auto it = env_.find(std::string(n));
      if (it == env_.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
  }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
  std::string home_;
  std::map<std::string, std::string> env_;
};

TEST_F(ClientConfigTest, NoCredentialsIsAClearError) {
  auto c = ResolveClientConfig({}, LogsService(), Env());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(AwsErrorTypeOf(c.status()), "NoCredentialsError");
  EXPECT_NE(std::string(c.status().message()).find(home_ + "/data/credentials"),
            std::string::npos);
}

TEST_F(ClientConfigTest, DataDirCredentialsAndDefaults) {
  Write(home_ + "/data/credentials", "[default]\naws_access_key_id = AKIADATA\n"
                                     "aws_secret_access_key = s3cret\n");
  auto c = ResolveClientConfig({}, LogsService(), Env());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint_url, "http://127.0.0.1:9080");
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(c->key.access_key_id, "AKIADATA");
}

TEST_F(ClientConfigTest, PrecedenceOfEndpointRegionAndCredentials) {
  Write(home_ + "/.aws/credentials", "[default]\naws_access_key_id=AKIAFILE\n"
                                     "aws_secret_access_key=f\n[other]\n"
                                     "aws_access_key_id=AKIAOTHER\naws_secret_access_key=o\n");
  Write(home_ + "/.aws/config", "[profile other]\nregion = eu-west-1\n");
  env_["AWS_ENDPOINT_URL"] = "http://general:1";
  env_["AWS_ENDPOINT_URL_CLOUDWATCH_LOGS"] = "http://logs:2/";
  auto c = ResolveClientConfig({}, LogsService(), Env());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint_url, "http://logs:2");
  EXPECT_EQ(c->key.access_key_id, "AKIAFILE");
  c = ResolveClientConfig({}, SageMakerService(), Env());
  EXPECT_EQ(c->endpoint_url, "http://general:1");
  env_["AWS_PROFILE"] = "other";
  c = ResolveClientConfig({}, LogsService(), Env());
  EXPECT_EQ(c->key.access_key_id, "AKIAOTHER");
  EXPECT_EQ(c->region, "eu-west-1");
  env_["AWS_DEFAULT_REGION"] = "ap-south-1";
  env_["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "e";
  env_["AWS_SESSION_TOKEN"] = "tok";
  c = ResolveClientConfig({"http://flag:3", "us-east-2", "", ""}, LogsService(), Env());
  EXPECT_EQ(c->endpoint_url, "http://flag:3");
  EXPECT_EQ(c->region, "us-east-2");
  EXPECT_EQ(c->key.access_key_id, "AKIAENV");
  EXPECT_EQ(c->session_token, "tok");
  c = ResolveClientConfig({}, LogsService(), Env());
  EXPECT_EQ(c->region, "ap-south-1");
  env_["AWS_PROFILE"] = "missing";
  c = ResolveClientConfig({}, LogsService(), Env());
  EXPECT_EQ(AwsErrorTypeOf(c.status()), "ProfileNotFound");
  env_["AWS_PROFILE"] = "";
  EXPECT_FALSE(ResolveClientConfig({"ftp://x"}, LogsService(), Env()).ok());
}

TEST_F(ClientConfigTest, SharedCredentialsFileVariable) {
  Write(home_ + "/elsewhere", "[default]\naws_access_key_id=AKIAELSE\naws_secret_access_key=x\n");
  env_["AWS_SHARED_CREDENTIALS_FILE"] = home_ + "/elsewhere";
  auto c = ResolveClientConfig({}, LogsService(), Env());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->key.access_key_id, "AKIAELSE");
}

TEST(ClientCallTest, UnreachableEndpointIsUnavailable) {
  ClientConfig config{"http://127.0.0.1:1", "us-west-2", {"AKIA", "s"}, "", "test"};
  AwsJsonClient client(config, LogsService());
  auto r = client.Call("DescribeLogGroups", nlohmann::json::object(), 5);
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

TEST(ClientCallTest, DescribeCallErrorReadsLikeTheAwsCli) {
  Status s = WithAwsErrorType(absl::NotFoundError("The specified log group does not exist."),
                              "ResourceNotFoundException");
  EXPECT_EQ(DescribeCallError(s, "GetLogEvents"),
            "An error occurred (ResourceNotFoundException) when calling the GetLogEvents "
            "operation: The specified log group does not exist.");
  EXPECT_EQ(HostOfUrl("http://127.0.0.1:9080/x").value(), "127.0.0.1:9080");
}

}  // namespace
}  // namespace hf::cli
