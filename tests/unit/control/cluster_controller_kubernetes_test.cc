// The cluster controller's shell around EKS Nodes (cluster_controller_kubernetes.cc): the
// fault labels are read and written under the keys of Options::fault_labels. Real SQLite (in
// memory), the fake provider, a fake clock and recording control planes.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "fakes/fake_clock.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/provider/fake_provider.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

using std::chrono::milliseconds;
namespace nh = model::node_health;
using Request = model::NodeRecoveryRequest;

constexpr const char* kMarker = "hyperfleet/node-health-status";

/// Control planes that serve `nodes` and record each updateNode by Node name.
class RecordingPlanes : public eks::ControlPlanes {
 public:
  Status ensure(const eks::ControlPlaneSpec&) override { return absl::OkStatus(); }
  eks::ControlPlaneStatus status(std::string_view) override { return {}; }
  Status remove(std::string_view) override { return absl::OkStatus(); }
  std::vector<std::string> list() override { return {}; }
  StatusOr<eks::NodeJoin> nodeJoin(std::string_view, std::string_view) override {
    return absl::UnimplementedError("not in this test");
  }
  StatusOr<std::vector<eks::KubeNode>> nodes(std::string_view) override {
    std::lock_guard lock(mu);
    return kube_nodes;
  }
  Status updateNode(std::string_view, std::string_view node,
                    const eks::NodeUpdate& update) override {
    std::lock_guard lock(mu);
    updates[std::string(node)] = update;
    return absl::OkStatus();
  }
  Status removeNode(std::string_view, std::string_view) override { return absl::OkStatus(); }

  std::mutex mu;
  std::vector<eks::KubeNode> kube_nodes;
  std::map<std::string, eks::NodeUpdate> updates;
};

TEST(ControllerKubernetes, FaultLabelsAreSetAndRemovedUnderTheConfiguredKeys) {
  testing::FakeClock clock;
  SequentialIdSource ids{1};
  auto store = std::move(store::OpenSqliteStore(":memory:").value());
  provider::FakeProvider::Options po;
  po.boot_delay = milliseconds(100);
  auto provider = std::move(provider::FakeProvider::Create(clock, po).value());
  RecordingPlanes planes;
  ClusterController::Options options;
  options.fault_labels = {"example.com/ft", "example.com/fr", "example.com/fd"};
  ClusterControllerHooks hooks;
  hooks.kubernetes = &planes;
  ClusterController controller(*store, *provider, clock, ids, options, std::move(hooks));

  model::Cluster c;
  c.id = ids.clusterId();
  c.name = "hp";
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
  c.creation_time = clock.now();
  c.groups = {plan_test::Group("workers", 2)};
  c.spec = {{"Orchestrator",
             {{"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/k1"}}}}}};
  store::WriteBatch create;
  create.clusters.push_back({c, store::kMustNotExist, false});
  ASSERT_TRUE(store->commit(create).ok());
  for (int pass = 0; pass < 50; ++pass) {
    auto settled = controller.reconcileOnce(c.id);
    ASSERT_TRUE(settled.ok()) << settled.status();
    if (*settled) break;
    clock.advance(milliseconds(200));
  }
  ASSERT_EQ(store->clusterById(c.id).value().status, model::cluster_status::kInService);

  // Both joined (their scripts done); node 0 has a hardware fault being recovered by a
  // reboot; node 1's Node carries fault labels left from before, and both carry a label of
  // the default key, which is not this server's and stays untouched.
  std::vector<model::Node> nodes = store->nodes(c.id).value();
  ASSERT_EQ(nodes.size(), 2u);
  store::WriteBatch joined;
  for (model::Node& n : nodes) {
    n.lifecycle_state = model::lifecycle_state::kSucceeded;
    eks::KubeNode k;
    k.name = model::KubernetesNodeName(n.instance_id);
    k.ready = true;
    k.labels = {{nh::kLabel, nh::kSchedulable},
                {"sagemaker.amazonaws.com/fault-types", "NotOurs"}};
    k.annotations = {{kMarker, nh::kSchedulable}};
    planes.kube_nodes.push_back(k);
  }
  nodes[0].recovery = Request{Request::Action::kReboot, "Health check: gpu.xid: Xid 79",
                              clock.now(), false, Request::Source::kHardwareFault};
  planes.kube_nodes[1].labels["example.com/ft"] = "Dead";
  planes.kube_nodes[1].labels["example.com/fr"] = "old";
  planes.kube_nodes[1].annotations["example.com/fd"] = "old";
  for (const model::Node& n : nodes) joined.nodes.push_back({n, n.revision, false});
  ASSERT_TRUE(store->commit(joined).ok());

  ASSERT_TRUE(controller.reconcileOnce(c.id).ok());
  const std::string faulty = model::KubernetesNodeName(nodes[0].instance_id);
  const std::string healthy = model::KubernetesNodeName(nodes[1].instance_id);
  ASSERT_EQ(planes.updates.size(), 2u);

  eks::NodeUpdate want;
  want.set_labels = {{nh::kLabel, nh::kPendingReboot},
                     {"example.com/ft", "HardwareFault"},
                     {"example.com/fr", "Health-check-gpu.xid-Xid-79"}};
  want.set_annotations = {{kMarker, nh::kPendingReboot},
                          {"example.com/fd", "Health check: gpu.xid: Xid 79"}};
  want.set_taints = {{nh::kLabel, nh::kPendingReboot, "NoSchedule"}};
  EXPECT_EQ(planes.updates[faulty], want);

  want = {};
  want.set_labels = {{nh::kLabel, nh::kSchedulable}};
  want.remove_labels = {"example.com/ft", "example.com/fr"};
  want.set_annotations = {{kMarker, nh::kSchedulable}};
  want.remove_annotations = {"example.com/fd"};
  want.remove_taints = {{nh::kLabel, nh::kSchedulable, "NoSchedule"}};
  EXPECT_EQ(planes.updates[healthy], want);
}

}  // namespace
}  // namespace hf::control
