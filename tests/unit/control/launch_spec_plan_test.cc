// What PlanCluster asks the provider to launch carries what the node needs of its instance
// group beyond the type: the secondary EBS volume of InstanceStorageConfigs (mounted at
// /opt/sagemaker on the node).
#include <gtest/gtest.h>

#include "hyperfleet/control/cluster_plan.h"

namespace hf::control {
namespace {

using nlohmann::json;
namespace cs = model::cluster_status;
namespace is = model::instance_status;

// A creating cluster whose one pending node the provider does not know yet: the plan launches it.
ClusterPlan PlanLaunch(const json& instance_storage_configs) {
  ClusterSnapshot snap;
  auto& c = snap.cluster;
  c.id = "abcdefabcdef";
  c.name = "demo";
  c.status = cs::kCreating;
  model::InstanceGroup g;
  g.name = "workers";
  g.instance_type = "ml.c5.xlarge";
  g.target_count = 1;
  g.spec = {{"InstanceGroupName", "workers"}, {"InstanceCount", 1}};
  c.groups.push_back(g);
  model::Node n;
  n.cluster_id = c.id;
  n.instance_id = "i-0123456789abcdef0";
  n.logical_id = "workers-x";
  n.group = "workers";
  n.instance_type = "ml.c5.xlarge";
  n.status = is::kPending;
  if (!instance_storage_configs.is_null()) {
    n.spec_extras["InstanceStorageConfigs"] = instance_storage_configs;
  }
  snap.nodes.push_back(n);
  SequentialIdSource ids{7};
  return PlanCluster(snap, FromEpochSeconds(1'800'000'000), ids);
}

TEST(LaunchSpecPlan, CarriesTheSecondaryEbsVolume) {
  auto with = PlanLaunch(json::parse(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}])"));
  ASSERT_EQ(with.launches.size(), 1u);
  EXPECT_EQ(with.launches[0].instance_type, "ml.c5.xlarge");
  EXPECT_TRUE(with.launches[0].secondary_ebs_volume);

  auto root_only = PlanLaunch(
      json::parse(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 200, "RootVolume": true}}])"));
  ASSERT_EQ(root_only.launches.size(), 1u);
  EXPECT_FALSE(root_only.launches[0].secondary_ebs_volume);

  auto none = PlanLaunch(json());
  ASSERT_EQ(none.launches.size(), 1u);
  EXPECT_FALSE(none.launches[0].secondary_ebs_volume);
}

}  // namespace
}  // namespace hf::control
