// JobsService (`hyperfleet jobs why` on the API endpoint) over a real governance loop and an
// in-memory store: its model, a reported job's explanation, and its errors.
#include "hyperfleet/jobsapi/jobs_service.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "fakes/fake_clock.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::jobsapi {
namespace {

using nlohmann::json;

class JobsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    store::WriteBatch b;
    model::Cluster c;
    c.id = "c1";
    c.name = "gov";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1";
    b.clusters.push_back({c});
    model::Node n;
    n.cluster_id = "c1";
    n.instance_id = "i-00000000000000001";
    n.group = "workers";
    n.instance_type = "ml.g5.8xlarge";
    n.hostname = "w1";
    b.nodes.push_back({n});
    model::SchedulerResource q;
    q.id = "qa";
    q.arn = "arn:qa";
    q.kind = model::governance_kind::kComputeQuota;
    q.cluster_id = "c1";
    q.name = "team-a";
    q.team = "team-a";
    q.status = model::scheduler_status::kCreated;
    q.body = {{"ComputeQuotaConfig",
               {{"ComputeQuotaResources",
                 json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", 1}}})},
                {"ResourceSharingConfig", {{"Strategy", "LendAndBorrow"}, {"BorrowLimit", 50}}},
                {"PreemptTeamTasks", "LowerPriority"}}},
              {"ComputeQuotaTarget", {{"TeamName", "team-a"}, {"FairShareWeight", 0}}},
              {"ActivationState", "Enabled"}};
    b.scheduler_resources.push_back({q});
    model::SchedulerResource policy;
    policy.id = "policy";
    policy.arn = "arn:policy";
    policy.kind = model::governance_kind::kSchedulerConfig;
    policy.cluster_id = "c1";
    policy.name = "policy";
    policy.status = model::scheduler_status::kCreated;
    policy.body = {{"SchedulerConfig",
                    {{"PriorityClasses", json::array({{{"Name", "training"}, {"Weight", 70}}})},
                     {"FairShare", "Enabled"}}}};
    b.scheduler_resources.push_back({policy});
    ASSERT_TRUE(store_->commit(b).ok());
    loop_ = std::make_unique<control::GovernanceLoop>(*store_, model::InstanceCatalog::Embedded(),
                                                      clock_);
    service_ = std::make_unique<JobsService>(*store_, *loop_);
    // The controller's agent reports job 7 of team-a, held at submission (job_submit.lua).
    agentapi::SlurmJobsReport report;
    agentapi::SlurmJob& job = report.jobs.emplace_back();
    job.id = 7;
    job.account = "team-a";
    job.partition = "workers";
    job.state = "PENDING";
    job.reason = "JobHeldUser";
    job.submit_time = 1767225600.0;
    report.partitions["workers"] = {"w1"};
    loop_->onHeartbeat("c1", &report);
  }

  testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<control::GovernanceLoop> loop_;
  std::unique_ptr<JobsService> service_;
};

TEST_F(JobsServiceTest, ServesDescribeJobAdmissionUnderItsOwnPrefix) {
  EXPECT_EQ(service_->targetPrefix(), "Hyperfleet");
  EXPECT_EQ(service_->signingName(), "sagemaker");
  EXPECT_TRUE(service_->model().hasOperation("DescribeJobAdmission"));
  EXPECT_TRUE(service_->model()
                  .validateInput("DescribeJobAdmission", {{"ClusterName", "gov"}, {"JobId", "7"}})
                  .ok());
  EXPECT_FALSE(service_->model()
                   .validateInput("DescribeJobAdmission", {{"ClusterName", "gov"}, {"JobId", "x"}})
                   .ok());
  EXPECT_FALSE(service_->model().validateInput("DescribeJobAdmission", {{"JobId", "7"}}).ok());
}

TEST_F(JobsServiceTest, ExplainsAReportedJobByClusterNameOrArn) {
  for (const char* cluster : {"gov", "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1"}) {
    auto out = service_->call("DescribeJobAdmission", {{"ClusterName", cluster}, {"JobId", "7"}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)["ClusterName"], "gov");
    EXPECT_EQ((*out)["Team"], "team-a") << out->dump();
    EXPECT_TRUE(out->contains("Verdict")) << out->dump();
  }
}

TEST_F(JobsServiceTest, UnknownClustersJobsAndOperationsAreErrors) {
  EXPECT_TRUE(absl::IsNotFound(
      service_->call("DescribeJobAdmission", {{"ClusterName", "nope"}, {"JobId", "7"}}).status()));
  EXPECT_TRUE(absl::IsNotFound(
      service_->call("DescribeJobAdmission", {{"ClusterName", "gov"}, {"JobId", "8"}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      service_->call("DescribeJobAdmission", {{"ClusterName", "gov"}, {"JobId", "99999999999999999999999"}})
          .status()));
  EXPECT_TRUE(absl::IsUnimplemented(service_->call("ListJobs", json::object()).status()));
}

}  // namespace
}  // namespace hf::jobsapi
