// The agent against a control plane over TLS (as `hyperfleet server --agent-listen` serves
// it to machines): the pinned certificate is the only one it talks to, and its token never
// leaves otherwise. Real TLS on loopback, real files.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/env_file.h"
#include "hyperfleet/http/tls_identity.h"
#include "unit/agent/fake_control_plane.h"

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using testing::FakeControlPlane;
using namespace std::chrono_literals;

constexpr const char* kPin = "3b1f5e2a9c0d4e6f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f";

class AgentTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-agent-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto identity = http::LoadOrCreateTlsIdentity(root_ + "/agent-tls", "127.0.0.1");
    ASSERT_TRUE(identity.ok()) << identity.status();
    identity_ = *identity;
    ASSERT_TRUE(cp_.Start(0, identity_.certificate_pem, identity_.private_key_pem))
        << cp_.last_error;
    ASSERT_EQ(cp_.url().rfind("https://", 0), 0u);
    cp_.bundle["on_create.sh"] = "#!/bin/sh\necho created over tls\n";
    cp_.registration["heartbeat_seconds"] = 1;
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (done_.valid()) done_.wait();
    cp_.Stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  AgentOptions Options() {
    AgentOptions o;
    o.url = cp_.url();
    o.cert_sha256 = identity_.sha256;
    o.instance_id = FakeControlPlane::kInstanceId;
    o.token = FakeControlPlane::kToken;
    o.root = root_ + "/node";
    o.boot_id = "test-boot";
    o.backoff_initial = 20ms;
    o.backoff_max = 100ms;
    o.request_timeout_seconds = 5;
    o.health_checks = false;
    return o;
  }

  void StartAgent(AgentOptions options) {
    agent_ = std::make_unique<Agent>(std::move(options));
    done_ = std::async(std::launch::async, [this] { return agent_->Run(); });
  }

  int RequestsSeen() {
    std::lock_guard<std::mutex> lock(cp_.mu());
    return static_cast<int>(cp_.paths.size());
  }

  std::string root_;
  http::TlsIdentity identity_;
  FakeControlPlane cp_;
  std::unique_ptr<Agent> agent_;
  std::future<Status> done_;
};

TEST_F(AgentTlsTest, PinnedAgentRegistersRunsItsScriptsAndHeartbeatsOverTls) {
  StartAgent(Options());
  ASSERT_TRUE(cp_.WaitFor([&] {
    return cp_.registrations >= 1 && cp_.heartbeats >= 1 && !cp_.reports.empty() &&
           cp_.reports.back().value("state", "") == "Succeeded";
  })) << "registrations " << cp_.registrations << ", heartbeats " << cp_.heartbeats;
  agent_->Stop();
  EXPECT_TRUE(done_.get().ok());
  const auto lines = cp_.LogMessages();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "created over tls"), lines.end());
  EXPECT_EQ(cp_.forbidden, 0);
}

TEST_F(AgentTlsTest, AnotherCertificateGetsNoRequestAndSoNoToken) {
  // The agent's log says why it cannot register; capture it to know it has tried.
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("agent-tls-test", ring));
  AgentOptions options = Options();
  options.cert_sha256 = kPin;  // a well-formed pin of some other certificate
  StartAgent(options);
  auto failures = [&] {
    int n = 0;
    for (const auto& line : ring->last_formatted()) {
      if (line.find("register with") != std::string::npos &&
          line.find(identity_.sha256) != std::string::npos) {
        ++n;
      }
    }
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (failures() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  const auto logged = ring->last_formatted();
  agent_->Stop();
  done_.wait();
  spdlog::set_default_logger(previous);
  EXPECT_GE(failures(), 3) << (logged.empty() ? "nothing logged" : logged.back());
  EXPECT_EQ(RequestsSeen(), 0);  // nothing reached the handler: no token was sent
  EXPECT_EQ(cp_.registrations, 0);
}

TEST_F(AgentTlsTest, HttpsWithoutAPinIsRefusedBeforeAnyConnection) {
  AgentOptions options = Options();
  options.cert_sha256.clear();
  StartAgent(options);
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  const Status status = done_.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("HF_AGENT_CERT_SHA256"), std::string::npos);
  EXPECT_EQ(RequestsSeen(), 0);
}

class AgentEnvTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-agent-env-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status Load(const std::string& text, AgentOptions* options) {
    const std::string path = dir_ + "/agent.env";
    std::ofstream(path) << "HF_INSTANCE_ID=i-1\nHF_AGENT_TOKEN=t\n" << text;
    return LoadAgentEnv(path, options);
  }

  std::string dir_;
};

TEST_F(AgentEnvTlsTest, ReadsThePinAsHexOrAsOpensslPrintsIt) {
  AgentOptions options;
  ASSERT_TRUE(Load(std::string("HF_AGENT_URL=https://192.0.2.1:9443\nHF_AGENT_CERT_SHA256=") +
                       kPin + "\n",
                   &options)
                  .ok());
  EXPECT_EQ(options.url, "https://192.0.2.1:9443");
  EXPECT_EQ(options.cert_sha256, kPin);

  std::string colons;  // "3B:1F:..." as `openssl x509 -fingerprint -sha256` prints it
  for (std::size_t i = 0; i < 64; i += 2) {
    if (i) colons += ':';
    colons += static_cast<char>(std::toupper(kPin[i]));
    colons += static_cast<char>(std::toupper(kPin[i + 1]));
  }
  ASSERT_TRUE(
      Load("HF_AGENT_URL=https://h:1\nHF_AGENT_CERT_SHA256=" + colons + "\n", &options).ok());
  EXPECT_EQ(options.cert_sha256, kPin);

  // The local provider's plain http on its bridge: no pin.
  ASSERT_TRUE(Load("HF_AGENT_URL=http://10.224.4.1:9081\n", &options).ok());
  EXPECT_EQ(options.cert_sha256, "");
}

TEST_F(AgentEnvTlsTest, RefusesWhatWouldSendTheTokenUnprotected) {
  AgentOptions options;
  struct Case {
    std::string env;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"HF_AGENT_URL=https://192.0.2.1:9443\n", "HF_AGENT_CERT_SHA256 is missing"},
      {std::string("HF_AGENT_URL=http://192.0.2.1:9443\nHF_AGENT_CERT_SHA256=") + kPin + "\n",
       "clear text"},
      {"HF_AGENT_URL=https://192.0.2.1:9443\nHF_AGENT_CERT_SHA256=abcd\n", "64 hex digits"},
      {"HF_AGENT_URL=https://192.0.2.1:9443\nHF_AGENT_CERT_SHA256=" + std::string(64, 'g') +
           "\n",
       "64 hex digits"},
      {"HF_AGENT_URL=ftp://192.0.2.1\n", "http:// or https://"},
  };
  for (const auto& c : cases) {
    const Status status = Load(c.env, &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.env;
    EXPECT_NE(std::string(status.message()).find(c.named), std::string::npos)
        << c.env << ": " << status;
  }
}

}  // namespace
}  // namespace hf::agent
