// GovernanceLoop: Slurm job reports in, job actions out, on a real (in-memory) store. The
// HyperPod worked scenarios of governance.md §1.4 as Slurm would show them.
#include "hyperfleet/control/governance_loop.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fakes/fake_clock.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/store/store.h"

namespace hf::control {
namespace {

using nlohmann::json;

class GovernanceLoopTest : public ::testing::Test {
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
    for (int i = 1; i <= 4; ++i) {
      model::Node n;
      n.cluster_id = "c1";
      n.instance_id = "i-0000000000000000" + std::to_string(i);
      n.group = "workers";
      n.instance_type = "ml.g5.8xlarge";
      n.hostname = "w" + std::to_string(i);
      b.nodes.push_back({n});
    }
    auto committed = store_->commit(b);
    ASSERT_TRUE(committed.ok()) << committed.status();
    Policy();
    Quota("team-a", 2);
    Quota("team-b", 2);
    loop_ = std::make_unique<GovernanceLoop>(*store_, model::InstanceCatalog::Embedded(), clock_);
  }

  void Policy() {
    model::SchedulerResource r;
    r.id = "policy";
    r.arn = "arn:policy";
    r.kind = model::governance_kind::kSchedulerConfig;
    r.cluster_id = "c1";
    r.name = "policy";
    r.status = model::scheduler_status::kCreated;
    r.body = {{"SchedulerConfig",
               {{"PriorityClasses",
                 json::array({{{"Name", "inference"}, {"Weight", 90}},
                              {{"Name", "experimentation"}, {"Weight", 80}},
                              {{"Name", "training"}, {"Weight", 70}},
                              {{"Name", "fine-tuning"}, {"Weight", 50}}})},
                {"FairShare", "Enabled"}}}};
    store::WriteBatch b;
    b.scheduler_resources.push_back({r});
    auto committed = store_->commit(b);
    ASSERT_TRUE(committed.ok()) << committed.status();
  }

  void Quota(const std::string& team, int count) {
    model::SchedulerResource r;
    r.id = "q" + team;
    r.arn = "arn:" + r.id;
    r.kind = model::governance_kind::kComputeQuota;
    r.cluster_id = "c1";
    r.name = team;
    r.team = team;
    r.status = model::scheduler_status::kCreated;
    r.body = {{"ComputeQuotaConfig",
               {{"ComputeQuotaResources",
                 json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", count}}})},
                {"ResourceSharingConfig", {{"Strategy", "LendAndBorrow"}, {"BorrowLimit", 50}}},
                {"PreemptTeamTasks", "LowerPriority"}}},
              {"ComputeQuotaTarget", {{"TeamName", team}, {"FairShareWeight", 0}}},
              {"ActivationState", "Enabled"}};
    store::WriteBatch b;
    b.scheduler_resources.push_back({r});
    auto committed = store_->commit(b);
    ASSERT_TRUE(committed.ok()) << committed.status();
  }

  /// Slurm's view: job id -> (account, qos, nodes, state, reason).
  struct J {
    std::string account, qos;
    int nodes;
    std::string state, reason;
  };
  std::map<uint64_t, J> slurm_;

  void Submit(uint64_t id, const std::string& team, const std::string& qos, int nodes) {
    slurm_[id] = {team, qos, nodes, "PENDING", "JobHeldAdmin"};
    clock_.advance(std::chrono::seconds(1));
  }

  json Report() const {
    json jobs = json::array();
    for (const auto& [id, j] : slurm_) {
      jobs.push_back({{"id", id}, {"account", j.account}, {"qos", j.qos}, {"partition", "workers"},
                      {"nodes", j.nodes}, {"state", j.state}, {"reason", j.reason},
                      {"submit_time", 1767225600.0 + static_cast<double>(id)}});
    }
    return {{"jobs", jobs},
            {"partitions", {{"workers", {"w1", "w2", "w3", "w4"}}, {"dev", {"w1", "w2", "w3", "w4"}}}}};
  }

  /// One heartbeat; Slurm carries out the actions at once (release: runs; requeuehold:
  /// requeued held; hold: held). Returns {job: action}.
  std::map<uint64_t, std::string> Beat() {
    const json report = Report();
    json out = loop_->onHeartbeat("c1", &report);
    last_ = out;
    std::map<uint64_t, std::string> actions;
    for (const auto& a : out.value("slurm_job_actions", json::array())) {
      const uint64_t id = a["job"].get<uint64_t>();
      const std::string action = a["action"];
      actions[id] = action;
      J& j = slurm_.at(id);
      if (action == "release") {
        j.state = "RUNNING";
        j.reason = "None";
      } else if (action == "requeuehold") {
        j.state = "PENDING";
        j.reason = "job requeued in held state";  // Slurm 22.05's squeue %r
      } else if (action == "hold") {
        j.reason = "JobHeldAdmin";
      }
    }
    return actions;
  }

  std::string State(uint64_t id) const { return slurm_.at(id).state; }

  testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<GovernanceLoop> loop_;
  json last_;
};

TEST_F(GovernanceLoopTest, GovernanceListsTeamsAndQos) {
  json out = loop_->onHeartbeat("c1", nullptr);
  EXPECT_EQ(out["governance"]["accounts"], json::array({"team-a", "team-b"}));
  json names = json::array();
  for (const auto& q : out["governance"]["qos"]) names.push_back(q["name"]);
  EXPECT_EQ(names, json::array({"experimentation-priority", "fine-tuning-priority",
                                "inference-priority", "training-priority"}));
  EXPECT_FALSE(out.contains("slurm_job_actions"));
}

TEST_F(GovernanceLoopTest, BorrowThenReclaimThenIntraTeamPreemption) {
  // 1. Borrow: A's 3-node job runs (2 nominal + 1 borrowed of B's idle quota).
  Submit(1, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  EXPECT_EQ(State(1), "RUNNING");
  EXPECT_TRUE(Beat().empty()) << last_.dump();

  // 2. Reclaim: B's 2-node job takes its quota back; A's job is requeued and held.
  Submit(2, "team-b", "fine-tuning-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "requeuehold"}, {2, "release"}}));
  auto why = loop_->why("c1", 1);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_EQ((*why)["Verdict"], "Waiting") << why->dump();
  EXPECT_NE((*why)["Text"].get<std::string>().find("instances of ml.g5.8xlarge: request 3, nominal 2"),
            std::string::npos)
      << (*why)["Text"];

  // 3. Intra-team: B's experimentation job preempts B's own fine-tuning job (it cannot
  // borrow 2: the limit is 1).
  Submit(3, "team-b", "experimentation-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "requeuehold"}, {3, "release"}}));
  EXPECT_EQ(State(2), "PENDING");
  EXPECT_TRUE(Beat().empty()) << last_.dump();

  // B's job ends: A's 3-node job cannot borrow 1 while B's fine-tuning job waits within
  // B's nominal... the engine decides; whatever it releases must fit 4 nodes.
  slurm_.erase(3);
  Beat();
  int nodes = 0;
  for (const auto& [id, j] : slurm_) {
    if (j.state == "RUNNING") nodes += j.nodes;
  }
  EXPECT_LE(nodes, 4);
  EXPECT_EQ(State(2), "RUNNING");
}

TEST_F(GovernanceLoopTest, EqualPriorityReclaim) {
  Submit(1, "team-a", "training-priority", 3);
  Beat();
  Submit(2, "team-b", "training-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "requeuehold"}, {2, "release"}}));
}

TEST_F(GovernanceLoopTest, RestartCountsRunningJobsAsAdmittedAndHoldsUnadmittedOnes) {
  slurm_[1] = {"team-a", "training-priority", 3, "RUNNING", "None"};
  slurm_[2] = {"team-b", "training-priority", 1, "PENDING", "JobHeldAdmin"};
  // A new loop (a control plane restart) sees A's running job as admitted: B's 1-node job
  // fits B's nominal beside it.
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
  // A job that escaped the hold while this loop runs is held.
  slurm_[3] = {"team-a", "", 1, "PENDING", "Priority"};
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{3, "hold"}}));
}

TEST_F(GovernanceLoopTest, UnknownPriorityClassIsHeldAndExplained) {
  Submit(1, "team-a", "urgent-priority", 1);
  EXPECT_TRUE(Beat().empty());
  auto why = loop_->why("c1", 1);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ((*why)["Verdict"], "Unaccounted");
  EXPECT_NE((*why)["Reason"].get<std::string>().find("urgent"), std::string::npos) << why->dump();
  EXPECT_TRUE(absl::IsNotFound(loop_->why("c1", 99).status()));
}

TEST_F(GovernanceLoopTest, FinishedJobsFreeTheirQuota) {
  Submit(1, "team-a", "training-priority", 3);
  Beat();
  Submit(2, "team-a", "training-priority", 1);
  EXPECT_TRUE(Beat().empty()) << last_.dump();  // A is at its borrow limit
  slurm_.erase(1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
}

TEST_F(GovernanceLoopTest, DeletedQuotaReleasesItsHeldJobs) {
  Submit(1, "team-a", "training-priority", 3);
  Beat();
  Submit(2, "team-a", "training-priority", 1);
  Beat();
  auto q = store_->schedulerResource(model::governance_kind::kComputeQuota, "qteam-a");
  ASSERT_TRUE(q.ok());
  store::WriteBatch b;
  b.scheduler_resources.push_back({*q, q->revision, true});
  ASSERT_TRUE(store_->commit(b).ok());
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
  EXPECT_EQ(last_["governance"]["accounts"], json::array({"team-b"}));
}

TEST_F(GovernanceLoopTest, MalformedReportEntriesAreSkippedNotFatal) {
  Submit(1, "team-a", "training-priority", 1);
  json report = Report();
  // Wrong types in every member a job carries, partitions as an array, and a node count
  // beyond 32 bits (it must not wrap to a small gang that gets released).
  report["jobs"].push_back({{"id", 7}, {"account", 5}, {"state", 1}, {"nodes", "x"}});
  report["jobs"].push_back({{"id", 8}, {"account", "team-b"}, {"qos", json::array()},
                            {"partition", 3}, {"nodes", "2"}, {"submit_time", "now"},
                            {"state", "PENDING"}, {"reason", 0}});
  report["jobs"].push_back({{"id", 9}, {"account", "team-b"}, {"qos", "training-priority"},
                            {"partition", "workers"}, {"nodes", 4294967297.0},
                            {"state", "PENDING"}, {"reason", "JobHeldAdmin"}});
  json out;
  ASSERT_NO_THROW(out = loop_->onHeartbeat("c1", &report));
  std::map<uint64_t, std::string> actions;
  for (const auto& a : out.value("slurm_job_actions", json::array())) {
    actions[a["job"].get<uint64_t>()] = a["action"];
  }
  EXPECT_EQ(actions.count(1), 1u) << out.dump();  // the good job is still decided
  EXPECT_EQ(actions.count(9), 0u) << out.dump();  // 2^32+1 nodes never fit
  json bad_partitions = Report();
  bad_partitions["partitions"] = json::array({"w1"});
  ASSERT_NO_THROW(loop_->onHeartbeat("c1", &bad_partitions));
}

TEST_F(GovernanceLoopTest, ForgetDropsTheClustersJobs) {
  Submit(1, "team-a", "training-priority", 1);
  Beat();
  ASSERT_TRUE(loop_->why("c1", 1).ok());
  loop_->forget("c1");
  EXPECT_EQ(loop_->why("c1", 1).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hf::control
