// The controller keeps a cluster's node records between passes while it looks at the cluster
// again soon, and reads only what changed since (Store::nodesChangedSince). Every write made
// between two passes by someone else (the API, an agent) must still reach the next plan:
// changed records, erased ones and new ones. Real SQLite (in memory), the fake provider.
#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/provider/fake_provider.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

using std::chrono::milliseconds;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

/// The fake provider, with nodes that run agents (the planner waits for their lifecycle
/// result and watches their heartbeats, so a settled cluster is looked at every second).
class AgentProvider final : public provider::Provider {
 public:
  explicit AgentProvider(provider::Provider& inner) : inner_(inner) {}
  std::string_view name() const override { return "agents"; }
  Status launch(const provider::InstanceSpec& spec) override { return inner_.launch(spec); }
  Status terminate(std::string_view id) override { return inner_.terminate(id); }
  Status reboot(std::string_view id) override { return inner_.reboot(id); }
  StatusOr<std::vector<provider::InstanceObservation>> list(std::string_view c) override {
    return inner_.list(c);
  }
  bool runsLifecycleScripts() const override { return true; }

 private:
  provider::Provider& inner_;
};

class KeptNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    provider::FakeProvider::Options o;
    o.boot_delay = milliseconds(500);
    fake_ = std::move(provider::FakeProvider::Create(clock_, o).value());
    agent_provider_ = std::make_unique<AgentProvider>(*fake_);
    store_ = std::move(store::OpenSqliteStore(":memory:").value());
  }

  void Start(bool agents) {
    provider_ = agents ? static_cast<provider::Provider*>(agent_provider_.get()) : fake_.get();
    ClusterController::AgentHooks hooks;
    hooks.liveness = [this](const std::string&) {
      ClusterController::ClusterLiveness view;
      const std::vector<model::Node> nodes = Nodes();
      for (const auto& n : nodes) view.nodes[n.instance_id] = {clock_.now(), std::nullopt};
      return view;
    };
    controller_ = std::make_unique<ClusterController>(*store_, *provider_, clock_, ids_,
                                                      ClusterController::Options{}, hooks);
    model::Cluster c;
    c.id = id_;
    c.name = "kept";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
    c.creation_time = clock_.now();
    c.groups = {plan_test::Group("workers", 3)};
    Commit([&](store::WriteBatch& b) { b.clusters.push_back({c}); });
  }

  void Commit(const std::function<void(store::WriteBatch&)>& fill) {
    store::WriteBatch b;
    fill(b);
    ASSERT_TRUE(store_->commit(b).ok());
  }

  /// Someone else (the API, an agent) changes node `i`'s record.
  void Change(size_t i, const std::function<void(model::Node&)>& fn) {
    model::Node n = Nodes().at(i);
    fn(n);
    Commit([&](store::WriteBatch& b) { b.nodes.push_back({n, n.revision}); });
  }

  bool Pass() {
    auto settled = controller_->reconcileOnce(id_);
    EXPECT_TRUE(settled.ok()) << settled.status();
    return settled.ok() && *settled;
  }

  std::vector<model::Node> Nodes() { return store_->nodes(id_).value(); }
  int Count(model::InstanceStatus status) {
    int n = 0;
    for (const auto& node : Nodes()) n += node.status == status;
    return n;
  }

  testing::FakeClock clock_;
  SequentialIdSource ids_{3};
  const std::string id_ = "kept00000001";
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<provider::FakeProvider> fake_;
  std::unique_ptr<AgentProvider> agent_provider_;
  provider::Provider* provider_ = nullptr;
  std::unique_ptr<ClusterController> controller_;
};

TEST_F(KeptNodesTest, ARecoveryRequestedBetweenPassesIsCarriedOut) {
  Start(/*agents=*/false);
  ASSERT_FALSE(Pass());  // launched, pending: looked at again soon
  clock_.advance(milliseconds(100));
  ASSERT_FALSE(Pass());  // still booting: the records are kept
  ASSERT_EQ(Count(is::kPending), 3);
  const std::string target = Nodes()[1].instance_id;
  Change(1, [&](model::Node& n) {
    n.recovery = model::NodeRecoveryRequest{model::NodeRecoveryRequest::Action::kReplace,
                                            "test", clock_.now()};
  });
  ASSERT_FALSE(Pass());
  const auto nodes = Nodes();
  ASSERT_EQ(nodes.size(), 4u);
  int successors = 0;
  for (const auto& n : nodes) {
    if (n.instance_id == target) {
      EXPECT_EQ(n.status, is::kShuttingDown);
    }
    successors += n.marks.replacement_of == target;
  }
  EXPECT_EQ(successors, 1);
}

TEST_F(KeptNodesTest, ARecordErasedBetweenPassesIsReplacedByItsGroup) {
  Start(/*agents=*/false);
  ASSERT_FALSE(Pass());
  clock_.advance(milliseconds(100));
  ASSERT_FALSE(Pass());
  const model::Node gone = Nodes()[0];
  Commit([&](store::WriteBatch& b) { b.nodes.push_back({gone, gone.revision, /*erase=*/true}); });
  ASSERT_FALSE(Pass());
  const auto nodes = Nodes();
  ASSERT_EQ(nodes.size(), 3u);  // a new record takes the erased one's place
  for (const auto& n : nodes) EXPECT_NE(n.instance_id, gone.instance_id);
  clock_.advance(milliseconds(600));
  for (int k = 0; k < 10 && !Pass(); ++k) clock_.advance(milliseconds(200));
  EXPECT_EQ(Count(is::kRunning), 3);
  EXPECT_EQ(store_->clusterById(id_)->status, cs::kInService);
}

// With agents: their lifecycle results arrive as writes between passes, and a settled
// cluster (watched every second) still sees a reboot asked through the API.
TEST_F(KeptNodesTest, AgentAndApiWritesReachAWatchedCluster) {
  Start(/*agents=*/true);
  ASSERT_FALSE(Pass());
  clock_.advance(milliseconds(600));
  ASSERT_FALSE(Pass());  // booted, the scripts not done: still Pending
  ASSERT_EQ(Count(is::kPending), 3);
  for (size_t i = 0; i < 3; ++i) {
    Change(i, [](model::Node& n) { n.lifecycle_state = ls::kSucceeded; });
  }
  clock_.advance(milliseconds(100));
  ASSERT_TRUE(Pass());
  ASSERT_EQ(Count(is::kRunning), 3);
  ASSERT_EQ(store_->clusterById(id_)->status, cs::kInService);
  clock_.advance(milliseconds(100));
  ASSERT_TRUE(Pass());  // nothing changed: the kept records serve
  Change(2, [&](model::Node& n) {
    n.recovery = model::NodeRecoveryRequest{model::NodeRecoveryRequest::Action::kReboot,
                                            "test", clock_.now()};
  });
  clock_.advance(milliseconds(100));
  Pass();
  const model::Node rebooted = Nodes()[2];
  EXPECT_EQ(rebooted.status, is::kPending);
  EXPECT_TRUE(rebooted.recovery_progress.started_at.has_value());
}

TEST(NodesChangedSince, IdsInOrderAndOnlyNewerRecords) {
  auto store = store::OpenSqliteStore(":memory:").value();
  model::Cluster c;
  c.id = "c1";
  c.name = "n";
  c.arn = "arn:c1";
  store::WriteBatch b;
  b.clusters.push_back({c});
  for (int i = 0; i < 3; ++i) {
    model::Node n;
    n.cluster_id = "c1";
    n.instance_id = "i-" + std::to_string(3 - i);  // ids against launch order
    n.launch_time = SystemTime{} + std::chrono::seconds(100 + i);
    b.nodes.push_back({n});
  }
  const int64_t first = store->commit(b).value();
  auto all = store->nodesChangedSince("c1", 0).value();
  EXPECT_EQ(all.ids, (std::vector<std::string>{"i-3", "i-2", "i-1"}));
  EXPECT_EQ(all.changed.size(), 3u);
  EXPECT_TRUE(store->nodesChangedSince("c1", first)->changed.empty());
  model::Node n = store->node("c1", "i-2").value();
  n.message = "changed";
  store::WriteBatch w;
  w.nodes.push_back({n, n.revision});
  const int64_t second = store->commit(w).value();
  auto since = store->nodesChangedSince("c1", first).value();
  EXPECT_EQ(since.ids.size(), 3u);
  ASSERT_EQ(since.changed.size(), 1u);
  EXPECT_EQ(since.changed[0].message, "changed");
  EXPECT_EQ(since.changed[0].revision, second);
  EXPECT_EQ(store->clusterById("c1")->revision, second);  // what the controller compares
  EXPECT_TRUE(store->nodesChangedSince("nope", 0)->ids.empty());
}

}  // namespace
}  // namespace hf::control
