// eks::ImageRegistry with the real docker-registry (skipped where it is not installed): it
// serves the OCI distribution API on its port, is started again when it dies, refuses a
// taken port, and stop() leaves no process.
#include "hyperfleet/eks/image_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/http/http_client.h"

namespace hf::eks {
namespace {
using ::testing::HasSubstr;

// A listening socket on an ephemeral port of 0.0.0.0; its port in *port.
int Listen(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// Calls `done` until it is true or 20 s passed (the registry needs time to listen).
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    ::usleep(50 * 1000);
  }
  return false;
}

int V2Status(uint16_t port) {
  http::HttpClient client(http::HttpClientOptions{"", true});
  http::HttpRequest get;
  get.method = "GET";
  get.target = "/v2/";
  auto r = client.Send("http://127.0.0.1:" + std::to_string(port), get, 2);
  return r.ok() ? r->status : -1;
}

class ImageRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FindProgram("docker-registry")) GTEST_SKIP() << "docker-registry not installed";
    dir_ = std::filesystem::temp_directory_path() /
           ("hf-registry-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST(RegistryConfigTest, StorageAndAddress) {
  const std::string c = RegistryConfig("/d/registry/storage", 5123);
  EXPECT_THAT(c, HasSubstr("rootdirectory: /d/registry/storage\n"));
  EXPECT_THAT(c, HasSubstr("addr: 0.0.0.0:5123\n"));
}

TEST_F(ImageRegistryTest, ServesRestartsAndStops) {
  uint16_t port = 0;
  ::close(Listen(&port));
  ImageRegistryOptions options{dir_.string(), port, "", 100, 400};
  auto registry = ImageRegistry::Start(options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE(Eventually([&] { return V2Status(port) == 200; }));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "storage"));
  const int first = (*registry)->pid();
  ASSERT_GT(first, 1);
  ::kill(first, SIGKILL);
  ASSERT_TRUE(Eventually([&] { return (*registry)->starts() == 2 && V2Status(port) == 200; }));
  const int second = (*registry)->pid();
  EXPECT_NE(second, first);
  (*registry)->stop();
  EXPECT_EQ(::kill(second, 0), -1);  // reaped: no such process
  EXPECT_EQ(V2Status(port), -1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "registry.pid"));
}

// A server killed with SIGKILL leaves its registry running on the port: the next start ends
// it (registry.pid, its command line naming this config) instead of finding the port taken.
TEST_F(ImageRegistryTest, RegistryLeftByAKilledServerIsEnded) {
  uint16_t port = 0;
  ::close(Listen(&port));
  const std::string config = (dir_ / "config.yml").string();
  ASSERT_TRUE(MakeDirs((dir_ / "storage").string()).ok());
  ASSERT_TRUE(
      WriteFileAtomically(config, RegistryConfig((dir_ / "storage").string(), port)).ok());
  ProcessSpec spec;
  spec.argv = {"docker-registry", "serve", config};
  spec.out = Stdio::Null();
  spec.err = Stdio::Null();
  auto left = Subprocess::Spawn(spec);
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_TRUE(WriteFileAtomically((dir_ / "registry.pid").string(),
                                  std::to_string(left->pid()) + "\n")
                  .ok());
  ASSERT_TRUE(Eventually([&] { return V2Status(port) == 200; }));
  auto registry = ImageRegistry::Start({dir_.string(), port, "", 100, 400});
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_TRUE(left->TryWait().has_value());  // ended (and reaped here, its parent)
  ASSERT_TRUE(Eventually([&] { return (*registry)->pid() > 1 && V2Status(port) == 200; }));
  EXPECT_NE((*registry)->pid(), left->pid());
}

TEST_F(ImageRegistryTest, TakenPortIsRefused) {
  uint16_t port = 0;
  const int fd = Listen(&port);
  auto registry = ImageRegistry::Start({dir_.string(), port, "", 100, 400});
  ::close(fd);
  ASSERT_FALSE(registry.ok());
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(registry.status().message(), HasSubstr(std::to_string(port)));
  EXPECT_THAT(registry.status().message(), HasSubstr("--registry-port"));
}

TEST_F(ImageRegistryTest, MissingProgramIsNotFound) {
  auto registry = ImageRegistry::Start({dir_.string(), 5000, "/nonexistent/docker-registry"});
  ASSERT_FALSE(registry.ok());
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hf::eks
