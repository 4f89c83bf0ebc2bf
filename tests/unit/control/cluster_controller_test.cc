// The cluster reconciler driven step by step: real SQLite (in memory), the fake provider and
// a fake clock. Each test states the declaration, advances time and asserts the end state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fakes/fake_clock.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/control/cluster_plan.h"
#include "plan_fixtures.h"
#include "hyperfleet/provider/fake_provider.h"

namespace hf::control {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
using Action = model::NodeRecoveryRequest::Action;

using plan_test::Group;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override { reopen(""); }

  void reopen(const std::string& state_file) {
    controller_.reset();
    provider::FakeProvider::Options o;
    o.boot_delay = milliseconds(500);
    o.terminate_delay = milliseconds(100);
    o.state_file = state_file;
    provider_ = std::move(provider::FakeProvider::Create(clock_, o).value());
    if (!store_) store_ = std::move(store::OpenSqliteStore(":memory:").value());
    controller_ = std::make_unique<ClusterController>(*store_, *provider_, clock_, ids_,
                                                      ClusterController::Options{});
  }

  std::string create(std::vector<model::InstanceGroup> groups, json spec = json::object()) {
    model::Cluster c;
    c.id = ids_.clusterId();
    c.name = "c" + c.id;
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
    c.creation_time = clock_.now();
    c.groups = std::move(groups);
    c.spec = std::move(spec);
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    EXPECT_TRUE(store_->commit(b).ok());
    return c.id;
  }

  /// Reconciles, advancing the clock by `step` between passes, until the cluster settles.
  void settle(const std::string& id, Duration step = milliseconds(200), int max_passes = 50) {
    for (int i = 0; i < max_passes; ++i) {
      auto settled = controller_->reconcileOnce(id);
      if (absl::IsNotFound(settled.status())) return;
      ASSERT_TRUE(settled.ok()) << settled.status();
      if (*settled) return;
      clock_.advance(step);
    }
    FAIL() << "cluster " << id << " did not settle";
  }

  std::vector<model::Node> nodes(const std::string& id) { return store_->nodes(id).value(); }
  model::Cluster cluster(const std::string& id) { return store_->clusterById(id).value(); }

  void update(const std::string& id, const std::function<void(model::Cluster&)>& fn) {
    auto c = cluster(id);
    fn(c);
    store::WriteBatch b;
    b.clusters.push_back({c, c.revision, false});
    ASSERT_TRUE(store_->commit(b).ok());
  }

  int count(const std::string& id, model::InstanceStatus status) {
    int n = 0;
    for (const auto& node : nodes(id)) n += node.status == status;
    return n;
  }

  testing::FakeClock clock_;
  SequentialIdSource ids_{1};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<provider::FakeProvider> provider_;
  std::unique_ptr<ClusterController> controller_;
};

TEST_F(ControllerTest, CreatingBecomesInServiceWhenEveryInstanceRuns) {
  auto id = create({Group("controller", 1), Group("workers", 2)});
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());
  EXPECT_EQ(count(id, is::kPending), 3);
  EXPECT_EQ(cluster(id).status, cs::kCreating);
  clock_.advance(milliseconds(600));
  settle(id);
  EXPECT_EQ(cluster(id).status, cs::kInService);
  EXPECT_EQ(count(id, is::kRunning), 3);
  for (const auto& n : nodes(id)) {

    EXPECT_TRUE(n.hostname.starts_with("ip-10-1-")) << n.hostname;
    EXPECT_EQ(n.lifecycle["OnCreate"], "on_create.sh");
  }
  auto events = store_->listEvents(id, {}).value();
  bool saw_in_service = false;
  for (const auto& e : events.items) saw_in_service |= e.description.ends_with("is InService");
  EXPECT_TRUE(saw_in_service);
}

TEST_F(ControllerTest, AFailedInstanceFailsTheClusterAndIsNamed) {
  provider_->failNextLaunchesForTest("workers", 1, "OnCreate exited with status 3");
  auto id = create({Group("controller", 1), Group("workers", 2)});
  settle(id);
  auto c = cluster(id);
  EXPECT_EQ(c.status, cs::kFailed);
  EXPECT_NE(c.failure_message.find("workers"), std::string::npos) << c.failure_message;
  EXPECT_NE(c.failure_message.find("OnCreate exited with status 3"), std::string::npos);
  EXPECT_EQ(count(id, is::kFailure), 1);
}

TEST_F(ControllerTest, ContinuousModeReplacesFailedInstances) {
  provider_->failNextLaunchesForTest("workers", 2, "boom");
  auto id = create({Group("workers", 2)}, {{"NodeProvisioningMode", "Continuous"}});
  settle(id);
  EXPECT_EQ(cluster(id).status, cs::kInService);
  EXPECT_EQ(count(id, is::kRunning), 2);
  EXPECT_EQ(nodes(id).size(), 2u);
}

TEST_F(ControllerTest, ScalingDownRemovesNewestInstancesAndUpRestoresCount) {
  auto id = create({Group("workers", 3)});
  settle(id);
  auto before = nodes(id);
  update(id, [](model::Cluster& c) {
    c.groups[0].target_count = 1;
    c.status = cs::kUpdating;
  });
  settle(id);
  EXPECT_EQ(cluster(id).status, cs::kInService);
  auto after = nodes(id);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(provider_->sizeForTest(), 1u);
  update(id, [](model::Cluster& c) {
    c.groups[0].target_count = 4;
    c.status = cs::kUpdating;
  });
  settle(id);
  EXPECT_EQ(count(id, is::kRunning), 4);
  // The survivor of the scale-down is still there: scale-up adds, never replaces.
  bool kept = false;
  for (const auto& n : nodes(id)) kept |= n.instance_id == after[0].instance_id;
  EXPECT_TRUE(kept);
}

TEST_F(ControllerTest, DeletingAGroupRemovesItsInstancesThenTheGroup) {
  auto id = create({Group("a", 1), Group("b", 2)});
  settle(id);
  update(id, [](model::Cluster& c) {
    c.groups.pop_back();
    c.groups_deleting = {"b"};
    c.status = cs::kUpdating;
  });
  settle(id);
  auto c = cluster(id);
  EXPECT_EQ(c.status, cs::kInService);
  EXPECT_TRUE(c.groups_deleting.empty());
  ASSERT_EQ(nodes(id).size(), 1u);
  EXPECT_EQ(nodes(id)[0].group, "a");
}

TEST_F(ControllerTest, DeleteLeavesNothingBehind) {
  auto id = create({Group("workers", 3)});
  settle(id);
  update(id, [](model::Cluster& c) { c.status = cs::kDeleting; });
  settle(id);
  EXPECT_TRUE(absl::IsNotFound(store_->clusterById(id).status()));
  EXPECT_EQ(provider_->sizeForTest(), 0u);
}

TEST_F(ControllerTest, AFailedUpdateRollsBackToTheInstancesThatRun) {
  auto id = create({Group("workers", 1)});
  settle(id);
  provider_->failNextLaunchesForTest("workers", 1, "no capacity");
  update(id, [](model::Cluster& c) {
    c.groups[0].target_count = 3;
    c.status = cs::kUpdating;
  });
  settle(id);
  auto c = cluster(id);
  EXPECT_EQ(c.status, cs::kInService);
  EXPECT_NE(c.failure_message.find("no capacity"), std::string::npos);
  EXPECT_EQ(c.groups[0].target_count, count(id, is::kRunning));
  EXPECT_EQ(count(id, is::kFailure), 0);
}

TEST_F(ControllerTest, AVanishedInstanceIsReportedAsFailure) {
  auto id = create({Group("workers", 2)});
  settle(id);
  provider_->killForTest(nodes(id)[0].instance_id);
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());
  EXPECT_EQ(count(id, is::kFailure), 1);
}

TEST_F(ControllerTest, ARestartedControlPlaneReadoptsInstances) {
  const std::string state =
      (std::filesystem::temp_directory_path() / ("hf-fake-" + std::to_string(getpid()))).string();
  std::filesystem::remove(state);
  reopen(state);
  auto id = create({Group("workers", 2)});
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());  // launched, still pending
  auto launched = nodes(id);
  reopen(state);  // new provider object and controller, same files
  clock_.advance(milliseconds(600));
  settle(id);
  auto running = nodes(id);
  ASSERT_EQ(running.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(running[i].instance_id, launched[i].instance_id);
  EXPECT_EQ(provider_->sizeForTest(), 2u);
  std::filesystem::remove(state);
}

// Node recovery as BatchRebootClusterNodes / BatchReplaceClusterNodes record it.
void RequestRecovery(store::Store& store, const std::string& cluster_id,
                     const std::string& instance_id, const std::string& action,
                     SystemTime now) {
  auto n = store.node(cluster_id, instance_id).value();
  n.recovery = model::NodeRecoveryRequest{action == "Reboot" ? Action::kReboot : Action::kReplace,
                                          "test", now};
  n.status = is::kPending;
  store::WriteBatch b;
  b.nodes.push_back({n, n.revision, false});
  ASSERT_TRUE(store.commit(b).ok());
}

TEST_F(ControllerTest, ReplaceKeepsLogicalIdAndAddressUnderANewInstanceId) {
  auto id = create({Group("workers", 2)});
  settle(id);
  ASSERT_EQ(cluster(id).status, cs::kInService);
  const model::Node old = nodes(id)[0];
  RequestRecovery(*store_, id, old.instance_id, "Replace", clock_.now());
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());
  // The old instance goes first; its successor waits for the address.
  auto after = nodes(id);
  ASSERT_EQ(after.size(), 3u);
  const model::Node* successor = nullptr;
  for (const auto& n : after) {
    if (n.instance_id == old.instance_id) {
      EXPECT_EQ(n.status, is::kShuttingDown);
    }
    if (n.instance_id != old.instance_id && n.logical_id == old.logical_id) successor = &n;
  }
  ASSERT_NE(successor, nullptr);
  const std::string new_id = successor->instance_id;
  EXPECT_EQ(successor->status, is::kPending);
  EXPECT_NE(successor->message.find("Replacing instance " + old.instance_id), std::string::npos);
  EXPECT_EQ(provider_->sizeForTest(), 2u);  // not launched while the old one is reported
  settle(id);
  EXPECT_EQ(cluster(id).status, cs::kInService);
  after = nodes(id);
  ASSERT_EQ(after.size(), 2u);
  bool found = false;
  for (const auto& n : after) {
    EXPECT_NE(n.instance_id, old.instance_id);
    if (n.instance_id != new_id) continue;
    found = true;
    EXPECT_EQ(n.status, is::kRunning);
    EXPECT_EQ(n.logical_id, old.logical_id);
    EXPECT_EQ(n.private_ip, old.private_ip);
    EXPECT_EQ(n.hostname, old.hostname);
    EXPECT_FALSE(n.recovery);
  }
  EXPECT_TRUE(found);
  const auto events = store_->listEvents(id, {}).value();
  bool event = false;
  for (const auto& e : events.items) {
    event |= e.description.find("Replacing instance " + old.instance_id + " with " + new_id) !=
             std::string::npos;
  }
  EXPECT_TRUE(event);
}

// What agents said about an instance is dropped once its record is erased (terminated),
// and everything about a cluster once the cluster is gone: nothing is kept for ever.
TEST_F(ControllerTest, ErasedNodesAndClustersAreForgottenByTheAgentHooks) {
  std::vector<std::string> forgotten;
  std::vector<std::string> clusters_gone;
  ClusterController::AgentHooks hooks;
  hooks.forget = [&](const std::string& cluster_id, const std::vector<std::string>& ids,
                     bool cluster_gone) {
    forgotten.insert(forgotten.end(), ids.begin(), ids.end());
    if (cluster_gone) clusters_gone.push_back(cluster_id);
  };
  controller_ = std::make_unique<ClusterController>(*store_, *provider_, clock_, ids_,
                                                    ClusterController::Options{},
                                                    std::move(hooks));
  auto id = create({Group("workers", 2)});
  settle(id);
  ASSERT_EQ(cluster(id).status, cs::kInService);
  EXPECT_TRUE(forgotten.empty());
  const model::Node old = nodes(id)[0];
  RequestRecovery(*store_, id, old.instance_id, "Replace", clock_.now());
  settle(id);
  EXPECT_EQ(forgotten, std::vector<std::string>{old.instance_id});
  EXPECT_TRUE(clusters_gone.empty());
  update(id, [](model::Cluster& c) { c.status = cs::kDeleting; });
  settle(id);
  // The workers may go one by one or with the cluster; either way the cluster is forgotten.
  EXPECT_EQ(clusters_gone, std::vector<std::string>{id});
}

TEST_F(ControllerTest, RebootKeepsTheInstanceAndEndsWhenItBootedAgain) {
  auto id = create({Group("workers", 1)});
  settle(id);
  const model::Node before = nodes(id)[0];
  RequestRecovery(*store_, id, before.instance_id, "Reboot", clock_.now());
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());
  auto n = nodes(id)[0];
  EXPECT_EQ(n.status, is::kPending);
  EXPECT_TRUE(n.recovery_progress.started_at);
  // Booting again (the fake's boot delay is 500 ms): still Pending.
  clock_.advance(milliseconds(200));
  ASSERT_TRUE(controller_->reconcileOnce(id).ok());
  EXPECT_EQ(nodes(id)[0].status, is::kPending);
  settle(id);
  n = nodes(id)[0];
  EXPECT_EQ(n.instance_id, before.instance_id);
  EXPECT_EQ(n.status, is::kRunning);
  EXPECT_FALSE(n.recovery);
  EXPECT_EQ(n.private_ip, before.private_ip);
}

TEST(PlanCluster, ARebootThatNeverBootsFailsTheNodeAfterTheTimeout) {
  ClusterSnapshot snap;
  snap.cluster.id = "abcdefabcdef";
  snap.cluster.name = "demo";
  snap.cluster.status = cs::kInService;
  snap.cluster.groups.push_back(Group("workers", 1));
  model::Node n;
  n.cluster_id = snap.cluster.id;
  n.instance_id = "i-0123456789abcdef0";
  n.group = "workers";
  n.status = is::kPending;
  const SystemTime t0 = FromEpochSeconds(1'800'000'000);
  n.recovery = model::NodeRecoveryRequest{Action::kReboot, "", t0};
  n.recovery_progress.started_at = t0;
  n.recovery_progress.asked_at = t0;
  snap.nodes.push_back(n);
  provider::InstanceObservation o;
  o.instance_id = n.instance_id;
  o.cluster_id = n.cluster_id;
  o.state = provider::InstanceState::kRunning;
  o.boot_time = t0 - std::chrono::hours(1);  // still the old boot
  snap.instances.push_back(o);
  snap.reboot_timeout = std::chrono::minutes(10);
  SequentialIdSource ids{1};
  // After 31 s the request is repeated as a power cycle (lost, or ignored by a hung
  // system); after the timeout the node fails.
  auto plan = PlanCluster(snap, t0 + std::chrono::seconds(31), ids);
  EXPECT_EQ(plan.hard_reboots, std::vector<std::string>{n.instance_id});
  EXPECT_TRUE(plan.reboots.empty());
  plan = PlanCluster(snap, t0 + std::chrono::minutes(11), ids);
  ASSERT_FALSE(plan.writes.nodes.empty());
  EXPECT_EQ(plan.writes.nodes.back().node.status, is::kFailure);
  EXPECT_NE(plan.writes.nodes.back().node.message.find("did not come back"), std::string::npos);
  EXPECT_TRUE(plan.reboots.empty());
  EXPECT_TRUE(plan.hard_reboots.empty());
}

TEST(PlanCluster, IsAPureFunctionOfSnapshotTimeAndIds) {
  ClusterSnapshot snap;
  snap.cluster.id = "abcdefabcdef";
  snap.cluster.name = "demo";
  snap.cluster.groups = {Group("workers", 3)};
  const SystemTime now = FromEpochSeconds(1000);
  SequentialIdSource a(5), b(5);
  auto p1 = PlanCluster(snap, now, a);
  auto p2 = PlanCluster(snap, now, b);
  ASSERT_EQ(p1.launches.size(), 3u);
  ASSERT_EQ(p2.launches.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p1.launches[i].instance_id, p2.launches[i].instance_id);
  EXPECT_EQ(p1.writes.nodes.size(), 3u);
  EXPECT_FALSE(p1.settled);
}

}  // namespace
}  // namespace hf::control

namespace hf::provider {
namespace {

TEST(FakeProviderState, AMalformedStateFileIsAnErrorNotACrash) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hf-fake-bad-" + std::to_string(getpid()))).string();
  for (const char* text : {R"({"instances":"x","next_ip":"y"})", R"({"instances":[1,null]})",
                           "not json"}) {
    {
      std::ofstream(path) << text;
    }
    testing::FakeClock clock;
    FakeProvider::Options o;
    o.state_file = path;
    auto p = FakeProvider::Create(clock, o);
    EXPECT_TRUE(absl::IsInternal(p.status())) << text << ": " << p.status();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hf::provider
