// PlanCluster with providers whose nodes run agents: an instance is Running only once its
// lifecycle scripts succeeded, Failure when they failed, and the cluster follows HyperPod's
// create semantics (Failed with its wording, or Continuous replacement).
#include <gtest/gtest.h>

#include "hyperfleet/control/cluster_plan.h"

namespace hf::control {
namespace {

using nlohmann::json;
namespace cs = model::cluster_status;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

struct Fixture {
  SystemTime t0 = FromEpochSeconds(1'800'000'000);
  SequentialIdSource ids{7};
  ClusterSnapshot snap;

  explicit Fixture(bool continuous = false) {
    auto& c = snap.cluster;
    c.id = "abcdefabcdef";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
    c.status = cs::kCreating;
    c.revision = 3;
    model::InstanceGroup g;
    g.name = "workers";
    g.instance_type = "ml.c5.xlarge";
    g.target_count = 1;
    g.spec = {{"InstanceGroupName", "workers"}, {"InstanceCount", 1}};
    c.groups.push_back(g);
    if (continuous) c.spec["NodeProvisioningMode"] = "Continuous";
    model::Node n;
    n.cluster_id = c.id;
    n.instance_id = "i-0123456789abcdef0";
    n.logical_id = "workers-x";
    n.group = "workers";
    n.status = is::kPending;
    n.launch_time = t0;
    n.revision = 2;
    snap.nodes.push_back(n);
    provider::InstanceObservation o;
    o.instance_id = n.instance_id;
    o.cluster_id = c.id;
    o.state = provider::InstanceState::kRunning;
    o.private_ip = "10.224.0.2";
    o.hostname = "ip-10-224-0-2";
    snap.instances.push_back(o);
    snap.lifecycle_by_agent = true;
    snap.agent_start_timeout = std::chrono::seconds(60);
  }

  const model::Node* written() const {
    return plan.writes.nodes.empty() ? nullptr : &plan.writes.nodes.back().node;
  }
  const model::Cluster* cluster() const {
    return plan.writes.clusters.empty() ? nullptr : &plan.writes.clusters.back().cluster;
  }
  void run(Duration after = std::chrono::seconds(1)) { plan = PlanCluster(snap, t0 + after, ids); }
  ClusterPlan plan;
};

TEST(LifecyclePlan, BootedNodeStaysPendingUntilItsScriptsSucceed) {
  Fixture f;
  f.snap.nodes[0].lifecycle_state = ls::kStarted;
  f.run();
  ASSERT_NE(f.written(), nullptr);  // the address is recorded
  EXPECT_EQ(f.written()->status, is::kPending);
  EXPECT_EQ(f.written()->private_ip, "10.224.0.2");
  EXPECT_FALSE(f.plan.settled);

  f.snap.nodes[0].lifecycle_state = ls::kSucceeded;
  f.run();
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kRunning);
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kInService);
}

TEST(LifecyclePlan, FailedScriptsFailTheNodeAndTheCreateInHyperPodsWords) {
  Fixture f;
  f.snap.nodes[0].lifecycle_state = ls::kFailed;
  f.snap.nodes[0].lifecycle_message = "Lifecycle scripts did not run successfully: exit 3";
  f.run();
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kFailure);
  EXPECT_EQ(f.written()->message, "Lifecycle scripts did not run successfully: exit 3");
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kFailed);
  EXPECT_EQ(f.cluster()->failure_message,
            "Instance i-0123456789abcdef0 (instance group workers) failed to provision with the "
            "following error: \"Lifecycle scripts did not run successfully: exit 3\" Note that "
            "multiple instances may be impacted.");
  bool error_event = false;
  for (const auto& e : f.plan.writes.events) {
    error_event |= e.level == "Error" && e.instance_id == "i-0123456789abcdef0";
  }
  EXPECT_TRUE(error_event);
}

TEST(LifecyclePlan, ContinuousModeReplacesANodeWhoseScriptsFailed) {
  Fixture f(/*continuous=*/true);
  f.snap.nodes[0].lifecycle_state = ls::kFailed;
  f.snap.nodes[0].lifecycle_message = "boom";
  f.run();
  ASSERT_EQ(f.plan.terminations.size(), 1u);
  EXPECT_EQ(f.plan.terminations[0], "i-0123456789abcdef0");
  ASSERT_EQ(f.plan.launches.size(), 1u);
  EXPECT_NE(f.plan.launches[0].instance_id, "i-0123456789abcdef0");
  // The cluster is usable while the retry runs: InService, not Failed, not waiting for it.
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kInService);
  EXPECT_FALSE(f.plan.settled);
}

TEST(LifecyclePlan, ContinuousModeWaitsForFirstAttempts) {
  Fixture f(/*continuous=*/true);
  f.snap.nodes[0].lifecycle_state = ls::kStarted;
  f.run();
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kCreating);
}

TEST(LifecyclePlan, AnAgentThatNeverStartsFailsTheNodeAfterTheTimeout) {
  Fixture f;
  f.run(std::chrono::seconds(59));
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kPending);
  f.run(std::chrono::seconds(61));
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kFailure);
  EXPECT_NE(f.written()->message.find("did not start the lifecycle scripts within 60 seconds"),
            std::string::npos)
      << f.written()->message;
}

// A launch that waited for capacity (a machine pool) boots long after its record's launch
// time: the agent's time to start the scripts counts from the boot.
TEST(LifecyclePlan, TheAgentStartTimeoutCountsFromTheBootNotTheLaunch) {
  Fixture f;
  f.snap.instances[0].boot_time = f.t0 + std::chrono::hours(19);
  f.run(std::chrono::hours(19) + std::chrono::seconds(30));
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kPending) << f.written()->message;
  f.run(std::chrono::hours(19) + std::chrono::seconds(61));
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kFailure);
}

TEST(LifecyclePlan, AnAgentWaitingForTheControllerIsNotTimedOut) {
  Fixture f;
  f.snap.nodes[0].lifecycle_state = model::lifecycle_state::kWaiting;
  f.run(std::chrono::seconds(3600));
  // Nothing to write: still Pending, no failure.
  for (const auto& w : f.plan.writes.nodes) EXPECT_NE(w.node.status, is::kFailure);
  EXPECT_EQ(f.cluster() == nullptr ? cs::kCreating : f.cluster()->status, cs::kCreating);
}

TEST(LifecyclePlan, ProvidersWithoutAgentsMarkBootedNodesRunning) {
  Fixture f;
  f.snap.lifecycle_by_agent = false;
  f.run();
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kRunning);
}

}  // namespace
}  // namespace hf::control

namespace hf::control {
namespace {

// Orchestrator.Eks: as on HyperPod, an instance counts as Running once it joined the EKS
// cluster, i.e. its Node "hyperpod-<id>" is Ready; it boots the EKS node image.
TEST(LifecyclePlan, EksNodeIsRunningOnlyOnceItsKubernetesNodeIsReady) {
  Fixture f;
  f.snap.cluster.spec["Orchestrator"] = {
      {"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/k1"}}}};
  f.snap.nodes[0].lifecycle_state = ls::kSucceeded;
  f.run();  // the control plane could not be asked
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kPending);
  EXPECT_FALSE(f.plan.settled);

  KubernetesNodeView ready;
  ready.ready = true;
  f.snap.kubernetes_nodes = std::map<std::string, KubernetesNodeView>{
      {"i-0aaaaaaaaaaaaaaaa", ready},  // another's
      {"i-0123456789abcdef0", KubernetesNodeView{}}};  // registered, not Ready
  f.run();
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kPending);
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kCreating);

  (*f.snap.kubernetes_nodes)["i-0123456789abcdef0"] = ready;
  f.run();
  ASSERT_NE(f.written(), nullptr);
  EXPECT_EQ(f.written()->status, is::kRunning);
  ASSERT_NE(f.cluster(), nullptr);
  EXPECT_EQ(f.cluster()->status, cs::kInService);
}

TEST(LifecyclePlan, EksClustersLaunchTheEksImageAndSlurmClustersTheBase) {
  Fixture slurm;
  slurm.snap.instances.clear();  // not launched yet: the plan launches it
  slurm.run();
  ASSERT_EQ(slurm.plan.launches.size(), 1u);
  EXPECT_EQ(slurm.plan.launches[0].image_variant, provider::NodeImageVariant::kSlurm);

  Fixture eks;
  eks.snap.cluster.spec["Orchestrator"] = {
      {"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/k1"}}}};
  eks.snap.instances.clear();
  eks.run();
  ASSERT_EQ(eks.plan.launches.size(), 1u);
  EXPECT_EQ(eks.plan.launches[0].image_variant, provider::NodeImageVariant::kEks);
}

}  // namespace
}  // namespace hf::control
