// Tests of the embedded instance catalog (data/instance-types.json) against the embedded
// service model.
#include "hyperfleet/model/instance_catalog.h"

#include <gtest/gtest.h>

#include "hyperfleet/model/service_model.h"

namespace hf::model {
namespace {

TEST(InstanceCatalog, CoversEveryClusterInstanceTypeOfTheServiceModel) {
  const auto& catalog = InstanceCatalog::Embedded();
  auto values = ServiceModel::Embedded()->enumValues("ClusterInstanceType");
  ASSERT_GE(values.size(), 200u);  // the model's enum is not empty by accident
  // The catalog has every value: no known gaps.
  for (const auto& type : values) {
    const InstanceTypeSpec* spec = catalog.find(type);
    ASSERT_NE(spec, nullptr) << type << " is missing from data/instance-types.json";
    EXPECT_EQ(spec->name, type);
    EXPECT_GT(spec->vcpus, 0) << type;
    EXPECT_GT(spec->memory_gib, 0) << type;
    EXPECT_GT(spec->network_gbps, 0) << type;
  }
  // Plus the six ml.g7.* types that newer SDKs list and this model predates.
  EXPECT_EQ(catalog.size(), values.size() + 6);
}

TEST(InstanceCatalog, SpotValuesMatchTheResearchTable) {
  const auto& catalog = InstanceCatalog::Embedded();
  const InstanceTypeSpec* c5 = catalog.find("ml.c5.xlarge");
  ASSERT_NE(c5, nullptr);
  EXPECT_EQ(c5->vcpus, 4);
  EXPECT_DOUBLE_EQ(c5->memory_gib, 8);
  EXPECT_EQ(c5->accelerator_kind, AcceleratorKind::kNone);
  EXPECT_EQ(c5->accelerator_count, 0);
  EXPECT_EQ(c5->network, "up to 10 Gbps");
  EXPECT_TRUE(c5->network_burstable);
  EXPECT_DOUBLE_EQ(c5->network_gbps, 10);
  EXPECT_EQ(c5->efa_supported(), false);

  const InstanceTypeSpec* p5 = catalog.find("ml.p5.48xlarge");
  ASSERT_NE(p5, nullptr);
  EXPECT_EQ(p5->vcpus, 192);
  EXPECT_DOUBLE_EQ(p5->memory_gib, 2048);
  EXPECT_EQ(p5->accelerator_kind, AcceleratorKind::kNvidiaGpu);
  EXPECT_EQ(p5->accelerator_model, "H100");
  EXPECT_EQ(p5->accelerator_count, 8);
  EXPECT_EQ(p5->accelerator_memory_gib, 640.0);  // 8 x 80 GiB
  EXPECT_EQ(p5->efa_interfaces, 32);
  EXPECT_DOUBLE_EQ(p5->network_gbps, 3200);
  EXPECT_FALSE(p5->network_burstable);
  EXPECT_EQ(p5->nvme_gb, 30400);

  const InstanceTypeSpec* g5 = catalog.find("ml.g5.8xlarge");
  ASSERT_NE(g5, nullptr);
  EXPECT_EQ(g5->vcpus, 32);
  EXPECT_DOUBLE_EQ(g5->memory_gib, 128);
  EXPECT_EQ(g5->accelerator_model, "A10G");
  EXPECT_EQ(g5->accelerator_count, 1);
  EXPECT_EQ(g5->accelerator_memory_gib, 22.35);  // EC2's figure, below the marketed 24 GB

  const InstanceTypeSpec* c5n = catalog.find("ml.c5n.large");
  ASSERT_NE(c5n, nullptr);
  EXPECT_DOUBLE_EQ(c5n->memory_gib, 5.25);  // fractional GiB survive

  const InstanceTypeSpec* trn = catalog.find("ml.trn1.32xlarge");
  ASSERT_NE(trn, nullptr);
  EXPECT_EQ(trn->accelerator_kind, AcceleratorKind::kAwsTrainium);
  EXPECT_EQ(AcceleratorKindName(trn->accelerator_kind), "aws-trainium");
}

TEST(InstanceCatalog, UnknownValuesAreNulloptNotZero) {
  // ml.p6e-gb200.36xlarge: GPU memory, EFA and NVMe are not established by the sources.
  const InstanceTypeSpec* gb200 = InstanceCatalog::Embedded().find("ml.p6e-gb200.36xlarge");
  ASSERT_NE(gb200, nullptr);
  EXPECT_EQ(gb200->accelerator_count, 4);
  EXPECT_FALSE(gb200->accelerator_memory_gib.has_value());
  EXPECT_FALSE(gb200->efa_interfaces.has_value());
  EXPECT_FALSE(gb200->efa_supported().has_value());
  EXPECT_FALSE(gb200->nvme_gb.has_value());
}

TEST(InstanceCatalog, FindIsExact) {
  const auto& catalog = InstanceCatalog::Embedded();
  EXPECT_EQ(catalog.find("ml.c5.xlarg"), nullptr);
  EXPECT_EQ(catalog.find("c5.xlarge"), nullptr);
  EXPECT_EQ(catalog.find("ML.C5.XLARGE"), nullptr);
  EXPECT_EQ(catalog.find(""), nullptr);
  EXPECT_EQ(catalog.find("ml.zz.none"), nullptr);
  for (size_t i = 1; i < catalog.all().size(); ++i) {
    EXPECT_LT(catalog.all()[i - 1].name, catalog.all()[i].name);
  }
}

TEST(InstanceCatalog, FromJsonRejectsBadDocuments) {
  auto entry = [](std::string fields) {
    return R"({"instance_types": [{"name": "ml.x.large", )" + fields + "}]}";
  };
  const std::string good =
      R"("vcpus": 2, "memory_gib": 4, "accelerator_kind": "none", "accelerator_model": "",
         "accelerator_count": 0, "accelerator_memory_gib": 0, "efa_interfaces": null,
         "network": "10 Gbps", "network_gbps": 10, "network_burstable": false,
         "nvme_gb": null)";
  auto ok = InstanceCatalog::FromJson(entry(good));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 1u);

  EXPECT_FALSE(InstanceCatalog::FromJson("not json").ok());
  EXPECT_FALSE(InstanceCatalog::FromJson("{}").ok());
  auto missing = InstanceCatalog::FromJson(R"({"instance_types": [{"name": "ml.x.large"}]})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("ml.x.large"), std::string::npos);

  std::string bad_kind = good;
  bad_kind.replace(bad_kind.find("\"none\""), 6, "\"tpu\"");
  auto kind = InstanceCatalog::FromJson(entry(bad_kind));
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(std::string(kind.status().message()).find("accelerator_kind"), std::string::npos);

  std::string string_vcpus = good;
  string_vcpus.replace(string_vcpus.find("2,"), 1, "\"2\"");
  EXPECT_FALSE(InstanceCatalog::FromJson(entry(string_vcpus)).ok());

  std::string twice = R"({"instance_types": [{"name": "ml.x.large", )" + good +
                      R"(}, {"name": "ml.x.large", )" + good + "}]}";
  auto dup = InstanceCatalog::FromJson(twice);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("duplicate"), std::string::npos);
}

}  // namespace
}  // namespace hf::model
