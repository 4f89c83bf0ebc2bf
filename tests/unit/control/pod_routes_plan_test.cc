// The pod routes of an EKS-orchestrated cluster (docs/kubernetes.md "Pod networking"):
// DesiredPodRoutes as a table, and PlanCluster filling ClusterPlan::pod_routes only when it
// read the Nodes.
#include <gtest/gtest.h>

#include "hyperfleet/control/cluster_plan.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;
using provider::PodRoute;

model::Node NodeRec(std::string id, std::string ip, model::InstanceStatus status = is::kRunning) {
  model::Node n;
  n.cluster_id = "abcdefabcdef";
  n.instance_id = std::move(id);
  n.group = "workers";
  n.status = status;
  n.lifecycle_state = ls::kSucceeded;
  n.private_ip = std::move(ip);
  return n;
}

KubernetesNodeView View(std::string pod_cidr) {
  KubernetesNodeView v;
  v.ready = true;
  v.pod_cidr = std::move(pod_cidr);
  return v;
}

TEST(DesiredPodRoutesTest, Table) {
  struct Case {
    const char* what;
    std::vector<model::Node> nodes;
    std::map<std::string, KubernetesNodeView> views;
    std::vector<PodRoute> want;
  };
  const std::vector<Case> cases = {
      {"none", {}, {}, {}},
      {"two nodes, sorted by range",
       {NodeRec("i-a", "10.224.0.5"), NodeRec("i-b", "10.224.0.6")},
       {{"i-a", View("10.200.1.0/24")}, {"i-b", View("10.200.0.0/24")}},
       {{"10.200.0.0/24", "10.224.0.6"}, {"10.200.1.0/24", "10.224.0.5"}}},
      {"a Node without a range yet (or one outside the cluster's) gets none",
       {NodeRec("i-a", "10.224.0.5"), NodeRec("i-b", "10.224.0.6")},
       {{"i-a", View("")}, {"i-b", View("10.200.0.0/24")}},
       {{"10.200.0.0/24", "10.224.0.6"}}},
      {"an instance without a Node, and a Node of no instance of the cluster",
       {NodeRec("i-a", "10.224.0.5")},
       {{"i-other", View("10.200.3.0/24")}},
       {}},
      {"a node shutting down (its pods are going) loses its route",
       {NodeRec("i-a", "10.224.0.5", is::kShuttingDown), NodeRec("i-b", "10.224.0.6")},
       {{"i-a", View("10.200.1.0/24")}, {"i-b", View("10.200.0.0/24")}},
       {{"10.200.0.0/24", "10.224.0.6"}}},
      {"pending, failed and rebooting nodes keep theirs while their Node has a range",
       {NodeRec("i-a", "10.224.0.5", is::kPending), NodeRec("i-b", "10.224.0.6", is::kFailure)},
       {{"i-a", View("10.200.1.0/24")}, {"i-b", View("10.200.0.0/24")}},
       {{"10.200.0.0/24", "10.224.0.6"}, {"10.200.1.0/24", "10.224.0.5"}}},
      {"no address yet, or not IPv4: no route",
       {NodeRec("i-a", ""), NodeRec("i-b", "fd00::1")},
       {{"i-a", View("10.200.1.0/24")}, {"i-b", View("10.200.0.0/24")}},
       {}},
      {"one range claimed twice goes to the lower instance id",
       {NodeRec("i-b", "10.224.0.6"), NodeRec("i-a", "10.224.0.5")},
       {{"i-a", View("10.200.1.0/24")}, {"i-b", View("10.200.1.0/24")}},
       {{"10.200.1.0/24", "10.224.0.5"}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DesiredPodRoutes(c.nodes, c.views), c.want) << c.what;
  }
}

ClusterSnapshot Snapshot() {
  ClusterSnapshot snap;
  snap.cluster.id = "abcdefabcdef";
  snap.cluster.name = "demo";
  snap.cluster.status = cs::kInService;
  snap.cluster.groups = {plan_test::Group("workers", 1)};
  snap.cluster.spec = {
      {"Orchestrator",
       {{"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/k1"}}}}}};
  snap.nodes = {NodeRec("i-000000000000000a0", "10.224.0.5")};
  snap.nodes[0].logical_id = "workers-0";
  snap.nodes[0].instance_type = "ml.c5.xlarge";
  snap.nodes[0].revision = 1;
  provider::InstanceObservation o;
  o.instance_id = snap.nodes[0].instance_id;
  o.cluster_id = snap.cluster.id;
  o.state = provider::InstanceState::kRunning;
  o.private_ip = "10.224.0.5";
  snap.instances = {o};
  return snap;
}

TEST(PlanClusterPodRoutesTest, SetOnlyWhenTheNodesWereRead) {
  SequentialIdSource ids{1};
  const SystemTime now = FromEpochSeconds(1'800'000'000);
  ClusterSnapshot snap = Snapshot();
  EXPECT_FALSE(PlanCluster(snap, now, ids).pod_routes.has_value());  // not read: no change
  snap.kubernetes_nodes.emplace();
  auto none = PlanCluster(snap, now, ids).pod_routes;
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());  // read, no Node: every route of ours goes
  (*snap.kubernetes_nodes)[snap.nodes[0].instance_id] = View("10.200.4.0/24");
  EXPECT_EQ(PlanCluster(snap, now, ids).pod_routes,
            (std::vector<PodRoute>{{"10.200.4.0/24", "10.224.0.5"}}));
  snap.cluster.status = cs::kDeleting;  // the network goes with the cluster instead
  EXPECT_FALSE(PlanCluster(snap, now, ids).pod_routes.has_value());
}

}  // namespace
}  // namespace hf::control
