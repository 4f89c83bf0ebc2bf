// PlanCluster on EKS-orchestrated clusters (docs/kubernetes.md "Health on Nodes"): each
// Node's health label and NoSchedule taint follow its instance, and a user's
// UnschedulablePendingReplacement / ...PendingReboot label asks for that node recovery once.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

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
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kPendingReplacement, true,
                                  "Dead", "The-instance-stopped-stopped",
                                  "The instance stopped: stopped"}));
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
            (KubernetesNodeHealth{f.snap.nodes[1].instance_id, nh::kPendingReplacement, true,
                                  "HardwareFault", "Health-check-gpu.xid-Xid-79",
                                  "Health check: gpu.xid: Xid 79"}));
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

// ---- HyperPod's fault labels (KubernetesNodeHealth::fault_*) ----

namespace fault_labels {

/// A health report of one failing check.
model::HealthReport Report(model::HealthSeverity severity, std::string check,
                           std::string message) {
  model::HealthReport r;
  r.verdict = severity;
  r.checked_at = kT0;
  r.findings.push_back({std::move(check), severity, model::HealthAction::kNone,
                        std::move(message)});
  return r;
}

/// Node 0 as each faulty case leaves it in the pass that detects it: the health label, and
/// the fault labels it must have.
TEST(KubernetesFaultLabels, EachFaultShowsItsKindReasonAndDetails) {
  struct Case {
    std::string name;
    std::function<void(Fixture&)> make;
    KubernetesNodeHealth want;  // instance_id filled in below
  };
  const std::vector<Case> cases = {
      {"dead: replaced",
       [](Fixture& f) {
         f.snap.instances[0].state = InstanceState::kFailed;
         f.snap.instances[0].message = "killed (signal 9)";
       },
       {"", nh::kPendingReplacement, true, "Dead", "The-instance-stopped-killed-signal-9",
        "The instance stopped: killed (signal 9)"}},
      {"hung: replaced",
       [](Fixture& f) {
         f.snap.liveness[f.snap.nodes[0].instance_id].last_heard = kT0 - seconds(60);
       },
       {"", nh::kPendingReplacement, true, "Unresponsive",
        "No-heartbeat-from-the-node-agent-for-61-s-while-the-instance-ru",
        "No heartbeat from the node agent for 61 s while the instance runs (hung)."}},
      {"hardware fault: replaced",
       [](Fixture& f) {
         f.snap.liveness[f.snap.nodes[0].instance_id].health =
             Report(model::HealthSeverity::kHardFault, "gpu.xid", "Xid 79");
       },
       {"", nh::kPendingReplacement, true, "HardwareFault", "Health-check-gpu.xid-Xid-79",
        "Health check: gpu.xid: Xid 79"}},
      {"software fault: rebooted",
       [](Fixture& f) {
         f.snap.liveness[f.snap.nodes[0].instance_id].health =
             Report(model::HealthSeverity::kSoftFault, "kubelet", "not running");
       },
       {"", nh::kPendingReboot, true, "SoftwareFault", "Health-check-kubelet-not-running",
        "Health check: kubelet: not running"}},
      {"software fault, NodeRecovery None: only shown",
       [](Fixture& f) {
         f.snap.cluster.spec["NodeRecovery"] = "None";
         f.snap.liveness[f.snap.nodes[0].instance_id].health =
             Report(model::HealthSeverity::kSoftFault, "kubelet", "not running");
       },
       {"", nh::kPendingReboot, true, "SoftwareFault", "Health-check-kubelet-not-running",
        "Health check: kubelet: not running"}},
      {"BatchRebootClusterNodes: no fault",
       [](Fixture& f) {
         f.snap.nodes[0].recovery =
             model::NodeRecoveryRequest{Action::kReboot, "", kT0, false, Source::kApi};
       },
       {"", nh::kPendingReboot, true, "", "", ""}},
      {"a user's PendingReplacement label: no fault",
       [](Fixture& f) { f.view(0).health = nh::kPendingReplacement; },
       {"", nh::kPendingReplacement, true, "", "", ""}},
      {"a user's PendingReboot label: no fault",
       [](Fixture& f) { f.view(0).health = nh::kPendingReboot; },
       {"", nh::kPendingReboot, true, "", "", ""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Fixture f;
    c.make(f);
    const ClusterPlan p = f.plan();
    KubernetesNodeHealth want = c.want;
    want.instance_id = f.snap.nodes[0].instance_id;
    ASSERT_EQ(p.kubernetes_health.size(), 1u);
    EXPECT_EQ(p.kubernetes_health[0], want);
    EXPECT_LE(p.kubernetes_health[0].fault_reason.size(), 63u);
  }
}

TEST(KubernetesFaultLabels, RemovedWhenTheRebootedNodeIsSchedulableAgain) {
  Fixture f;
  f.snap.liveness[f.snap.nodes[0].instance_id].health =
      Report(model::HealthSeverity::kSoftFault, "kubelet", "not running");
  ClusterPlan p = f.plan();
  ASSERT_EQ(p.reboots, std::vector<std::string>{f.snap.nodes[0].instance_id});
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  const KubernetesNodeHealth shown = p.kubernetes_health[0];
  const model::Node* n = Written(p, f.snap.nodes[0].instance_id);
  ASSERT_NE(n, nullptr);

  // While it reboots, the Node as labelled: nothing more to do.
  f.snap.nodes[0] = *n;
  f.view(0) = {true, nh::kPendingReboot, nh::kPendingReboot, nh::kPendingReboot, "",
               shown.fault_type, shown.fault_reason, shown.fault_details};
  p = f.plan(kT0 + seconds(2));
  EXPECT_TRUE(p.kubernetes_health.empty());

  // Booted again (a new boot time): Schedulable, and the fault labels go.
  f.snap.instances[0].boot_time = kT0 + seconds(3);
  f.snap.liveness[f.snap.nodes[0].instance_id].last_heard = kT0 + seconds(4);
  p = f.plan(kT0 + seconds(4));
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[0].instance_id, nh::kSchedulable, false}));
}

TEST(KubernetesFaultLabels, AReplacedNodeKeepsItsLabelsUntilItsNodeGoes) {
  Fixture f;
  f.snap.instances[0].state = InstanceState::kFailed;
  f.snap.instances[0].message = "killed";
  ClusterPlan p = f.plan();
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  const KubernetesNodeHealth shown = p.kubernetes_health[0];
  EXPECT_EQ(shown.fault_type, "Dead");
  // The next pass: the record is ShuttingDown, its recovery ended, its replacement pending;
  // its Node (not removed yet) shows what the last pass set.
  for (const auto& w : p.writes.nodes) {
    if (w.node.instance_id == f.snap.nodes[0].instance_id) {
      f.snap.nodes[0] = w.node;
    } else if (w.node.instance_id != f.snap.nodes[1].instance_id) {
      f.snap.nodes.push_back(w.node);
    }
  }
  ASSERT_EQ(f.snap.nodes.size(), 3u);
  ASSERT_EQ(f.snap.nodes[0].status, is::kShuttingDown);
  ASSERT_FALSE(f.snap.nodes[0].recovery.has_value());
  f.view(0) = {false, nh::kPendingReplacement, nh::kPendingReplacement,
               nh::kPendingReplacement, "", shown.fault_type, shown.fault_reason,
               shown.fault_details};
  p = f.plan(kT0 + seconds(2));
  EXPECT_TRUE(p.kubernetes_health.empty());
}

TEST(KubernetesFaultLabels, StrayFaultLabelsOnAHealthyNodeAreRemoved) {
  Fixture f;
  f.view(1).fault_type = "HardwareFault";  // left by a lost update, or written by hand
  f.view(1).fault_details = "old";
  const ClusterPlan p = f.plan();
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  EXPECT_EQ(p.kubernetes_health[0],
            (KubernetesNodeHealth{f.snap.nodes[1].instance_id, nh::kSchedulable, false}));
}

TEST(KubernetesFaultLabels, ALongMessageGivesAReasonOf63Characters) {
  Fixture f("None");
  f.snap.liveness[f.snap.nodes[0].instance_id].health = Report(
      model::HealthSeverity::kHardFault, "gpu.memory",
      "uncorrectable ECC errors on GPU 0000:3b:00.0 (volatile: 12, aggregate: 40); row "
      "remapping failed");
  const ClusterPlan p = f.plan();
  ASSERT_EQ(p.kubernetes_health.size(), 1u);
  const KubernetesNodeHealth& h = p.kubernetes_health[0];
  EXPECT_EQ(h.fault_type, "HardwareFault");
  EXPECT_EQ(h.fault_reason, "Health-check-gpu.memory-uncorrectable-ECC-errors-on-GPU-0000-3b");
  EXPECT_EQ(h.fault_reason.size(), 63u);
  EXPECT_EQ(h.fault_details,
            "Health check: gpu.memory: uncorrectable ECC errors on GPU 0000:3b:00.0 (volatile: "
            "12, aggregate: 40); row remapping failed");
}

}  // namespace fault_labels

}  // namespace
}  // namespace hf::control
