// GovernanceLoop: Slurm job reports in, job actions out, on a real (in-memory) store. The
// HyperPod worked scenarios of docs/governance.md as Slurm would show them.
#include "hyperfleet/control/governance_loop.h"

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"

#include "fakes/fake_clock.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/store/store.h"

namespace hf::control {
namespace {

using nlohmann::json;

/// The loop's answer to a heartbeat whose "slurm_jobs" is `report` (null: none), as the
/// members the agent service adds to the heartbeat response ({} when it adds none). The
/// report is decoded as the agent service decodes it (agentapi/protocol.h).
json OnHeartbeat(GovernanceLoop& loop, const std::string& cluster, const json* report) {
  std::optional<agentapi::SlurmJobsReport> typed;
  if (report != nullptr) {
    if (auto decoded = agentapi::Decode<agentapi::SlurmJobsReport>(*report); decoded.ok()) {
      typed = std::move(*decoded);
    }
  }
  auto answer = loop.onHeartbeat(cluster, typed ? &*typed : nullptr);
  if (!answer) return json::object();
  agentapi::HeartbeatResponse response;
  response.governance = answer->governance;
  response.slurm_job_actions = answer->slurm_job_actions;
  json out = response;
  out.erase("version");
  return out;
}

class GovernanceLoopTest : public ::testing::Test {
 protected:
  // A cluster `id` with four ml.g5.8xlarge workers w1..w4 in group "workers", instance ids
  // `instance_prefix` + 1..4.
  static void AddCluster(store::WriteBatch& b, const std::string& id, const std::string& name,
                         const std::string& instance_prefix) {
    model::Cluster c;
    c.id = id;
    c.name = name;
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id;
    b.clusters.push_back({c});
    for (int i = 1; i <= 4; ++i) {
      model::Node n;
      n.cluster_id = id;
      n.instance_id = instance_prefix + std::to_string(i);
      n.group = "workers";
      n.instance_type = "ml.g5.8xlarge";
      n.hostname = "w" + std::to_string(i);
      b.nodes.push_back({n});
    }
  }

  void SetUp() override {
    auto s = store::OpenSqliteStore(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    store::WriteBatch b;
    AddCluster(b, "c1", "gov", "i-0000000000000000");
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

  /// Slurm's view: job id -> (account, qos, nodes, state, reason, AdminComment).
  struct J {
    std::string account, qos;
    int nodes;
    std::string state, reason;
    std::string mark;
  };
  std::map<uint64_t, J> slurm_;
  std::map<uint64_t, double> submit_offset_;  ///< seconds added to a job's submit time
  std::map<uint64_t, std::string> partition_;  ///< a job's partitions if not "workers"

  /// What the agent's scontrol command for `action` does to job j, as Slurm 22.05 shows it.
  static void ApplyAction(J& j, const std::string& action) {
    if (action == "release") {
      j.state = "RUNNING";
      j.reason = "None";
    } else if (action == "requeuehold") {
      j.mark = "hyperfleet-governed";
      j.state = "PENDING";
      j.reason = "job requeued in held state";  // Slurm 22.05's squeue %r; the user's hold
    } else if (action == "hold") {
      j.mark = "hyperfleet-held";
      if (j.state == "PENDING") j.reason = "JobHeldAdmin";
    } else if (action == "disown") {
      j.mark = "hyperfleet-released";
      j.state = "RUNNING";  // Slurm's own scheduling starts it
      j.reason = "None";
    } else {
      ADD_FAILURE() << "unknown action " << action;
    }
  }

  /// As job_submit.lua holds it: priority 0, which Slurm 22.05 takes as the user's hold.
  void Submit(uint64_t id, const std::string& team, const std::string& qos, int nodes) {
    slurm_[id] = {team, qos, nodes, "PENDING", "JobHeldUser", ""};
    clock_.advance(std::chrono::seconds(1));
  }

  json Report() const {
    json jobs = json::array();
    for (const auto& [id, j] : slurm_) {
      jobs.push_back({{"id", id}, {"account", j.account}, {"qos", j.qos},
                      {"partition", partition_.count(id) ? partition_.at(id) : "workers"},
                      {"nodes", j.nodes}, {"state", j.state}, {"reason", j.reason},
                      {"submit_time", 1767225600.0 + static_cast<double>(id) +
                                          (submit_offset_.count(id) ? submit_offset_.at(id) : 0)}});
      // The agent reports only its own marks (ParseSlurmJobs).
      if (j.mark == "hyperfleet-governed" || j.mark == "hyperfleet-held") {
        jobs.back()["mark"] = j.mark;
      }
    }
    return {{"jobs", jobs},
            {"partitions", {{"workers", {"w1", "w2", "w3", "w4"}}, {"dev", {"w1", "w2", "w3", "w4"}}}}};
  }

  /// One heartbeat; Slurm carries out the actions at once as the agent's scripts do
  /// (slurm_jobs.cc SlurmJobActionCommands), unless `lost` (the answer never arrives).
  /// Returns {job: action}.
  std::map<uint64_t, std::string> Beat(bool lost = false) {
    const json report = Report();
    return Apply(OnHeartbeat(*loop_, "c1", &report), lost);
  }

  /// Carries out a heartbeat answer's actions as Beat does; returns {job: action}.
  std::map<uint64_t, std::string> Apply(const json& out, bool lost) {
    last_ = out;
    std::map<uint64_t, std::string> actions;
    for (const auto& a : out.value("slurm_job_actions", json::array())) {
      const uint64_t id = a["job"].get<uint64_t>();
      const std::string action = a["action"];
      EXPECT_EQ(actions.count(id), 0u) << "two actions for job " << id << ": " << out.dump();
      actions[id] = action;
      if (lost) continue;
      ApplyAction(slurm_.at(id), action);
    }
    return actions;
  }

  /// A restarted control plane: a new loop on the same store.
  void Restart() {
    loop_ = std::make_unique<GovernanceLoop>(*store_, model::InstanceCatalog::Embedded(), clock_);
  }

  void DeleteQuota(const std::string& team) {
    auto q = store_->schedulerResource(model::governance_kind::kComputeQuota, "q" + team);
    ASSERT_TRUE(q.ok());
    store::WriteBatch b;
    b.scheduler_resources.push_back({*q, q->revision, true});
    ASSERT_TRUE(store_->commit(b).ok());
  }

  std::string State(uint64_t id) const { return slurm_.at(id).state; }

  testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<GovernanceLoop> loop_;
  json last_;
};

TEST_F(GovernanceLoopTest, GovernanceListsTeamsAndQos) {
  json out = OnHeartbeat(*loop_, "c1", nullptr);
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
  // borrow 2: the limit is 1). A's requeued job, held by the user since requeuehold, is
  // made an administrator's hold.
  Submit(3, "team-b", "experimentation-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{
                        {1, "hold"}, {2, "requeuehold"}, {3, "release"}}));
  EXPECT_EQ(State(2), "PENDING");
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "hold"}}));
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

// A requeued victim shows COMPLETING with the nodes still completing (squeue's NumNodes
// falls as each node finishes): that is no new request, or the engine would admit a 1-node
// job that Slurm then runs on 3 (seen in e2e_governance_slurm).
TEST_F(GovernanceLoopTest, StoppingVictimsShrinkingNodeCountIsNoNewRequest) {
  Submit(1, "team-a", "training-priority", 3);
  Beat();
  Submit(2, "team-b", "fine-tuning-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "requeuehold"}, {2, "release"}}));
  slurm_.at(1).state = "COMPLETING";
  slurm_.at(1).nodes = 1;
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  auto why = loop_->why("c1", 1);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_EQ((*why)["Verdict"], "Waiting") << why->dump();
  // Requeued and held by the user (requeuehold): made an administrator's hold, not released.
  slurm_.at(1).state = "PENDING";
  slurm_.at(1).nodes = 3;
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "hold"}})) << last_.dump();
}

TEST_F(GovernanceLoopTest, RestartCountsRunningJobsAsAdmittedAndHoldsUnadmittedOnes) {
  slurm_[1] = {"team-a", "training-priority", 3, "RUNNING", "None", ""};
  slurm_[2] = {"team-b", "training-priority", 1, "PENDING", "JobHeldAdmin", ""};
  // A new loop (a control plane restart) sees A's running job as admitted: B's 1-node job
  // fits B's nominal beside it.
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
  // A job that escaped the hold while this loop runs is held.
  slurm_[3] = {"team-a", "", 1, "PENDING", "Priority", ""};
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{3, "hold"}}));
}

TEST_F(GovernanceLoopTest, UnknownPriorityClassIsHeldAndExplained) {
  Submit(1, "team-a", "urgent-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "hold"}}));  // an admin hold
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
  // A is at its borrow limit: the job stays held, by an administrator's hold now.
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "hold"}})) << last_.dump();
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  slurm_.erase(1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
}

TEST_F(GovernanceLoopTest, DeletedQuotaReleasesItsHeldJobs) {
  Submit(1, "team-a", "training-priority", 3);
  Beat();
  Submit(2, "team-a", "training-priority", 1);
  Beat();
  DeleteQuota("team-a");
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "disown"}}));
  EXPECT_EQ(last_["governance"]["accounts"], json::array({"team-b"}));
  EXPECT_EQ(State(2), "RUNNING");
  EXPECT_TRUE(Beat().empty()) << last_.dump();
}

// Issue 6 leftover 1: the release of a deleted quota's held jobs was one-shot, lost with
// the heartbeat's answer or a control plane restart. Marked held jobs of an account that is
// no longer governed are released whenever the agent reports them; unmarked holds (an
// operator's) never are, and nothing the engine did not admit is released while governed.
TEST_F(GovernanceLoopTest, DeletedQuotasHeldJobsAreReleasedUntilSlurmHasReleasedThem) {
  Submit(1, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  Submit(2, "team-a", "training-priority", 1);  // A is at its borrow limit
  Submit(3, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "hold"}, {3, "hold"}}));
  // An operator takes job 3 over: their AdminComment replaces our mark.
  slurm_[3].mark = "checked by ops";
  // Another account's job, held by an operator.
  slurm_[5] = {"other", "", 1, "PENDING", "JobHeldAdmin", ""};
  DeleteQuota("team-a");
  EXPECT_EQ(Beat(/*lost=*/true), (std::map<uint64_t, std::string>{{2, "disown"}}));
  // The answer was lost: the next heartbeat releases job 2 again.
  EXPECT_EQ(Beat(/*lost=*/true), (std::map<uint64_t, std::string>{{2, "disown"}}));
  // And so does a restarted control plane.
  Restart();
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "disown"}}));
  EXPECT_EQ(State(2), "RUNNING");
  EXPECT_EQ(State(3), "PENDING");
  EXPECT_EQ(State(5), "PENDING");
  EXPECT_TRUE(Beat().empty()) << last_.dump();
}

// A job held by the user (job_submit.lua's priority 0, or requeuehold) could be released by
// them: the first sight of it makes it an administrator's hold (hold, marked). A job the user
// released anyway is held again, or requeued and held had it started; one held with our mark
// gets nothing.
TEST_F(GovernanceLoopTest, UserHoldsBecomeAdminHoldsAndUserReleasesAreUndone) {
  Submit(1, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  Submit(2, "team-a", "training-priority", 1);  // A is at its borrow limit
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "hold"}}));
  EXPECT_EQ(slurm_[2].reason, "JobHeldAdmin");
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  // The hold action was lost: the job is still held by the user, so it is sent again.
  Submit(3, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(/*lost=*/true), (std::map<uint64_t, std::string>{{3, "hold"}}));
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{3, "hold"}}));
  // Two more, whose hold actions are lost; the user releases both (Slurm lets them: the
  // hold is still theirs) and one starts at once.
  Submit(4, "team-a", "training-priority", 1);
  Submit(5, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(/*lost=*/true), (std::map<uint64_t, std::string>{{4, "hold"}, {5, "hold"}}));
  slurm_[4].reason = "Priority";
  slurm_[5].state = "RUNNING";
  slurm_[5].reason = "None";
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{4, "hold"}, {5, "requeuehold"}}));
  // The requeued job is the user's hold again: it becomes an administrator's.
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{5, "hold"}}));
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  for (uint64_t id : {2, 3, 4, 5}) {
    EXPECT_EQ(slurm_[id].reason, "JobHeldAdmin") << id;
    EXPECT_EQ(slurm_[id].mark, "hyperfleet-held") << id;
  }
}

// Issue 6 leftover 3: a heartbeat looks only at the jobs that changed. After every heartbeat
// of a seeded random run (submissions, ends, user releases, lost answers), its actions equal
// a recomputation over every job from the engine's verdict (why) and Slurm's state.
TEST_F(GovernanceLoopTest, IncrementalActionsEqualAFullRecomputation) {
  std::mt19937 rng(7);
  const char* classes[] = {"inference-priority", "training-priority", "fine-tuning-priority",
                           "experimentation-priority"};
  uint64_t next = 1;
  for (int step = 0; step < 400; ++step) {
    const unsigned r = rng() % 10;
    if (r < 4) {
      Submit(next++, rng() % 2 ? "team-a" : "team-b", classes[rng() % 4],
             static_cast<int>(1 + rng() % 3));
    } else if (r < 6 && !slurm_.empty()) {
      auto it = slurm_.begin();
      std::advance(it, rng() % slurm_.size());
      slurm_.erase(it);  // ended or cancelled
    } else if (r == 6 && !slurm_.empty()) {
      auto it = slurm_.begin();
      std::advance(it, rng() % slurm_.size());
      // The user releases it: possible while the hold is still theirs.
      if (it->second.state == "PENDING" && it->second.reason != "JobHeldAdmin") {
        it->second.reason = "Priority";
      }
    }
    const json report = Report();
    const json out = OnHeartbeat(*loop_, "c1", &report);
    std::map<uint64_t, std::string> want;
    for (const auto& [id, j] : slurm_) {
      auto why = loop_->why("c1", id);
      ASSERT_TRUE(why.ok()) << id << ": " << why.status();
      const bool admitted = (*why)["Verdict"] == "Admitted";
      const bool held = j.state == "PENDING" &&
                        absl::AsciiStrToLower(j.reason).find("held") != std::string::npos;
      const char* action = nullptr;
      if (admitted) {
        if (held) action = "release";
      } else if (j.state == "RUNNING") {
        action = "requeuehold";
      } else if (!held || j.mark != "hyperfleet-held") {
        action = "hold";
      }
      if (action) want[id] = action;
    }
    ASSERT_EQ(Apply(out, /*lost=*/rng() % 5 == 0), want) << "step " << step << ": " << out.dump();
    clock_.advance(std::chrono::seconds(1));
  }
  for (int i = 0; i < 3; ++i) Beat();  // answers that arrive settle it
  int running = 0;
  for (const auto& [id, j] : slurm_) running += j.state == "RUNNING" ? j.nodes : 0;
  EXPECT_LE(running, 4);
  EXPECT_TRUE(Beat().empty()) << last_.dump();
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
  ASSERT_NO_THROW(out = OnHeartbeat(*loop_, "c1", &report));
  std::map<uint64_t, std::string> actions;
  for (const auto& a : out.value("slurm_job_actions", json::array())) {
    actions[a["job"].get<uint64_t>()] = a["action"];
  }
  EXPECT_EQ(actions.count(1), 1u) << out.dump();  // the good job is still decided
  EXPECT_NE(actions[9], "release") << out.dump();  // 2^32+1 nodes never fit
  json bad_partitions = Report();
  bad_partitions["partitions"] = json::array({"w1"});
  ASSERT_NO_THROW(OnHeartbeat(*loop_, "c1", &bad_partitions));
}

// A job's owner may change its node count, account or QOS while it is pending, also after
// its release (scontrol update): the loop must decide the changed request anew instead of
// keeping the one it admitted.
TEST_F(GovernanceLoopTest, ChangedRequestOfAKnownJobIsDecidedAnew) {
  Submit(1, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  slurm_[1].state = "PENDING";  // released, waiting for nodes
  slurm_[1].reason = "Resources";
  EXPECT_TRUE(Beat().empty());
  slurm_[1].nodes = 4;  // beyond team-a's 2 + 50 % borrow: never fits
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "hold"}}));
  auto why = loop_->why("c1", 1);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_NE(why->dump().find("4"), std::string::npos) << why->dump();

  // team-a runs 3 nodes (2 + 1 borrowed from team-b); its next job waits. Moved to team-b,
  // which has 1 node of nominal quota left, it runs.
  slurm_.erase(1);
  Submit(2, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
  Submit(3, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{3, "hold"}}));
  EXPECT_TRUE(Beat().empty());
  slurm_[3].account = "team-b";
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{3, "release"}}));

  // An id Slurm reuses for another job (larger) is a new request too.
  slurm_.erase(3);
  Submit(4, "team-b", "training-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{4, "release"}}));
  J reused = slurm_[4];
  reused.nodes = 2;
  reused.state = "PENDING";
  reused.reason = "JobHeldUser";
  slurm_[4] = reused;
  // Its 2 nodes are team-b's nominal quota: it reclaims the node team-a's job 2 borrows (the
  // old 1-node job, still admitted, would only have been released).
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "requeuehold"}, {4, "release"}}));
}

// Two clusters' heartbeats (and why() on both) run at the same time, as two agents' requests
// do: each cluster's decisions must be exactly those of the same reports handled alone
// (per-cluster state, one lock each). Also built with -fsanitize=thread to look for races.
TEST_F(GovernanceLoopTest, TwoClustersHeartbeatConcurrentlyAsIfAlone) {
  {
    store::WriteBatch b;
    AddCluster(b, "c2", "gov2", "i-1000000000000000");
    for (const auto* kind :
         {model::governance_kind::kComputeQuota, model::governance_kind::kSchedulerConfig}) {
      auto resources = store_->schedulerResources(kind, "c1");  // the same policy and quotas
      ASSERT_TRUE(resources.ok());
      for (const auto& src : *resources) {
        model::SchedulerResource r = src;
        r.id = "c2-" + r.id;
        r.arn = "arn:c2-" + r.id;
        r.cluster_id = "c2";
        r.revision = 0;
        b.scheduler_resources.push_back({r});
      }
    }
    auto committed = store_->commit(b);
    ASSERT_TRUE(committed.ok()) << committed.status();
  }
  // One cluster's traffic: a seeded stream of submissions, finishes and releases, the
  // actions carried out as the agent would. Returns every answer's actions, in order.
  auto drive = [](GovernanceLoop& loop, const std::string& cluster, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::map<uint64_t, J> jobs;
    std::vector<std::string> log;
    const char* classes[] = {"training-priority", "inference-priority", "fine-tuning-priority"};
    for (uint64_t beat = 0; beat < 150; ++beat) {
      if (rng() % 2 == 0) {
        jobs[beat + 1] = {rng() % 2 ? "team-a" : "team-b", classes[rng() % 3],
                          1 + static_cast<int>(rng() % 3), "PENDING", "JobHeldUser", ""};
      }
      if (!jobs.empty() && rng() % 4 == 0) jobs.erase(std::next(jobs.begin(), rng() % jobs.size()));
      json list = json::array();
      for (const auto& [id, j] : jobs) {
        list.push_back({{"id", id}, {"account", j.account}, {"qos", j.qos},
                        {"partition", "workers"}, {"nodes", j.nodes}, {"state", j.state},
                        {"reason", j.reason}, {"submit_time", 1767225600.0 + double(id)}});
        if (!j.mark.empty()) list.back()["mark"] = j.mark;
      }
      const json report = {{"jobs", list}, {"partitions", {{"workers", {"w1", "w2", "w3", "w4"}}}}};
      const json out = OnHeartbeat(loop, cluster, &report);
      log.push_back(out.value("slurm_job_actions", json::array()).dump());
      for (const auto& a : out.value("slurm_job_actions", json::array())) {
        ApplyAction(jobs.at(a["job"].get<uint64_t>()), a["action"].get<std::string>());
      }
      (void)loop.why(cluster, beat / 2);
    }
    return log;
  };
  std::vector<std::string> alone[2];
  {
    GovernanceLoop loop(*store_, model::InstanceCatalog::Embedded(), clock_);
    alone[0] = drive(loop, "c1", 11);
  }
  {
    GovernanceLoop loop(*store_, model::InstanceCatalog::Embedded(), clock_);
    alone[1] = drive(loop, "c2", 22);
  }
  ASSERT_NE(alone[0], alone[1]);
  for (const auto& log : alone) {  // both clusters admit and preempt, not only hold
    std::string all;
    for (const auto& l : log) all += l;
    EXPECT_NE(all.find("\"release\""), std::string::npos);
    EXPECT_NE(all.find("\"requeuehold\""), std::string::npos);
  }
  GovernanceLoop loop(*store_, model::InstanceCatalog::Embedded(), clock_);
  std::vector<std::string> together[2];
  std::thread t1([&] { together[0] = drive(loop, "c1", 11); });
  std::thread t2([&] { together[1] = drive(loop, "c2", 22); });
  std::thread t3([&] {
    for (int i = 0; i < 300; ++i) {
      (void)loop.why(i % 2 ? "c1" : "c2", static_cast<uint64_t>(i % 40));
      (void)loop.why("c3", 1);  // a cluster with no state
    }
  });
  t1.join();
  t2.join();
  t3.join();
  EXPECT_EQ(together[0], alone[0]);
  EXPECT_EQ(together[1], alone[1]);
}

// A deleted quota's held job is disowned, the answer is lost, and the quota comes back
// before the next heartbeat: the job is governed again (still held, not released), its
// running teammate counts as admitted, and it runs when quota frees up.
TEST_F(GovernanceLoopTest, QuotaBackBeforeTheDisownIsAppliedGovernsTheJobAgain) {
  Submit(1, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  Submit(2, "team-a", "training-priority", 1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "hold"}}));
  DeleteQuota("team-a");
  EXPECT_EQ(Beat(/*lost=*/true), (std::map<uint64_t, std::string>{{2, "disown"}}));
  Quota("team-a", 2);
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  EXPECT_EQ(State(2), "PENDING");
  slurm_.erase(1);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{2, "release"}}));
}

// A job submitted to a partition whose nodes the store does not know yet (an instance group
// still joining) cannot be decided; once they are known it must be, not stay held forever.
TEST_F(GovernanceLoopTest, JobOfAPartitionWhoseNodesJoinLaterIsDecidedThen) {
  Submit(1, "team-a", "training-priority", 1);
  json report = Report();
  report["jobs"][0]["partition"] = "late";
  report["partitions"]["late"] = {"x1"};
  json out = OnHeartbeat(*loop_, "c1", &report);
  EXPECT_EQ(out.value("slurm_job_actions", json::array()),
            json::parse(R"([{"job": 1, "action": "hold"}])"));
  auto why = loop_->why("c1", 1);
  ASSERT_TRUE(why.ok());
  EXPECT_NE(why->dump().find("no node of the cluster"), std::string::npos) << why->dump();
  report["jobs"][0]["reason"] = "JobHeldAdmin";
  report["jobs"][0]["mark"] = "hyperfleet-held";
  store::WriteBatch b;
  model::Node n;
  n.cluster_id = "c1";
  n.instance_id = "i-00000000000000009";
  n.group = "late";
  n.instance_type = "ml.g5.8xlarge";
  n.hostname = "x1";
  b.nodes.push_back({n});
  ASSERT_TRUE(store_->commit(b).ok());
  out = OnHeartbeat(*loop_, "c1", &report);
  EXPECT_EQ(out.value("slurm_job_actions", json::array()),
            json::parse(R"([{"job": 1, "action": "release"}])"));
}

// Slurm resets a job's submit time when it requeues it: a preempted job keeps its place in
// its team's queue (it is not a new request), ahead of a teammate submitted after it.
TEST_F(GovernanceLoopTest, RequeuedVictimKeepsItsPlaceThoughSlurmResetsItsSubmitTime) {
  Submit(1, "team-a", "training-priority", 3);  // 2 nominal + 1 borrowed
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  Submit(2, "team-b", "training-priority", 2);  // B reclaims its node
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "requeuehold"}, {2, "release"}}));
  submit_offset_[1] = 100;  // batch_requeue_fini: submit_time = now
  Submit(3, "team-a", "training-priority", 3);  // waits like job 1
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "hold"}, {3, "hold"}}));
  slurm_.erase(2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
}

// A job submitted to two partitions is listed with both while pending and with the one it
// runs in while running: after its requeue the list differs again. Decided anew, it keeps
// its place in the queue all the same.
TEST_F(GovernanceLoopTest, RequeuedMultiPartitionVictimKeepsItsPlace) {
  Submit(1, "team-a", "training-priority", 3);
  partition_[1] = "workers,dev";
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
  partition_[1] = "workers";  // running there
  EXPECT_TRUE(Beat().empty()) << last_.dump();
  Submit(2, "team-b", "training-priority", 2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "requeuehold"}, {2, "release"}}));
  partition_[1] = "workers,dev";
  submit_offset_[1] = 100;
  Submit(3, "team-a", "training-priority", 3);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "hold"}, {3, "hold"}}));
  slurm_.erase(2);
  EXPECT_EQ(Beat(), (std::map<uint64_t, std::string>{{1, "release"}}));
}

// The engine refuses the stored policy (11 classes: the API allows 10, the store does not
// check) while the nodes of a job's partition join: once the policy is valid again, the job
// is decided. The partition change is not used up by the heartbeats that decided nothing.
TEST_F(GovernanceLoopTest, PartitionChangeWhileThePolicyIsRefusedIsNotLost) {
  auto set_classes = [&](int extra) {
    auto p = store_->schedulerResource(model::governance_kind::kSchedulerConfig, "policy");
    ASSERT_TRUE(p.ok()) << p.status();
    model::SchedulerResource r = *p;
    auto& classes = r.body["SchedulerConfig"]["PriorityClasses"];
    classes.erase(classes.begin() + 4, classes.end());
    for (int i = 0; i < extra; ++i) {
      classes.push_back({{"Name", "c" + std::to_string(i)}, {"Weight", i}});
    }
    store::WriteBatch b;
    b.scheduler_resources.push_back({r, p->revision});
    ASSERT_TRUE(store_->commit(b).ok());
  };
  Submit(1, "team-a", "training-priority", 1);
  json report = Report();
  report["jobs"][0]["partition"] = "late";
  report["partitions"]["late"] = {"x1"};
  EXPECT_EQ(OnHeartbeat(*loop_, "c1", &report).value("slurm_job_actions", json::array()),
            json::parse(R"([{"job": 1, "action": "hold"}])"));
  report["jobs"][0]["reason"] = "JobHeldAdmin";
  report["jobs"][0]["mark"] = "hyperfleet-held";
  set_classes(7);
  EXPECT_EQ(OnHeartbeat(*loop_, "c1", &report), json::object());
  store::WriteBatch b;
  model::Node n;
  n.cluster_id = "c1";
  n.instance_id = "i-00000000000000009";
  n.group = "late";
  n.instance_type = "ml.g5.8xlarge";
  n.hostname = "x1";
  b.nodes.push_back({n});
  ASSERT_TRUE(store_->commit(b).ok());
  EXPECT_EQ(OnHeartbeat(*loop_, "c1", &report), json::object());
  set_classes(0);
  EXPECT_EQ(OnHeartbeat(*loop_, "c1", &report).value("slurm_job_actions", json::array()),
            json::parse(R"([{"job": 1, "action": "release"}])"));
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
