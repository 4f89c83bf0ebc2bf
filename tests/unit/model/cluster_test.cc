// model::Cluster's derived facts: the EKS cluster of an Orchestrator.Eks cluster, and the
// Kubernetes Node names of its instances.
#include <gtest/gtest.h>

#include "hyperfleet/model/cluster.h"

namespace hf::model {
namespace {

TEST(ClusterTest, EksClusterNameComesFromOrchestratorEksClusterArn) {
  Cluster c;
  EXPECT_EQ(c.eksClusterName(), "");
  c.spec["Orchestrator"] = {{"Slurm", {{"SlurmConfigStrategy", "Managed"}}}};
  EXPECT_EQ(c.eksClusterName(), "");
  c.spec["Orchestrator"] = {
      {"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/my-eks_1"}}}};
  EXPECT_EQ(c.eksClusterName(), "my-eks_1");
  c.spec["Orchestrator"] = {{"Eks", {{"ClusterArn", 7}}}};
  EXPECT_EQ(c.eksClusterName(), "");
  c.spec["Orchestrator"] = {{"Eks", {{"ClusterArn", "not an arn"}}}};
  EXPECT_EQ(c.eksClusterName(), "");
  c.spec["Orchestrator"] = "Eks";
  EXPECT_EQ(c.eksClusterName(), "");
}

TEST(ClusterTest, KubernetesNodeNameIsHyperpodDashInstanceId) {
  EXPECT_EQ(KubernetesNodeName("i-0123456789abcdef0"), "hyperpod-i-0123456789abcdef0");
}

}  // namespace
}  // namespace hf::model
