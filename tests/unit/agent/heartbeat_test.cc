// The heartbeat loop and its hooks (src/agent/heartbeat.h) against a fake control plane on
// loopback: what hooks add goes out, new files are written and confirmed at once, or only
// once the hook that had work on them says so, or not at all while a hook is busy.
#include "agent/heartbeat.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "hyperfleet/common/fs.h"
#include "unit/agent/fake_control_plane.h"

namespace hf::agent {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

/// A hook whose answers the test sets.
class FakeHook final : public HeartbeatHook {
 public:
  std::string_view Name() const override { return "fake"; }
  void Fill(agentapi::HeartbeatRequest& request) override {
    request.slurm_nodes = std::vector<agentapi::SlurmNode>{{"ip-a", "idle", 0, "", 0}};
  }
  void Take(const agentapi::HeartbeatResponse& response) override { ++taken; }
  bool ReadyForFiles() override { return ready; }
  bool FilesWritten(int64_t revision, const std::vector<agentapi::NodeFile>&) override {
    written_revision = revision;
    return confirm_at_once;
  }
  std::optional<int64_t> TakeConfirmed() override {
    const int64_t r = confirm.exchange(-1);
    if (r < 0) return std::nullopt;
    return r;
  }
  std::atomic<bool> ready{true};
  std::atomic<bool> confirm_at_once{false};
  std::atomic<int64_t> confirm{-1};
  std::atomic<int64_t> written_revision{-1};
  std::atomic<int> taken{0};
};

class HeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cp_.Start());
    root_ = std::filesystem::temp_directory_path() /
            ("hf-heartbeat-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    options_.url = cp_.url();
    options_.instance_id = testing::FakeControlPlane::kInstanceId;
    options_.token = testing::FakeControlPlane::kToken;
    options_.root = root_;
    options_.request_timeout_seconds = 5;
    cp_.heartbeat_response = {
        {"files_revision", 7},
        {"files", json::array({{{"path", "/etc/x.conf"}, {"mode", 0644}, {"content", "v7"}}})}};
  }
  void TearDown() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    cp_.Stop();
    std::filesystem::remove_all(root_);
  }
  void Start(FakeHook* hook) {
    std::vector<std::unique_ptr<HeartbeatHook>> hooks;
    hooks.emplace_back(hook);
    heartbeat_ = std::make_unique<Heartbeat>(
        options_, stop_,
        [this](std::chrono::milliseconds d) {
          std::unique_lock lock(mu_);
          cv_.wait_for(lock, d, [&] { return stop_.load(); });
          return !stop_.load();
        },
        std::move(hooks));
    thread_ = std::thread([this] { heartbeat_->Run(1, 3); });
  }
  std::vector<int64_t> Revisions() {
    std::lock_guard lock(cp_.mu());
    return cp_.heartbeat_revisions;
  }

  testing::FakeControlPlane cp_;
  std::string root_;
  AgentOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Heartbeat> heartbeat_;
  std::thread thread_;
};

TEST_F(HeartbeatTest, AHookConfirmsNewFilesWhenItsWorkIsDone) {
  auto* hook = new FakeHook;  // owned by the heartbeat
  Start(hook);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeats >= 2; }, 10s));
  EXPECT_EQ(ReadFile(root_ + "/etc/x.conf").value_or(""), "v7");
  EXPECT_EQ(hook->written_revision, 7);
  EXPECT_GE(hook->taken, 1);
  {
    std::lock_guard lock(cp_.mu());
    for (auto r : cp_.heartbeat_revisions) EXPECT_EQ(r, 3) << "confirmed before the hook said so";
    EXPECT_EQ(cp_.heartbeat_bodies[0]["slurm_nodes"][0]["name"], "ip-a");
  }
  hook->confirm = 7;
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_revisions.back() == 7; }, 10s));
}

TEST_F(HeartbeatTest, FilesAreConfirmedAtOnceWhenEveryHookAgrees) {
  auto* hook = new FakeHook;
  hook->confirm_at_once = true;
  Start(hook);
  // The first answer brings revision 7; the very next heartbeat (no interval) confirms it.
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeats >= 2; }, 10s));
  const auto revisions = Revisions();
  EXPECT_EQ(revisions[0], 3);
  EXPECT_EQ(revisions[1], 7);
}

TEST_F(HeartbeatTest, ABusyHookLeavesTheFilesForALaterAnswer) {
  auto* hook = new FakeHook;
  hook->ready = false;
  hook->confirm_at_once = true;
  Start(hook);
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeats >= 2; }, 10s));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/etc/x.conf"));
  EXPECT_EQ(hook->written_revision, -1);
  hook->ready = true;
  ASSERT_TRUE(cp_.WaitFor([&] { return cp_.heartbeat_revisions.back() == 7; }, 10s));
  EXPECT_EQ(ReadFile(root_ + "/etc/x.conf").value_or(""), "v7");
}

}  // namespace
}  // namespace hf::agent
