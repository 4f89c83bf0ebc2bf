// Table tests of governance::slurm::Governor::Step (task governance on Slurm), with typed
// configurations and reports and no store: Slurm's view in, job actions out. Also the pure
// helpers around it (ParseReport, PhaseOf, PartitionsOf, ConfigOf).
#include "hyperfleet/governance/slurm/governor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hyperfleet/governance/slurm/config.h"
#include "hyperfleet/governance/slurm/report.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::governance::slurm {
namespace {

using nlohmann::json;
using Answer = std::map<uint64_t, std::string>;  // job -> action

constexpr char kType[] = "ml.g5.8xlarge";

/// Teams with `count` instances of quota each (LendAndBorrow, 50 %), classes inference 90,
/// training 70, fine-tuning 50, and a cluster of 4 instances.
Config Cluster(const std::map<std::string, int64_t>& teams, const std::string& key = "k1") {
  Config c;
  c.policy.priority_classes = {{"inference", 90}, {"training", 70}, {"fine-tuning", 50}};
  for (const auto& pc : c.policy.priority_classes) c.class_weight[pc.name] = pc.weight;
  for (const auto& [team, count] : teams) {
    TeamQuota q;
    q.team = team;
    q.resources.push_back({kType, count, {}, {}, {}});
    c.quotas.push_back(q);
    c.teams.insert(team);
  }
  c.capacity.push_back({kType, 32, 128, 1, 4});
  c.key = key;
  return c;
}

/// "workers" holds the 4 instances; "late" has no known node yet.
PartitionMap Partitions(bool late_known = false) {
  PartitionMap m;
  m.type["workers"] = kType;
  if (late_known) {
    m.type["late"] = kType;
  } else {
    m.problem["late"] = "partition late has no node of the cluster";
  }
  m.instances[kType] = 4;
  return m;
}

/// One job as Slurm shows it.
struct Job {
  std::string account = "team-a", qos = "training-priority";
  int nodes = 1;
  std::string state = "PENDING", reason = "JobHeldUser";
  Mark mark = Mark::kNone;
  std::string partition = "workers";
};

/// Slurm and a Governor: each Beat reports Slurm's jobs and carries the actions out as the
/// agent's scontrol commands do (agent/slurm_jobs.cc), unless `lost`.
class Sim {
 public:
  explicit Sim(Config config = Cluster({{"team-a", 2}, {"team-b", 2}}))
      : config(std::move(config)) {}

  Answer Beat(bool lost = false) {
    Report report;
    for (const auto& [id, j] : slurm) {
      report.jobs.push_back({id, j.account, j.state, j.reason, j.qos, j.partition, j.mark,
                             static_cast<double>(j.nodes), 1767225600.0 + static_cast<double>(id)});
    }
    now_ms += 1000;
    auto out = governor.Step(config, partitions, &report, now_ms);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    last = *out;
    Answer answer;
    for (const auto& a : out->jobs) {
      EXPECT_EQ(answer.count(a.job), 0u) << "two actions for job " << a.job;
      answer[a.job] = std::string(JobActionName(a.action));
      if (!lost && slurm.count(a.job)) Apply(slurm[a.job], a.action);
    }
    return answer;
  }

  static void Apply(Job& j, JobActionKind action) {
    switch (action) {
      case JobActionKind::kRelease:
        j.state = "RUNNING";
        j.reason = "None";
        break;
      case JobActionKind::kRequeueHold:
        j.mark = Mark::kGoverned;
        j.state = "PENDING";
        j.reason = "job requeued in held state";
        break;
      case JobActionKind::kHold:
        j.mark = Mark::kHeld;
        if (j.state == "PENDING") j.reason = "JobHeldAdmin";
        break;
      case JobActionKind::kDisown:
        j.mark = Mark::kNone;
        j.state = "RUNNING";
        j.reason = "None";
        break;
    }
  }

  Config config;
  PartitionMap partitions = Partitions();
  std::map<uint64_t, Job> slurm;
  Governor governor;
  Actions last;
  int64_t now_ms = 1767225600000;
};

// One job, as the first report after a (re)start sees it or as a later one does: what must
// Slurm do? team-a has 2 instances of quota and may borrow 1.
TEST(GovernorTest, OneJobsActionFromItsSlurmStateAndTheDecision) {
  struct Case {
    const char* name;
    bool first_report;  // the Governor's first report (a restarted control plane)
    Job job;
    const char* action;  // nullptr: none
    bool admitted;
  };
  const Case cases[] = {
      {"held by job_submit, fits", false, {}, "release", true},
      {"admin hold with our mark, fits", false,
       {.reason = "JobHeldAdmin", .mark = Mark::kHeld}, "release", true},
      {"REQUEUE_HOLD, fits", false, {.state = "REQUEUE_HOLD", .reason = "None"}, "release", true},
      {"user's hold, never fits", false, {.nodes = 4}, "hold", false},
      {"our admin hold, never fits", false,
       {.nodes = 4, .reason = "JobHeldAdmin", .mark = Mark::kHeld}, nullptr, false},
      {"requeued, the user's hold though marked governed", false,
       {.nodes = 4, .reason = "job requeued in held state", .mark = Mark::kGoverned}, "hold",
       false},
      {"released by the user, never fits", false, {.nodes = 4, .reason = "Priority"}, "hold",
       false},
      {"released, waiting, fits", false, {.reason = "Resources"}, nullptr, true},
      {"released before a restart: admitted then", true, {.nodes = 4, .reason = "Priority"},
       nullptr, true},
      {"running: admitted, even above quota", false,
       {.nodes = 4, .state = "RUNNING", .reason = "None"}, nullptr, true},
      {"completing", false, {.state = "COMPLETING", .reason = "None"}, nullptr, true},
      {"unknown priority class", false, {.qos = "urgent-priority"}, "hold", false},
      {"partition without known nodes", false, {.partition = "late"}, "hold", false},
      {"unknown partition", false, {.partition = "gpu"}, "hold", false},
      {"two partitions, one without nodes", false, {.partition = "workers,late"}, "hold", false},
      {"running without a known partition", false,
       {.state = "RUNNING", .reason = "None", .partition = "gpu"}, "requeuehold", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Sim sim;
    if (!c.first_report) sim.Beat();  // an empty report: later jobs are no restart's
    sim.slurm[7] = c.job;
    const Answer got = sim.Beat(/*lost=*/true);
    const Answer want = c.action ? Answer{{7, c.action}} : Answer{};
    EXPECT_EQ(got, want);
    const Governor::Job* job = sim.governor.job(7);
    ASSERT_NE(job, nullptr);
    EXPECT_EQ(job->admitted, c.admitted);
    // Level-triggered: the same report again asks the same.
    EXPECT_EQ(sim.Beat(/*lost=*/true), want);
  }
}

TEST(GovernorTest, BorrowThenReclaimPreemptsTheBorrower) {
  Sim sim;
  sim.slurm[1] = {.nodes = 3};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  ASSERT_EQ(sim.last.admitted.size(), 1u);
  EXPECT_TRUE(sim.last.admitted[0].borrows);
  EXPECT_TRUE(sim.Beat().empty());
  sim.slurm[2] = {.account = "team-b", .qos = "fine-tuning-priority", .nodes = 2};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "requeuehold"}, {2, "release"}}));
  ASSERT_EQ(sim.last.admitted.size(), 1u);
  EXPECT_EQ(sim.last.admitted[0].id, 2u);
  ASSERT_EQ(sim.last.admitted[0].victims.size(), 1u);
  EXPECT_EQ(sim.last.admitted[0].victims[0].victim, 1u);
  // Requeued: the user's hold, made an administrator's; then nothing.
  EXPECT_EQ(sim.Beat(), (Answer{{1, "hold"}}));
  EXPECT_TRUE(sim.Beat().empty());
  // B's job ends: A's job runs again.
  sim.slurm.erase(2);
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  EXPECT_EQ(sim.governor.job(2), nullptr);
}

TEST(GovernorTest, TeamsThatLeaveGovernanceHaveTheirHeldJobsDisowned) {
  Sim sim;
  sim.slurm[1] = {.nodes = 3};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  sim.slurm[2] = {};  // at A's borrow limit: held by us
  sim.slurm[3] = {};  // held by us, then taken over by an operator
  sim.slurm[4] = {.account = "team-b"};
  EXPECT_EQ(sim.Beat(), (Answer{{2, "hold"}, {3, "hold"}, {4, "release"}}));
  sim.slurm[3].mark = Mark::kNone;     // an operator's AdminComment replaced ours
  sim.slurm[5] = {.reason = "JobHeldUser"};  // not seen yet: no mark
  sim.config = Cluster({{"team-b", 2}}, "k2");
  // 2 is ours (marked); 3 is an operator's admin hold; 5 was never known.
  EXPECT_EQ(sim.Beat(/*lost=*/true), (Answer{{2, "disown"}}));
  EXPECT_EQ(sim.governor.job(1), nullptr);
  // Level-triggered while Slurm reports it held with our mark.
  EXPECT_EQ(sim.Beat(), (Answer{{2, "disown"}}));
  EXPECT_TRUE(sim.Beat().empty());
}

TEST(GovernorTest, AKnownJobOfADepartedTeamIsDisownedOnceEvenUnmarked) {
  Sim sim;
  sim.slurm[1] = {.nodes = 4};  // never fits: hold, lost
  EXPECT_EQ(sim.Beat(/*lost=*/true), (Answer{{1, "hold"}}));
  sim.config = Cluster({{"team-b", 2}}, "k2");
  // Unmarked, but the Governor knew it (job_submit's hold): released once.
  EXPECT_EQ(sim.Beat(/*lost=*/true), (Answer{{1, "disown"}}));
  EXPECT_TRUE(sim.Beat().empty());
}

TEST(GovernorTest, AConfigurationChangeKeepsAdmissionsAndQueuesTheRest) {
  Sim sim;
  sim.slurm[1] = {.nodes = 2};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  sim.slurm[2] = {.nodes = 1};
  EXPECT_EQ(sim.Beat(), (Answer{{2, "release"}}));
  // team-a's quota drops to 1: nothing is evicted, and nothing more is admitted.
  sim.config = Cluster({{"team-a", 1}, {"team-b", 2}}, "k2");
  sim.slurm[3] = {.nodes = 1};
  EXPECT_EQ(sim.Beat(), (Answer{{3, "hold"}}));
  EXPECT_TRUE(sim.governor.job(1)->admitted);
  EXPECT_TRUE(sim.governor.job(2)->admitted);
  EXPECT_EQ(sim.governor.config().key, "k2");
}

TEST(GovernorTest, ChangedRequestIsDecidedAnewAndKeepsItsPlace) {
  Sim sim;
  sim.slurm[1] = {.nodes = 1};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  sim.slurm[1].state = "PENDING";
  sim.slurm[1].reason = "Resources";
  EXPECT_TRUE(sim.Beat().empty());
  sim.slurm[1].nodes = 4;  // scontrol update: beyond 2 + 1 borrowed
  EXPECT_EQ(sim.Beat(), (Answer{{1, "hold"}}));
  EXPECT_EQ(sim.governor.job(1)->spec.count, 4);
  EXPECT_EQ(sim.governor.job(1)->spec.submit_time_ms, 1767225601000);
  sim.slurm[1].account = "team-b";  // still 4 > 2 + 1
  sim.slurm[1].nodes = 2;
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  EXPECT_EQ(sim.governor.job(1)->spec.team, "team-b");
}

TEST(GovernorTest, AJobWaitingForItsPartitionsNodesIsPlacedWhenTheyJoin) {
  Sim sim;
  sim.slurm[1] = {.partition = "late"};
  EXPECT_EQ(sim.Beat(), (Answer{{1, "hold"}}));
  EXPECT_EQ(sim.governor.job(1)->problem, "partition late has no node of the cluster");
  EXPECT_TRUE(sim.Beat().empty());
  sim.partitions = Partitions(/*late_known=*/true);
  EXPECT_EQ(sim.Beat(), (Answer{{1, "release"}}));
  EXPECT_EQ(sim.governor.job(1)->spec.instance_type, kType);
}

TEST(GovernorTest, WithoutAReportOnlyGovernanceChanges) {
  Sim sim;
  sim.slurm[1] = {.nodes = 4};
  EXPECT_EQ(sim.Beat(/*lost=*/true), (Answer{{1, "hold"}}));
  auto out = sim.governor.Step(sim.config, sim.partitions, nullptr, sim.now_ms);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->jobs.empty());  // no report: no job actions, no cycle
  EXPECT_TRUE(out->admitted.empty());
  out = sim.governor.Step(Cluster({{"team-b", 2}}, "k2"), sim.partitions, nullptr, sim.now_ms);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->jobs, (std::vector<JobAction>{{1, JobActionKind::kDisown}}));
}

TEST(GovernorTest, ARefusedPolicyIsAnErrorAndARefusedQuotaIsReported) {
  Governor g;
  Config bad = Cluster({{"team-a", 2}});
  for (int i = 0; i < 11; ++i) bad.policy.priority_classes.push_back({"c" + std::to_string(i), i});
  const Report empty;
  auto out = g.Step(bad, Partitions(), &empty, 0);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_FALSE(g.configured());
  EXPECT_FALSE(g.seen_report());

  Config quota = Cluster({{"team-a", 2}, {"team-b", 2}});
  quota.quotas[0].fair_share_weight = 1000;  // 0..100
  out = g.Step(quota, Partitions(), &empty, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->refused_quotas.size(), 1u);
  EXPECT_EQ(out->refused_quotas[0].first, "team-a");
  EXPECT_TRUE(g.configured());
  EXPECT_TRUE(g.seen_report());
}

TEST(GovernorTest, ExplainNeedsAnEngineAndAJobItHolds) {
  Sim sim;
  EXPECT_EQ(sim.governor.Explain(1).status().code(), absl::StatusCode::kFailedPrecondition);
  sim.slurm[1] = {.nodes = 4};
  sim.Beat();
  auto why = sim.governor.Explain(1);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_EQ(why->verdict, Verdict::kNeverFits);
  EXPECT_EQ(sim.governor.Explain(2).status().code(), absl::StatusCode::kNotFound);
}

TEST(SlurmReportTest, PhaseOfSlurmStates) {
  const std::pair<std::pair<const char*, const char*>, SlurmPhase> cases[] = {
      {{"PENDING", "JobHeldUser"}, SlurmPhase::kHeld},
      {{"PENDING", "JobHeldAdmin"}, SlurmPhase::kHeld},
      {{"PENDING", "job requeued in held state"}, SlurmPhase::kHeld},
      {{"PENDING", "Priority"}, SlurmPhase::kWaiting},
      {{"PENDING", "Resources"}, SlurmPhase::kWaiting},
      {{"REQUEUE_HOLD", "None"}, SlurmPhase::kHeld},
      {{"SPECIAL_EXIT", "None"}, SlurmPhase::kHeld},
      {{"COMPLETING", "None"}, SlurmPhase::kStopping},
      {{"REQUEUED", "None"}, SlurmPhase::kStopping},
      {{"RUNNING", "None"}, SlurmPhase::kRunning},
      {{"SUSPENDED", "None"}, SlurmPhase::kRunning},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(PhaseOf(in.first, in.second), want) << in.first << " " << in.second;
  }
}

// The agent's report as the agent service decodes it (agentapi/protocol.h), then typed for
// the Governor: jobs without an unsigned id are left out, members of other types read as
// missing, marks other than Hyperfleet's as none.
TEST(SlurmReportTest, ParseReportSkipsWhatIsNotAJob) {
  using agentapi::Decode;
  using agentapi::SlurmJobsReport;
  EXPECT_FALSE(Decode<SlurmJobsReport>(json::object()).ok());
  EXPECT_FALSE(Decode<SlurmJobsReport>(json{{"jobs", "x"}}).ok());
  EXPECT_FALSE(Decode<SlurmJobsReport>(json::array()).ok());
  json report = json::object();
  report["jobs"] = json::array(
      {{{"id", uint64_t{1}}, {"account", "team-a"}, {"qos", "training-priority"},
        {"partition", "workers"}, {"nodes", 3}, {"state", "PENDING"}, {"reason", "JobHeldUser"},
        {"submit_time", 1767225600.5}, {"mark", "hyperfleet-held"}},
       {{"id", -2}, {"account", "team-a"}},  // no unsigned id (as the agent's parser makes)
       {{"id", 2.5}},                        // nor this
       "garbage",
       {{"id", uint64_t{3}}, {"account", 5}, {"nodes", "2"}, {"mark", "checked by ops"}}});
  report["partitions"] = {{"workers", {"w1", 7, "w2"}}, {"odd", 5}};
  auto decoded = Decode<SlurmJobsReport>(report);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const Report r = ParseReport(*decoded);
  ASSERT_EQ(r.jobs.size(), 2u);
  const ReportedJob& a = r.jobs[0];
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(a.account, "team-a");
  EXPECT_EQ(a.qos, "training-priority");
  EXPECT_EQ(a.partition, "workers");
  EXPECT_EQ(a.state, "PENDING");
  EXPECT_EQ(a.reason, "JobHeldUser");
  EXPECT_EQ(a.nodes, 3.0);
  EXPECT_EQ(a.submit_time, 1767225600.5);
  EXPECT_EQ(a.mark, Mark::kHeld);
  const ReportedJob& b = r.jobs[1];
  EXPECT_EQ(b.id, 3u);
  EXPECT_EQ(b.account, "");
  EXPECT_EQ(b.nodes, 1.0);
  EXPECT_EQ(b.mark, Mark::kNone);
  auto parts = ParsePartitions(*decoded);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "workers");
  EXPECT_EQ(parts[0].hosts, (std::vector<std::string_view>{"w1", "w2"}));
}

TEST(SlurmConfigTest, PartitionsOfNodeTypes) {
  std::vector<model::Node> nodes(4);
  const char* hosts[] = {"w1.cluster.local", "w2", "g1", ""};
  const char* types[] = {kType, kType, "ml.g5.12xlarge", kType};
  for (int i = 0; i < 4; ++i) {
    nodes[i].hostname = hosts[i];
    nodes[i].instance_type = types[i];
  }
  const auto node_types = SlurmNodeTypes(nodes);
  EXPECT_EQ(node_types, (std::map<std::string, std::string>{
                            {"w1", kType}, {"w2", kType}, {"g1", "ml.g5.12xlarge"}}));
  const PartitionMap m = PartitionsOf({{"workers", {"w1", "w2"}},
                                       {"dev", {"w1", "w2", "g1"}},
                                       {"gpu", {"g1", "x9"}},
                                       {"late", {"x1"}}},
                                      node_types);
  EXPECT_EQ(m.type, (std::map<std::string, std::string>{{"workers", kType},
                                                        {"gpu", "ml.g5.12xlarge"}}));
  EXPECT_EQ(m.problem.at("late"), "partition late has no node of the cluster");
  EXPECT_NE(m.problem.at("dev").find("mixes instance types (ml.g5.12xlarge, ml.g5.8xlarge)"),
            std::string::npos);
  // Each node counts once, whatever partitions it is in.
  EXPECT_EQ(m.instances, (std::map<std::string, int64_t>{{kType, 2}, {"ml.g5.12xlarge", 1}}));
}

model::SchedulerResource Stored(const char* kind, const std::string& team, const json& body,
                                const char* status = model::scheduler_status::kCreated) {
  model::SchedulerResource r;
  r.kind = kind;
  r.team = team;
  r.status = status;
  r.body = body;
  return r;
}

TEST(SlurmConfigTest, ConfigOfStoredObjectsWithHyperPodsDefaults) {
  const auto& catalog = model::InstanceCatalog::Embedded();
  const json quota = {{"ComputeQuotaConfig",
                       {{"ComputeQuotaResources",
                         json::array({{{"InstanceType", "ml.g5.12xlarge"}, {"Count", 1}}})}}}};
  const std::vector<model::SchedulerResource> policies = {
      Stored(model::governance_kind::kSchedulerConfig, "",
             {{"SchedulerConfig", {{"PriorityClasses", {{{"Name", "x"}, {"Weight", 1}}}}}}},
             model::scheduler_status::kCreateFailed),
      Stored(model::governance_kind::kSchedulerConfig, "",
             {{"SchedulerConfig",
               {{"PriorityClasses", {{{"Name", "training"}, {"Weight", 70}}}},
                {"FairShare", "Disabled"}}}})};
  const std::vector<model::SchedulerResource> quotas = {
      Stored(model::governance_kind::kComputeQuota, "team-a", quota),
      Stored(model::governance_kind::kComputeQuota, "team-b", quota,
             model::scheduler_status::kDeleting),
      Stored(model::governance_kind::kComputeQuota, "", quota),
      Stored(model::governance_kind::kComputeQuota, "team-c",
             {{"ComputeQuotaConfig",
               {{"ComputeQuotaResources",
                 json::array({{{"InstanceType", "ml.nope"}, {"Count", 1}}})},
                {"ResourceSharingConfig", {{"Strategy", "Lend"}}},
                {"PreemptTeamTasks", "Never"}}},
              {"ActivationState", "Disabled"}})};
  const Config c = ConfigOf(policies, quotas, catalog, {{kType, 4}});
  EXPECT_EQ(c.class_weight, (std::map<std::string, int>{{"training", 70}}));
  EXPECT_FALSE(c.policy.fair_share);
  EXPECT_FALSE(c.policy.idle_resource_sharing);
  EXPECT_EQ(c.teams, (std::set<std::string, std::less<>>{"team-a", "team-c"}));
  ASSERT_EQ(c.quotas.size(), 2u);
  EXPECT_EQ(c.quotas[0].strategy, SharingStrategy::kLendAndBorrow);
  EXPECT_EQ(c.quotas[0].borrow_limit_percent, 50);
  EXPECT_TRUE(c.quotas[0].active);
  EXPECT_EQ(c.quotas[1].strategy, SharingStrategy::kLend);
  EXPECT_EQ(c.quotas[1].borrow_limit_percent, 0);
  EXPECT_EQ(c.quotas[1].preempt_team_tasks, PreemptTeamTasks::kNever);
  EXPECT_FALSE(c.quotas[1].active);
  // A quota's type with no node yet counts 0 instances; one the catalog lacks is left out.
  ASSERT_EQ(c.capacity.size(), 2u);
  EXPECT_EQ(c.capacity[0].name, "ml.g5.12xlarge");
  EXPECT_EQ(c.capacity[0].instances, 0);
  EXPECT_EQ(c.capacity[1].name, kType);
  EXPECT_EQ(c.capacity[1].instances, 4);
  // The key moves with the capacity and with a quota, not otherwise.
  EXPECT_EQ(ConfigOf(policies, quotas, catalog, {{kType, 4}}).key, c.key);
  EXPECT_NE(ConfigOf(policies, quotas, catalog, {{kType, 5}}).key, c.key);
  auto changed = quotas;
  changed[0].body["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Count"] = 2;
  EXPECT_NE(ConfigOf(policies, changed, catalog, {{kType, 4}}).key, c.key);
}

}  // namespace
}  // namespace hf::governance::slurm
