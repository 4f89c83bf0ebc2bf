// The controller's timers (resync, in flight, liveness) run on the injected clock: a fake
// clock drives the real worker loop turn by turn (ClusterController::runOnce), as a
// simulator would. Real SQLite (in memory) and the fake provider.
#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/provider/fake_provider.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ControllerTimers, RequeueAfterFollowsThePlan) {
  const Duration active = milliseconds(100), liveness = seconds(1);
  ClusterPlan in_flight;
  in_flight.settled = false;
  in_flight.watch_liveness = true;
  EXPECT_EQ(RequeueAfter(in_flight, active, liveness), std::optional<Duration>(active));
  ClusterPlan watched;
  watched.settled = true;
  watched.watch_liveness = true;
  EXPECT_EQ(RequeueAfter(watched, active, liveness), std::optional<Duration>(liveness));
  ClusterPlan quiet;
  quiet.settled = true;
  EXPECT_EQ(RequeueAfter(quiet, active, liveness), std::nullopt);
}

class ControllerTimersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    provider::FakeProvider::Options o;
    o.boot_delay = milliseconds(500);
    provider_ = std::move(provider::FakeProvider::Create(clock_, o).value());
    store_ = std::move(store::OpenSqliteStore(":memory:").value());
    ClusterController::Options options;
    options.active_interval = milliseconds(100);
    options.resync_interval = seconds(10);
    controller_ = std::make_unique<ClusterController>(*store_, *provider_, clock_, ids_, options);
    model::Cluster c;
    c.id = ids_.clusterId();
    c.name = "timers";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
    c.creation_time = clock_.now();
    c.groups = {plan_test::Group("workers", 1)};
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    ASSERT_TRUE(store_->commit(b).ok());
    id_ = c.id;
  }

  std::string status() { return store_->clusterById(id_).value().status; }
  int64_t revision() { return store_->clusterById(id_).value().revision; }

  testing::FakeClock clock_;
  SequentialIdSource ids_{1};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<provider::FakeProvider> provider_;
  std::unique_ptr<ClusterController> controller_;
  std::string id_;
};

TEST_F(ControllerTimersTest, TheWorkerLoopRunsOnTheInjectedClock) {
  const SteadyTime t0 = clock_.monotonic();
  // The first turn resyncs: every stored cluster is reconciled (its node is launched).
  EXPECT_EQ(controller_->runOnce(), std::nullopt);
  EXPECT_EQ(provider_->sizeForTest(), 1u);
  // In flight: looked at again after active_interval of the clock's time, not before.
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + milliseconds(100)));
  const int64_t before = revision();
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + milliseconds(100)));
  EXPECT_EQ(revision(), before);
  // The node boots (500 ms); the requeue reconciles and the cluster settles.
  clock_.advance(milliseconds(600));
  EXPECT_EQ(controller_->runOnce(), std::nullopt);
  EXPECT_EQ(status(), model::cluster_status::kInService);
  // Settled, no agents to watch: nothing until the resync, 10 s after the first.
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + seconds(10)));
  clock_.advance(seconds(9));
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + seconds(10)));
  clock_.advance(seconds(1) - milliseconds(600));
  EXPECT_EQ(controller_->runOnce(), std::nullopt);  // the resync reconciles the cluster
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + seconds(20)));
  // enqueue() (an API write) is served at once, whatever the clock says.
  controller_->enqueue(id_);
  EXPECT_EQ(controller_->runOnce(), std::nullopt);
  EXPECT_EQ(controller_->runOnce(), std::optional<SteadyTime>(t0 + seconds(20)));
}

}  // namespace
}  // namespace hf::control
