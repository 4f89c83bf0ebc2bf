// The agent's heartbeats carry the health report (against a fake control plane on
// loopback), unless health checks are turned off.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/health.h"
#include "unit/agent/fake_control_plane.h"
#include "unit/agent/health_test_util.h"

namespace hf::agent {
namespace {

using health_test::TempDir;
using health_test::WriteText;
using json = nlohmann::json;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// The heartbeat carries the report

class HeartbeatHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cp_.Start());
    cp_.registration["heartbeat_seconds"] = 1;
    cp_.registration["lifecycle"]["run"] = false;
    // No GPU paths here, whatever the machine has.
    setenv("HF_NVML_LIBRARY", (dir_.path() + "/no-nvml.so").c_str(), 1);
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (done_.valid()) done_.wait();
    cp_.Stop();
    unsetenv("HF_NVML_LIBRARY");
  }
  AgentOptions Options() {
    AgentOptions o;
    o.url = cp_.url();
    o.instance_id = testing::FakeControlPlane::kInstanceId;
    o.token = testing::FakeControlPlane::kToken;
    o.root = dir_.path();
    o.boot_id = "test-boot";
    o.backoff_initial = 20ms;
    o.request_timeout_seconds = 5;
    return o;
  }
  void Start(AgentOptions o) {
    agent_ = std::make_unique<Agent>(std::move(o));
    done_ = std::async(std::launch::async, [this] { return agent_->Run(); });
  }
  TempDir dir_;
  testing::FakeControlPlane cp_;
  std::unique_ptr<Agent> agent_;
  std::future<Status> done_;
};

TEST_F(HeartbeatHealthTest, EveryHeartbeatCarriesTheReport) {
  WriteText(dir_.path() + "/proc/meminfo", "MemTotal: 1000000 kB\nMemAvailable: 10000 kB\n");
  // The control plane's clock is an hour ahead: the next report says so.
  {
    std::lock_guard<std::mutex> lock(cp_.mu());
    cp_.heartbeat_response = {{"time", ToEpochSeconds(std::chrono::system_clock::now()) + 3600}};
  }
  Start(Options());
  // Checks run on their own thread: a heartbeat carries the latest finished report, so the
  // skew shows in a report checked after the first response arrived (a later heartbeat).
  auto skew_in = [](const json& body) {
    if (!body.contains("health")) return false;
    for (const auto& f : body["health"]["findings"]) {
      if (f["check"] == "clock" && f["severity"] == "warning" &&
          f["message"].get<std::string>().find("skew beyond 30 s") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(cp_.WaitFor([&] {
    for (size_t k = 1; k < cp_.heartbeat_bodies.size(); ++k) {
      if (skew_in(cp_.heartbeat_bodies[k])) return true;
    }
    return false;
  }, 15s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(cp_.mu());
  const json& first = cp_.heartbeat_bodies[0];
  ASSERT_TRUE(first.contains("health")) << first.dump();
  const json& health = first["health"];
  EXPECT_EQ(health["verdict"], "warning") << health.dump();
  EXPECT_EQ(health["action"], "none");
  EXPECT_TRUE(health["checked_at"].is_number());
  bool memory = false, nvml = false;
  for (const auto& f : health["findings"]) {
    if (f["check"] == "memory") memory = f["severity"] == "warning";
    if (f["check"] == "nvml") nvml = f["message"].get<std::string>().starts_with("not present");
    EXPECT_NE(f["check"], "init");  // a test root never runs systemctl
  }
  EXPECT_TRUE(memory) << health.dump();
  EXPECT_TRUE(nvml) << health.dump();
  // The first report could not know the control plane's clock yet.
  EXPECT_FALSE(skew_in(first)) << first.dump();
  EXPECT_EQ(cp_.heartbeat_bodies[1]["files_revision"], 0);
}

TEST_F(HeartbeatHealthTest, HealthChecksCanBeTurnedOff) {
  AgentOptions o = Options();
  o.health_checks = false;
  Start(o);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_bodies.size() >= 1; }, 15s));
  agent_->Stop();
  ASSERT_EQ(done_.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(cp_.mu());
  EXPECT_FALSE(cp_.heartbeat_bodies[0].contains("health")) << cp_.heartbeat_bodies[0].dump();
}

}  // namespace
}  // namespace hf::agent
