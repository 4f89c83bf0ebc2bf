// PlanCluster on EKS-orchestrated clusters (docs/kubernetes.md "Health on Nodes"): each
// Node's health label and NoSchedule taint follow its instance, and a user's
// UnschedulablePendingReplacement / ...PendingReboot label asks for that node recovery once.
#include <gtest/gtest.h>

#include <algorithm>

#include "hyperfleet/control/cluster_plan.h"
#include "plan_fixtures.h"

namespace hf::control {
namespace {

using std::chrono::seconds;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;
namespace nh = node_health;
using provider::InstanceState;
using Action = model::NodeRecoveryRequest::Action;
using Source = model::NodeRecoveryRequest::Source;

const SystemTime kT0 = FromEpochSeconds(1'800'000'000);

/// An InService EKS-orchestrated cluster of two Running workers whose Nodes are Ready,
/// Schedulable and marked so by Hyperfleet.
struct Fixture {
  ClusterSnapshot snap;
  SequentialIdSource ids{100};

  explicit Fixture(std::string node_recovery = "Automatic") {
    snap.cluster.id = "abcdefabcdef";
    snap.cluster.name = "demo";
    snap.cluster.status = cs::kInService;
    snap.cluster.groups = {plan_test::Group("workers", 2)};
    snap.cluster.spec = {
        {"NodeRecovery", node_recovery},
        {"Orchestrator",
         {{"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/k1"}}}}}};
    snap.lifecycle_by_agent = true;
    snap.kubernetes_nodes.emplace();
    for (int k = 0; k < 2; ++k) {
      model::Node n;
      n.cluster_id = snap.cluster.id;
      n.instance_id = "i-00000000000000000" + std::to_string(k);
      n.logical_id = "workers-" + std::to_string(k);
      n.group = "workers";
      n.instance_type = "ml.c5.xlarge";
      n.status = is::kRunning;
      n.lifecycle_state = ls::kSucceeded;
      n.launch_time = kT0 - std::chrono::hours(1);
      n.private_ip = "10.1.0." + std::to_string(k + 2);
      n.revision = 1;
      provider::InstanceObservation o;
      o.instance_id = n.instance_id;
      o.cluster_id = n.cluster_id;
      o.state = InstanceState::kRunning;
      o.private_ip = n.private_ip;
      o.boot_time = n.launch_time;
      snap.instances.push_back(o);
      snap.liveness[n.instance_id].last_heard = kT0;
      (*snap.kubernetes_nodes)[n.instance_id] = {true, nh::kSchedulable, nh::kSchedulable, "", ""};
      snap.nodes.push_back(n);
    }
  }
  KubernetesNodeView& view(int k) { return (*snap.kubernetes_nodes)[snap.nodes[k].instance_id]; }
  ClusterPlan plan(SystemTime at = kT0 + seconds(1)) { return PlanCluster(snap, at, ids); }
};

const model::Node* Written(const ClusterPlan& p, const std::string& instance_id) {
  for (const auto& w : p.writes.nodes) {
    if (w.node.instance_id == instance_id && !w.erase) return &w.node;
  }
  return nullptr;
}

TEST(KubernetesPlan, NodesInStepAreLeftAlone) {
  Fixture f;
  const ClusterPlan p = f.plan();
  EXPECT_TRUE(p.kubernetes_health.empty());
  EXPECT_TRUE(p.writes.nodes.empty());
  EXPECT_TRUE(p.settled);
}

TEST(KubernetesPlan, WithoutAViewOfTheNodesNothingIsLabelled) {
  Fixture f;
  f.view(0).health = nh::kPendingReplacement;  // would be a request
  f.snap.kubernetes_nodes.reset();
  const ClusterPlan p = f.plan();
  EXPECT_TRUE(p.kubernetes_health.empty());
  EXPECT_TRUE(p.writes.nodes.empty());
}

TEST(KubernetesPlan, ANewlyJoinedNodeGetsHyperfleetsMarkBesideTheKubeletsLabel) {
  Fixture f;
  f.view(1).health_set = "";  // the kubelet's --node-labels only
  const ClusterPlan p = f.plan();
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[1].instance_id, nh::kSchedulable, false}));
}

TEST(KubernetesPlan, ADeadNodeIsLabelledPendingReplacementAndTaintedAsItIsReplaced) {
  Fixture f;
  f.snap.instances[0].state = InstanceState::kFailed;
  f.snap.instances[0].message = "stopped";
  const ClusterPlan p = f.plan();
  EXPECT_EQ(p.kills, std::vector<std::string>{f.snap.nodes[0].instance_id});
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kPendingReplacement, true}));
}

TEST(KubernetesPlan, AFaultWithNodeRecoveryNoneIsShownButNotActedOn) {
  Fixture f("None");
  model::HealthReport r;
  r.verdict = model::HealthSeverity::kHardFault;
  r.checked_at = kT0;
  r.findings.push_back({"gpu.xid", model::HealthSeverity::kHardFault,
                        model::HealthAction::kReplace, "Xid 79"});
  f.snap.liveness[f.snap.nodes[1].instance_id].health = r;
  const ClusterPlan p = f.plan();
  EXPECT_TRUE(p.kills.empty());
  EXPECT_TRUE(p.terminations.empty());
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[1].instance_id, nh::kPendingReplacement, true}));
}

TEST(KubernetesPlan, AUsersPendingReplacementLabelReplacesTheNodeOnce) {
  Fixture f;
  f.view(1).health = nh::kPendingReplacement;  // kubectl label --overwrite
  ClusterPlan p = f.plan();
  const model::Node* n = Written(p, f.snap.nodes[1].instance_id);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->status, is::kShuttingDown);  // replaced in the same pass
  EXPECT_EQ(p.terminations, std::vector<std::string>{f.snap.nodes[1].instance_id});
  EXPECT_TRUE(std::any_of(p.writes.events.begin(), p.writes.events.end(), [](const auto& e) {
    return e.description.find("was labelled sagemaker.amazonaws.com/node-health-status="
                              "UnschedulablePendingReplacement") != std::string::npos;
  }));
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0].health, nh::kPendingReplacement);
  EXPECT_TRUE(p.kubernetes_health[0].tainted);
}

TEST(KubernetesPlan, AUsersPendingRebootLabelRebootsAndTheNodeIsSchedulableAfter) {
  Fixture f;
  f.view(0).health = nh::kPendingReboot;
  ClusterPlan p = f.plan();
  const model::Node* n = Written(p, f.snap.nodes[0].instance_id);
  ASSERT_NE(n, nullptr);
  ASSERT_TRUE(n->recovery.has_value());
  EXPECT_EQ(n->recovery->action, Action::kReboot);
  EXPECT_EQ(n->recovery->source, Source::kKubernetesLabel);
  EXPECT_EQ(p.reboots, std::vector<std::string>{f.snap.nodes[0].instance_id});
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kPendingReboot, true}));

  // The reboot done (the record Running again, no request), the Node still shows the label
  // Hyperfleet set: it is Schedulable again, and no second reboot is asked.
  f.snap.nodes[0] = *n;
  f.snap.nodes[0].recovery.reset();
  f.snap.nodes[0].status = is::kRunning;
  f.view(0) = {true, nh::kPendingReboot, nh::kPendingReboot, nh::kPendingReboot, ""};
  p = f.plan();
  EXPECT_TRUE(p.reboots.empty());
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kSchedulable, false}));
}

TEST(KubernetesPlan, OtherLabelValuesAskForNothing) {
  Fixture f;
  f.view(0).health = "Whatever";
  f.view(1).health = nh::kUnschedulable;
  const ClusterPlan p = f.plan();
  EXPECT_TRUE(p.reboots.empty());
  EXPECT_TRUE(p.terminations.empty());
  // Both are put back as Hyperfleet has them.
  ASSERT_EQ(p.kubernetes_health.size(), 2u);
  EXPECT_EQ(p.kubernetes_health[0].health, nh::kSchedulable);
  EXPECT_EQ(p.kubernetes_health[1].health, nh::kSchedulable);
}

TEST(KubernetesPlan, GroupsWithDeepHealthChecksStayUnschedulableAndTainted) {
  Fixture f;
  f.snap.cluster.groups[0].spec["OnStartDeepHealthChecks"] = {"InstanceStress"};
  f.view(0) = {true, nh::kUnschedulable, "", nh::kUnschedulable, ""};  // as the kubelet joined
  f.view(1) = {true, nh::kUnschedulable, nh::kUnschedulable, nh::kUnschedulable, ""};
  const ClusterPlan p = f.plan();
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kUnschedulable, true}));
}

}  // namespace
}  // namespace hf::control
