// EKS clusters and access entries in the real SQLite store: every field round-trips,
// compare-and-swap, unique names, lookups by ARN, entries need their cluster and go with it.
#include <gtest/gtest.h>

#include "hyperfleet/store/store.h"

namespace hf::store {
namespace {

EksCluster Cluster(const std::string& name) {
  EksCluster c;
  c.name = name;
  c.arn = "arn:aws:eks:us-west-2:123456789012:cluster/" + name;
  c.version = "1.31";
  c.role_arn = "arn:aws:iam::123456789012:role/eks";
  c.vpc.subnet_ids = {"subnet-1", "subnet-2"};
  c.vpc.security_group_ids = {"sg-1"};
  c.vpc.endpoint_private_access = true;
  c.vpc.public_access_cidrs = {"0.0.0.0/0"};
  c.vpc.vpc_id = "vpc-0123456789abcdef0";
  c.vpc.cluster_security_group_id = "sg-0123456789abcdef0";
  c.auth_mode = EksAuthMode::kApiAndConfigMap;
  c.bootstrap_admin = false;
  c.status = EksClusterStatus::kActive;
  c.created_at = FromEpochSeconds(1700000000.5);
  c.tags = {{"team", "ml"}};
  c.endpoint = "https://127.0.0.1:6443";
  c.ca_pem = "-----BEGIN CERTIFICATE-----\n...";
  c.served_version = "v1.20.2";
  return c;
}

EksAccessEntry Entry(const std::string& cluster, const std::string& principal) {
  EksAccessEntry e;
  e.cluster = cluster;
  e.principal_arn = principal;
  e.arn = "arn:aws:eks:us-west-2:123456789012:access-entry/" + cluster + "/x/" + principal;
  e.kubernetes_groups = {"devs"};
  e.username = "alice";
  e.created_at = FromEpochSeconds(1700000001);
  e.modified_at = FromEpochSeconds(1700000002);
  e.tags = {{"k", "v"}};
  e.policies.push_back({"arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
                        "namespace", {"a", "b"}, FromEpochSeconds(1700000003),
                        FromEpochSeconds(1700000004)});
  return e;
}

class EksStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> store_ = std::move(OpenSqliteStore(":memory:").value());
};

TEST_F(EksStoreTest, ClusterRoundTripsAndIsFoundByNameOrArn) {
  WriteBatch b;
  b.eks_clusters.push_back({Cluster("c1"), kMustNotExist, false});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok()) << rev.status();
  EksCluster want = Cluster("c1");
  want.revision = *rev;
  EXPECT_EQ(store_->eksCluster("c1").value(), want);
  EXPECT_EQ(store_->eksCluster(want.arn).value(), want);
  auto missing = store_->eksCluster("c2");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "No cluster found for name: c2.");
}

TEST_F(EksStoreTest, WritesCompareAndSwap) {
  WriteBatch b;
  b.eks_clusters.push_back({Cluster("c1"), kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  // A second create of the name, and an update at a stale revision, both fail.
  EXPECT_EQ(store_->commit(b).status().code(), absl::StatusCode::kFailedPrecondition);
  EksCluster c = store_->eksCluster("c1").value();
  c.status = EksClusterStatus::kDeleting;
  WriteBatch update;
  update.eks_clusters.push_back({c, c.revision, false});
  ASSERT_TRUE(store_->commit(update).ok());
  EXPECT_EQ(store_->commit(update).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->eksCluster("c1")->status, EksClusterStatus::kDeleting);
}

TEST_F(EksStoreTest, AccessEntriesNeedTheirClusterAndGoWithIt) {
  WriteBatch orphan;
  orphan.eks_access_entries.push_back({Entry("c1", "arn:aws:iam::1:role/a"), kMustNotExist});
  EXPECT_EQ(store_->commit(orphan).status().code(), absl::StatusCode::kFailedPrecondition);

  WriteBatch b;
  b.eks_clusters.push_back({Cluster("c1"), kMustNotExist, false});
  b.eks_clusters.push_back({Cluster("c2"), kMustNotExist, false});
  b.eks_access_entries.push_back({Entry("c1", "arn:aws:iam::1:role/b"), kMustNotExist});
  b.eks_access_entries.push_back({Entry("c1", "arn:aws:iam::1:role/a"), kMustNotExist});
  b.eks_access_entries.push_back({Entry("c2", "arn:aws:iam::1:role/a"), kMustNotExist});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok()) << rev.status();

  EksAccessEntry want = Entry("c1", "arn:aws:iam::1:role/a");
  want.revision = *rev;
  EXPECT_EQ(store_->eksAccessEntry("c1", "arn:aws:iam::1:role/a").value(), want);
  EXPECT_EQ(store_->eksAccessEntryByArn(want.arn).value(), want);
  auto listed = store_->eksAccessEntries("c1").value();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].principal_arn, "arn:aws:iam::1:role/a");
  EXPECT_EQ(listed[1].principal_arn, "arn:aws:iam::1:role/b");

  EksCluster c1 = store_->eksCluster("c1").value();
  WriteBatch erase;
  erase.eks_clusters.push_back({c1, c1.revision, true});
  ASSERT_TRUE(store_->commit(erase).ok());
  EXPECT_EQ(store_->eksCluster("c1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->eksAccessEntries("c1").value().empty());
  EXPECT_EQ(store_->eksAccessEntries("c2").value().size(), 1u);  // another cluster's stay
  EXPECT_EQ(store_->eksClusters().value().size(), 1u);
}

TEST(EksNamesTest, EnumNamesRoundTrip) {
  for (auto s : {EksClusterStatus::kCreating, EksClusterStatus::kActive,
                 EksClusterStatus::kDeleting, EksClusterStatus::kFailed}) {
    EXPECT_EQ(ParseEksClusterStatus(EksClusterStatusName(s)), s);
  }
  for (auto m : {EksAuthMode::kConfigMap, EksAuthMode::kApi, EksAuthMode::kApiAndConfigMap}) {
    EXPECT_EQ(ParseEksAuthMode(EksAuthModeName(m)), m);
  }
  EXPECT_EQ(EksAuthModeName(EksAuthMode::kApiAndConfigMap), "API_AND_CONFIG_MAP");
  EXPECT_FALSE(ParseEksAuthMode("api").has_value());
}

}  // namespace
}  // namespace hf::store
