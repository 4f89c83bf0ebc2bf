// NodeFilesCache over real SQLite (in memory): after every kind of write the files it gives
// equal BuildNodeFiles over a fresh read of every record (a node added, erased, readdressed,
// shutting down; the cluster updated; other provisioning parameters), and a heartbeat of an
// agent holding its files reads nothing that grows with the cluster (a counting Store).
#include "hyperfleet/agentapi/node_files_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fakes/fake_clock.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace is = model::instance_status;

/// A real store that counts the reads of a cluster's node records.
class CountingStore final : public store::Store {
 public:
  explicit CountingStore(std::unique_ptr<store::Store> s) : s_(std::move(s)) {}
  int full_reads = 0;     ///< nodes()
  int change_reads = 0;   ///< nodesChangedSince()

  StatusOr<int64_t> commit(const store::WriteBatch& b) override { return s_->commit(b); }
  StatusOr<model::Cluster> cluster(const std::string& n) override { return s_->cluster(n); }
  StatusOr<model::Cluster> clusterById(const std::string& id) override {
    return s_->clusterById(id);
  }
  StatusOr<std::vector<model::Cluster>> allClusters() override { return s_->allClusters(); }
  StatusOr<store::Page<model::Cluster>> listClusters(const store::ClusterQuery& q) override {
    return s_->listClusters(q);
  }
  StatusOr<std::vector<model::Node>> nodes(const std::string& c) override {
    ++full_reads;
    return s_->nodes(c);
  }
  StatusOr<store::NodeChanges> nodesChangedSince(const std::string& c, int64_t since) override {
    ++change_reads;
    return s_->nodesChangedSince(c, since);
  }
  StatusOr<store::Page<model::Node>> listNodes(const std::string& c,
                                               const store::NodeQuery& q) override {
    return s_->listNodes(c, q);
  }
  StatusOr<std::map<std::string, store::GroupCounts>> groupCounts(const std::string& c) override {
    return s_->groupCounts(c);
  }
  StatusOr<model::Node> node(const std::string& c, const std::string& id) override {
    return s_->node(c, id);
  }
  StatusOr<store::Page<model::Event>> listEvents(const std::string& c,
                                                 const store::EventQuery& q) override {
    return s_->listEvents(c, q);
  }
  StatusOr<model::Event> event(const std::string& c, const std::string& id) override {
    return s_->event(c, id);
  }
  StatusOr<std::vector<model::Tag>> tags(const std::string& arn) override { return s_->tags(arn); }
  StatusOr<model::SchedulerResource> schedulerResource(const std::string& k,
                                                       const std::string& id) override {
    return s_->schedulerResource(k, id);
  }
  StatusOr<model::SchedulerResource> schedulerResourceVersion(const std::string& k,
                                                              const std::string& id,
                                                              int v) override {
    return s_->schedulerResourceVersion(k, id, v);
  }
  StatusOr<std::vector<model::SchedulerResource>> schedulerResources(
      const std::string& k, const std::string& c) override {
    return s_->schedulerResources(k, c);
  }

 private:
  std::unique_ptr<store::Store> s_;
};

const json kParams = {{"version", "1.0.0"},
                      {"workload_manager", "slurm"},
                      {"controller_group", "ctl"},
                      {"worker_groups", json::array({{{"instance_group_name", "workers"},
                                                      {"partition_name", "dev"}}})}};

class NodeFilesCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::Cluster c;
    c.id = "c1";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1";
    c.status = model::cluster_status::kInService;
    c.creation_time = clock_.now();
    c.spec = {{"Orchestrator", {{"Slurm", {{"SlurmConfigStrategy", "Managed"}}}}}};
    for (auto [name, count] : {std::pair{"ctl", 1}, std::pair{"workers", 3}}) {
      model::InstanceGroup g;
      g.name = name;
      g.instance_type = "ml.c5.xlarge";
      g.target_count = count;
      g.spec = {{"InstanceGroupName", name}, {"InstanceCount", count}};
      c.groups.push_back(g);
    }
    store::WriteBatch b;
    b.clusters.push_back({c});
    for (const char* id : {"i-1", "i-2", "i-3"}) b.nodes.push_back({Node(id)});
    ASSERT_TRUE(store_.commit(b).ok());
  }

  model::Node Node(const std::string& id) {
    model::Node n;
    n.cluster_id = "c1";
    n.instance_id = id;
    n.logical_id = id + "-x";
    n.group = id == "i-1" ? "ctl" : "workers";
    n.instance_type = "ml.c5.xlarge";
    n.status = is::kRunning;
    n.launch_time = clock_.now() + std::chrono::seconds(next_);
    n.private_ip = "10.1.0." + std::to_string(10 + next_++);
    n.hostname = "ip-10-1-0-" + n.private_ip.substr(n.private_ip.rfind('.') + 1);
    n.lifecycle = {{"SourceS3Uri", "s3://b/lcs"}, {"OnCreate", "on_create.sh"}};
    return n;
  }

  /// Changes node `id`'s record with `change` (compare-and-swap on what was read).
  template <typename F>
  void Update(const std::string& id, F change) {
    model::Node n = store_.node("c1", id).value();
    const int64_t rev = n.revision;
    change(n);
    store::WriteBatch b;
    b.nodes.push_back({n, rev});
    ASSERT_TRUE(store_.commit(b).ok());
  }

  /// Asks the cache for `id`'s files as a heartbeat would, with `agent` held by the agent.
  NodeFilesCache::Result Get(const std::string& id, std::optional<int64_t> agent = std::nullopt,
                             const std::optional<json>& params = kParams) {
    auto cluster = store_.clusterById("c1").value();
    auto node = store_.node("c1", id).value();
    return cache_.get(cluster, node, params, agent).value();
  }

  /// The cache's answer for `id` equals BuildNodeFiles over a fresh read of every record.
  void ExpectFresh(const std::string& id, const std::optional<json>& params = kParams) {
    SCOPED_TRACE(id);
    auto cluster = store_.clusterById("c1").value();
    auto node = store_.node("c1", id).value();
    auto all = store_.nodes("c1").value();
    NodeFiles want = BuildNodeFiles(cluster, node, all, params);
    NodeFilesCache::Result got = cache_.get(cluster, node, params, std::nullopt).value();
    EXPECT_EQ(got.files, want.files);
    EXPECT_EQ(got.revision, want.revision);
    EXPECT_EQ(got.controller_group, want.controller_group);
    EXPECT_EQ(got.roles_error, want.roles_error);
    EXPECT_EQ(got.slurm != nullptr, want.slurm_conf.has_value());
    if (got.slurm && want.slurm_conf) {
      EXPECT_EQ(got.slurm->files.at(0).content, *want.slurm_conf);
    }
    EXPECT_EQ(got.snapshot->nodes.size(), all.size());
    // An agent holding them gets the same revision and no files.
    NodeFilesCache::Result held = cache_.get(cluster, node, params, want.revision).value();
    EXPECT_EQ(held.revision, want.revision);
    EXPECT_TRUE(held.files.empty());
  }

  void ExpectAllFresh() {
    const std::vector<model::Node> all = store_.nodes("c1").value();
    for (const auto& n : all) ExpectFresh(n.instance_id);
  }

  hf::testing::FakeClock clock_;
  CountingStore store_{store::OpenSqliteStore(":memory:").value()};
  NodeFilesCache cache_{store_, clock_};
  int next_ = 0;
};

TEST_F(NodeFilesCacheTest, FilesEqualAFreshBuild) {
  ExpectAllFresh();
  auto ctl = Get("i-1");
  ASSERT_NE(ctl.slurm, nullptr);
  EXPECT_EQ(ctl.controller_group, "ctl");
  EXPECT_EQ(Get("i-2").slurm, nullptr);
}

TEST_F(NodeFilesCacheTest, AHeartbeatHoldingItsFilesReadsNoNodeRecords) {
  const int64_t worker = Get("i-2").revision;
  const int64_t ctl = Get("i-1").revision;
  store_.full_reads = store_.change_reads = 0;
  for (int k = 0; k < 50; ++k) {
    auto w = Get("i-2", worker);
    EXPECT_EQ(w.revision, worker);
    EXPECT_TRUE(w.files.empty());
    auto c = Get("i-1", ctl);
    EXPECT_EQ(c.revision, ctl);
    EXPECT_TRUE(c.files.empty());
    EXPECT_NE(c.slurm, nullptr);
  }
  EXPECT_EQ(store_.full_reads, 0);
  EXPECT_EQ(store_.change_reads, 0);
}

TEST_F(NodeFilesCacheTest, AChangeIsReadOnceForEveryNode) {
  ExpectAllFresh();
  const int64_t worker = Get("i-2").revision;
  Update("i-3", [](model::Node& n) { n.lifecycle_state = model::lifecycle_state::kSucceeded; });
  store_.full_reads = store_.change_reads = 0;
  for (const char* id : {"i-1", "i-2", "i-3", "i-2"}) Get(id);
  EXPECT_EQ(store_.full_reads, 0);
  EXPECT_EQ(store_.change_reads, 1);
  // Nothing the files hold changed.
  EXPECT_EQ(Get("i-2", worker).revision, worker);
  EXPECT_TRUE(Get("i-2", worker).files.empty());
}

TEST_F(NodeFilesCacheTest, ANodeAddedReachesEveryNodesFiles) {
  const auto before = Get("i-2");
  const auto ctl_before = Get("i-1");
  store::WriteBatch b;
  b.nodes.push_back({Node("i-4")});
  ASSERT_TRUE(store_.commit(b).ok());
  const auto after = Get("i-2", before.revision);
  EXPECT_NE(after.revision, before.revision);
  ASSERT_FALSE(after.files.empty());
  EXPECT_NE(after.files[0].content.find("i-4"), std::string::npos);
  const auto ctl = Get("i-1", ctl_before.revision);
  ASSERT_NE(ctl.slurm, nullptr);
  EXPECT_NE(std::find(ctl.slurm->slurm_conf_nodes.begin(), ctl.slurm->slurm_conf_nodes.end(),
                      "ip-10-1-0-13"),
            ctl.slurm->slurm_conf_nodes.end());
  ExpectAllFresh();
}

TEST_F(NodeFilesCacheTest, ANodeErasedLeavesEveryNodesFiles) {
  const auto before = Get("i-2");
  ExpectAllFresh();
  model::Node gone = store_.node("c1", "i-3").value();
  store::WriteBatch b;
  b.nodes.push_back({gone, gone.revision, true});
  ASSERT_TRUE(store_.commit(b).ok());
  const auto after = Get("i-2", before.revision);
  EXPECT_NE(after.revision, before.revision);
  ASSERT_FALSE(after.files.empty());
  EXPECT_EQ(after.files[0].content.find("i-3"), std::string::npos);
  EXPECT_EQ(after.snapshot->nodes.size(), 2u);
  ExpectAllFresh();
}

TEST_F(NodeFilesCacheTest, ReaddressedAndShuttingDownNodesChangeTheFiles) {
  ExpectAllFresh();
  Update("i-3", [](model::Node& n) { n.private_ip = "10.1.0.99"; });
  ExpectAllFresh();
  EXPECT_NE(Get("i-1").slurm->files.at(0).content.find("10.1.0.99"), std::string::npos);
  Update("i-2", [](model::Node& n) { n.status = is::kShuttingDown; });
  ExpectAllFresh();
  // The controller has no address yet: no slurm.conf, and it comes once it has one.
  Update("i-1", [](model::Node& n) { n.private_ip.clear(); });
  ExpectAllFresh();
  EXPECT_EQ(Get("i-1").slurm, nullptr);
  Update("i-1", [](model::Node& n) { n.private_ip = "10.1.0.50"; });
  ExpectAllFresh();
  EXPECT_NE(Get("i-1").slurm, nullptr);
}

TEST_F(NodeFilesCacheTest, AClusterUpdateReachesTheFiles) {
  ExpectAllFresh();
  const auto before = Get("i-2");
  model::Cluster c = store_.clusterById("c1").value();
  const int64_t rev = c.revision;
  model::InstanceGroup g = c.groups[1];
  g.name = "more";
  g.instance_type = "ml.c5.2xlarge";
  g.spec = {{"InstanceGroupName", "more"}, {"InstanceType", "ml.c5.2xlarge"}, {"InstanceCount", 0}};
  c.groups.push_back(g);
  store::WriteBatch b;
  b.clusters.push_back({c, rev});
  ASSERT_TRUE(store_.commit(b).ok());
  const auto after = Get("i-2", before.revision);
  EXPECT_NE(after.revision, before.revision);
  ASSERT_FALSE(after.files.empty());
  EXPECT_NE(after.files[0].content.find("\"more\""), std::string::npos);
  ExpectAllFresh();
}

TEST_F(NodeFilesCacheTest, OtherProvisioningParametersGiveOtherFiles) {
  ExpectAllFresh();
  json bad = kParams;
  bad["controller_group"] = "nope";
  ExpectFresh("i-1", bad);
  ExpectFresh("i-2", bad);
  EXPECT_FALSE(Get("i-1", std::nullopt, bad).roles_error.empty());
  EXPECT_EQ(Get("i-1", std::nullopt, bad).slurm, nullptr);
  ExpectFresh("i-1", std::nullopt);
  ExpectFresh("i-1");  // and back
  EXPECT_NE(Get("i-1").slurm, nullptr);
}

// Extra files (an EKS node's kubelet files) are part of the files and of their revision: the
// same extra files keep it, other ones (or none) change it.
TEST_F(NodeFilesCacheTest, ExtraFilesCountInTheRevision) {
  auto cluster = store_.clusterById("c1").value();
  auto node = store_.node("c1", "i-2").value();
  const std::vector<NodeFile> extra = {{"/etc/hyperfleet/kubelet.env", 0644, "KUBELET_ARGS=a\n"}};
  const int64_t plain = Get("i-2").revision;
  NodeFilesCache::Result with = cache_.get(cluster, node, kParams, std::nullopt, extra).value();
  NodeFiles want = BuildNodeFiles(cluster, node, store_.nodes("c1").value(), kParams, extra);
  EXPECT_EQ(with.files, want.files);
  EXPECT_EQ(with.revision, want.revision);
  EXPECT_EQ(with.files.back(), extra[0]);
  EXPECT_NE(with.revision, plain);
  EXPECT_TRUE(cache_.get(cluster, node, kParams, with.revision, extra)->files.empty());
  std::vector<NodeFile> other = extra;
  other[0].content = "KUBELET_ARGS=b\n";
  NodeFilesCache::Result changed = cache_.get(cluster, node, kParams, with.revision, other).value();
  EXPECT_NE(changed.revision, with.revision);
  EXPECT_FALSE(changed.files.empty());
  EXPECT_EQ(Get("i-2").revision, plain);
}

TEST_F(NodeFilesCacheTest, AFreshCacheAndAForgottenClusterReadAgain) {
  const int64_t rev = Get("i-2").revision;
  cache_.forget("c1");
  store_.full_reads = store_.change_reads = 0;
  EXPECT_EQ(Get("i-2", rev).revision, rev);
  EXPECT_EQ(store_.change_reads, 1);
  NodeFilesCache other(store_, clock_);
  auto cluster = store_.clusterById("c1").value();
  auto node = store_.node("c1", "i-2").value();
  EXPECT_EQ(other.get(cluster, node, kParams, rev)->revision, rev);
}

}  // namespace
}  // namespace hf::agentapi
