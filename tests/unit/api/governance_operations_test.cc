// GovernanceOperations on an in-memory store, behind the same model validation as the
// ApiHandler: every rule rejected with its field named and nothing written, versions and
// optimistic concurrency, uniqueness, statuses, events, excess reporting, list pages.
#include "hyperfleet/api/governance_operations.h"

#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/str_format.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;

class StepClock : public Clock {
 public:
  /// Each reading is one second after the previous one, so creation times differ.
  SystemTime now() const override {
    return SystemTime(std::chrono::seconds(1'700'000'000 + ++ticks_));
  }
  mutable std::atomic<int> ticks_{0};
};

class GovernanceTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(true); }

  void Reset(bool auto_settle) {
    store_ = std::move(*store::OpenSqliteStore(":memory:"));
    GovernanceOptions options;
    options.auto_settle = auto_settle;
    options.max_compute_quotas_per_cluster = 3;
    ops_ = std::make_unique<GovernanceOperations>(*store_, clock_, ids_, ApiConfig{}, options);
    cluster_ = AddCluster("gov", {{"ml.g5.8xlarge", 4}, {"ml.c5.xlarge", 1}});
  }

  /// Adds an InService cluster with groups of (instance type, count); returns it.
  model::Cluster AddCluster(const std::string& name,
                            std::vector<std::pair<std::string, int>> groups) {
    model::Cluster c;
    c.id = ids_.clusterId();
    c.name = name;
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
    c.status = model::cluster_status::kInService;
    c.creation_time = clock_.now();
    int i = 0;
    for (const auto& [type, count] : groups) {
      model::InstanceGroup g;
      g.name = "g" + std::to_string(i++);
      g.instance_type = type;
      g.target_count = count;
      g.spec = {{"InstanceGroupName", g.name}, {"InstanceType", type}, {"InstanceCount", count}};
      c.groups.push_back(g);
    }
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    EXPECT_TRUE(store_->commit(b).ok());
    return *store_->clusterById(c.id);
  }

  /// Validates as the ApiHandler does, then calls.
  StatusOr<Json> Call(const std::string& op, const Json& in) {
    const auto& model = *model::ServiceModel::Embedded();
    HF_RETURN_IF_ERROR(model.validateInput(op, in));
    return ops_->call(op, model.pruneInput(op, in));
  }

  /// The AWS error type of a failed call, and its message in `message`.
  std::string ErrorOf(const StatusOr<Json>& r, std::string* message = nullptr) {
    if (r.ok()) return "OK";
    if (message) *message = std::string(r.status().message());
    return AwsErrorType(r.status());
  }

  Json Policy(const std::string& name, Json config = Json::object()) {
    return {{"Name", name}, {"ClusterArn", cluster_.arn}, {"SchedulerConfig", config}};
  }
  Json Quota(const std::string& name, const std::string& team, Json resources,
             Json extra = Json::object()) {
    Json q = {{"Name", name},
              {"ClusterArn", cluster_.arn},
              {"ComputeQuotaConfig", {{"ComputeQuotaResources", resources}}},
              {"ComputeQuotaTarget", {{"TeamName", team}}}};
    q.update(extra);
    return q;
  }
  static Json G5(int count) { return Json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", count}}}); }

  size_t Count(const char* kind) { return store_->schedulerResources(kind, "")->size(); }
  std::vector<std::string> EventTexts() {
    store::EventQuery q;
    auto page = store_->listEvents(cluster_.id, q);
    std::vector<std::string> out;
    for (const auto& e : page->items) out.push_back(e.level + " " + e.description);
    return out;
  }

  StepClock clock_;
  SequentialIdSource ids_{7};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<GovernanceOperations> ops_;
  model::Cluster cluster_;
};

TEST_F(GovernanceTest, ModelConstraintsNameTheFieldAndWriteNothing) {
  struct Case {
    std::string op;
    Json in;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"CreateClusterSchedulerConfig", Policy("bad_name"), "'name'"},
      {"CreateClusterSchedulerConfig",
       Policy("p", {{"PriorityClasses", {{{"Name", "x"}, {"Weight", 101}}}}}),
       "schedulerConfig.priorityClasses.1.member.weight"},
      {"CreateClusterSchedulerConfig",
       Policy("p", {{"PriorityClasses", {{{"Name", "UPPER"}, {"Weight", 1}}}}}),
       "schedulerConfig.priorityClasses.1.member.name"},
      {"CreateClusterSchedulerConfig", Policy("p", {{"FairShare", "Sometimes"}}),
       "schedulerConfig.fairShare"},
      {"CreateClusterSchedulerConfig",
       {{"Name", "p"}, {"ClusterArn", "arn:aws:sagemaker:us-west-2:1:cluster/x"},
        {"SchedulerConfig", Json::object()}},
       "clusterArn"},
      {"CreateComputeQuota", Quota("q", "Team_A", G5(1)), "computeQuotaTarget.teamName"},
      {"CreateComputeQuota",
       Quota("q", "a", G5(1), {{"ComputeQuotaTarget", {{"TeamName", "a"}, {"FairShareWeight", 101}}}}),
       "computeQuotaTarget.fairShareWeight"},
      {"CreateComputeQuota",
       Quota("q", "a", G5(1),
             {{"ComputeQuotaConfig",
               {{"ResourceSharingConfig", {{"Strategy", "LendAndBorrow"}, {"BorrowLimit", 10001}}}}}}),
       "computeQuotaConfig.resourceSharingConfig.borrowLimit"},
      {"CreateComputeQuota",
       Quota("q", "a", Json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", -1}}})),
       "computeQuotaConfig.computeQuotaResources.1.member.count"},
      {"CreateComputeQuota",
       Quota("q", "a", Json::array({{{"InstanceType", "ml.nope"}, {"Count", 1}}})),
       "computeQuotaConfig.computeQuotaResources.1.member.instanceType"},
      {"CreateComputeQuota", Quota("q", "a", G5(1), {{"ActivationState", "On"}}),
       "activationState"},
      {"UpdateComputeQuota", {{"ComputeQuotaId", "ABC"}, {"TargetVersion", 1}},
       "computeQuotaId"},
  };
  for (const auto& c : cases) {
    std::string message;
    EXPECT_EQ(ErrorOf(Call(c.op, c.in), &message), "ValidationException") << c.in.dump();
    EXPECT_NE(message.find(c.field), std::string::npos) << message;
  }
  Json too_many = Json::array();
  for (int i = 0; i < 11; ++i) too_many.push_back({{"Name", "c" + std::to_string(i)}, {"Weight", i}});
  std::string message;
  EXPECT_EQ(ErrorOf(Call("CreateClusterSchedulerConfig", Policy("p", {{"PriorityClasses", too_many}})),
                    &message),
            "ValidationException");
  EXPECT_NE(message.find("schedulerConfig.priorityClasses"), std::string::npos) << message;
  EXPECT_EQ(Count(model::governance_kind::kSchedulerConfig), 0u);
  EXPECT_EQ(Count(model::governance_kind::kComputeQuota), 0u);
  EXPECT_TRUE(EventTexts().empty());
}

TEST_F(GovernanceTest, RulesBeyondTheModelNameTheFieldAndWriteNothing) {
  auto resources = [](Json entry) { return Json::array({entry}); };
  struct Case {
    std::string op;
    Json in;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"CreateClusterSchedulerConfig",
       Policy("p", {{"PriorityClasses",
                     {{{"Name", "x"}, {"Weight", 1}}, {{"Name", "x"}, {"Weight", 2}}}}}),
       "schedulerConfig.priorityClasses.2.member.name"},
      // Jobs name class X as X or X-priority: both cannot be classes (either order).
      {"CreateClusterSchedulerConfig",
       Policy("p", {{"PriorityClasses", {{{"Name", "training-priority"}, {"Weight", 1}},
                                         {{"Name", "training"}, {"Weight", 2}}}}}),
       "schedulerConfig.priorityClasses.2.member.name"},
      {"CreateClusterSchedulerConfig",
       Policy("p", {{"PriorityClasses", {{{"Name", std::string(41, 'a')}, {"Weight", 1}}}}}),
       "schedulerConfig.priorityClasses.1.member.name"},
      {"CreateComputeQuota", Quota("q", std::string(41, 'a'), G5(1)),
       "computeQuotaTarget.teamName"},
      {"CreateComputeQuota",
       Quota("q", "a", Json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", 1}},
                                    {{"InstanceType", "ml.g5.8xlarge"}, {"Count", 2}}})),
       "computeQuotaConfig.computeQuotaResources.2.member.instanceType"},
      {"CreateComputeQuota", Quota("q", "a", resources({{"InstanceType", "ml.g5.8xlarge"}})),
       "computeQuotaConfig.computeQuotaResources.1.member"},
      {"CreateComputeQuota",
       Quota("q", "a", resources({{"InstanceType", "ml.g5.8xlarge"}, {"Count", 1}, {"VCpu", 4}})),
       "computeQuotaConfig.computeQuotaResources.1.member.vCpu"},
      {"CreateComputeQuota",
       Quota("q", "a", resources({{"InstanceType", "ml.c5.xlarge"}, {"Accelerators", 1}})),
       "computeQuotaConfig.computeQuotaResources.1.member.accelerators"},
      {"CreateComputeQuota",
       Quota("q", "a",
             resources({{"InstanceType", "ml.c5.xlarge"},
                        {"AcceleratorPartition", {{"Type", "mig-1g.5gb"}, {"Count", 1}}}})),
       "computeQuotaConfig.computeQuotaResources.1.member.acceleratorPartition.type"},
      {"CreateComputeQuota",
       Quota("q", "a", G5(1),
             {{"ComputeQuotaConfig",
               {{"ResourceSharingConfig", {{"Strategy", "Lend"}, {"BorrowLimit", 10}}}}}}),
       "computeQuotaConfig.resourceSharingConfig.borrowLimit"},
      {"CreateComputeQuota",
       Quota("q", "a", G5(1),
             {{"ComputeQuotaConfig",
               {{"ResourceSharingConfig",
                 {{"Strategy", "LendAndBorrow"},
                  {"AbsoluteBorrowLimits",
                   {{{"InstanceType", "ml.c5.xlarge"}, {"Count", 1}},
                    {{"InstanceType", "ml.c5.xlarge"}, {"Count", 1}}}}}}}}}),
       "computeQuotaConfig.resourceSharingConfig.absoluteBorrowLimits.2.member.instanceType"},
      {"CreateComputeQuota",
       Quota("q", "a", G5(1),
             {{"Tags", {{{"Key", "k"}, {"Value", "1"}}, {{"Key", "k"}, {"Value", "2"}}}}}),
       "tags.2.member.key"},
  };
  for (const auto& c : cases) {
    std::string message;
    EXPECT_EQ(ErrorOf(Call(c.op, c.in), &message), "ValidationException") << c.in.dump();
    EXPECT_NE(message.find("'" + c.field + "'"), std::string::npos) << message;
  }
  EXPECT_EQ(Count(model::governance_kind::kSchedulerConfig), 0u);
  EXPECT_EQ(Count(model::governance_kind::kComputeQuota), 0u);
  EXPECT_TRUE(EventTexts().empty());
}

TEST_F(GovernanceTest, ExcessEventNamesAtMostTenTeams) {
  GovernanceOptions options;
  options.max_compute_quotas_per_cluster = 20;
  ops_ = std::make_unique<GovernanceOperations>(*store_, clock_, ids_, ApiConfig{}, options);
  for (int i = 0; i < 12; ++i) {
    const std::string team = absl::StrFormat("team-%02d", i);
    auto created = Call("CreateComputeQuota", Quota("q" + team, team, G5(1)));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  std::string last;
  for (const auto& e : EventTexts()) {
    if (e.rfind("Warn", 0) == 0) last = e;
  }
  EXPECT_NE(last.find("12 instances allocated (teams team-00, team-01, team-02, team-03, "
                      "team-04, team-05, team-06, team-07, team-08, team-09 and 2 more), "
                      "the cluster has 4 (8 over)"),
            std::string::npos)
      << last;
}

TEST_F(GovernanceTest, NamesOfFortyCharactersAreAccepted) {
  const std::string forty(40, 'a');
  EXPECT_TRUE(Call("CreateClusterSchedulerConfig",
                   Policy("p", {{"PriorityClasses", {{{"Name", forty}, {"Weight", 1}}}}}))
                  .ok());
  EXPECT_TRUE(Call("CreateComputeQuota", Quota("q", forty, G5(1))).ok());
}

TEST_F(GovernanceTest, CreateDescribeWithDefaultsAndStatusTransitions) {
  Reset(/*auto_settle=*/false);
  auto created = Call("CreateClusterSchedulerConfig",
                      Policy("policy", {{"PriorityClasses", {{{"Name", "training"}, {"Weight", 70}}}}}));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = (*created)["ClusterSchedulerConfigId"];
  EXPECT_TRUE(std::regex_match(id, std::regex("[a-z0-9]{12}")));
  EXPECT_EQ((*created)["ClusterSchedulerConfigArn"],
            "arn:aws:sagemaker:us-west-2:123456789012:cluster-scheduler-config/" + id);
  auto d = Call("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)["Status"], "Creating");
  EXPECT_EQ((*d)["ClusterSchedulerConfigVersion"], 1);
  EXPECT_EQ((*d)["ClusterArn"], cluster_.arn);
  EXPECT_EQ((*d)["SchedulerConfig"]["FairShare"], "Enabled");  // the documented default
  EXPECT_EQ((*d)["StatusDetails"], (Json{{"FairShare", "Creating"}, {"PriorityClasses", "Creating"}}));
  ASSERT_TRUE(ops_->settle(cluster_.id).ok());
  d = Call("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}});
  EXPECT_EQ((*d)["Status"], "Created");

  auto q = Call("CreateComputeQuota", Quota("qa", "team-a", G5(2)));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)["ComputeQuotaArn"],
            "arn:aws:sagemaker:us-west-2:123456789012:compute-quota/" +
                (*q)["ComputeQuotaId"].get<std::string>());
  ASSERT_TRUE(ops_->settle("").ok());
  auto dq = Call("DescribeComputeQuota", {{"ComputeQuotaId", (*q)["ComputeQuotaId"]}});
  ASSERT_TRUE(dq.ok());
  EXPECT_EQ((*dq)["Status"], "Created");
  EXPECT_EQ((*dq)["ActivationState"], "Enabled");
  EXPECT_EQ((*dq)["ComputeQuotaTarget"], (Json{{"TeamName", "team-a"}, {"FairShareWeight", 0}}));
  EXPECT_EQ((*dq)["ComputeQuotaConfig"]["ResourceSharingConfig"],
            (Json{{"Strategy", "LendAndBorrow"}, {"BorrowLimit", 50}}));
  EXPECT_EQ((*dq)["ComputeQuotaConfig"]["PreemptTeamTasks"], "LowerPriority");

  // Every change is an event of the cluster.
  const auto events = EventTexts();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_NE(events[0].find("cluster policy policy (ClusterSchedulerConfig " + id +
                           ") creation started"),
            std::string::npos)
      << events[0];
  EXPECT_NE(events[1].find("created, version 1"), std::string::npos) << events[1];
}

TEST_F(GovernanceTest, OnePolicyPerClusterAndOneQuotaPerTeam) {
  auto first = Call("CreateClusterSchedulerConfig", Policy("first"));
  ASSERT_TRUE(first.ok());
  std::string message;
  EXPECT_EQ(ErrorOf(Call("CreateClusterSchedulerConfig", Policy("second")), &message),
            "ConflictException");
  EXPECT_NE(message.find((*first)["ClusterSchedulerConfigId"].get<std::string>()),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("first"), std::string::npos) << message;

  auto qa = Call("CreateComputeQuota", Quota("qa", "team-a", G5(1)));
  ASSERT_TRUE(qa.ok());
  EXPECT_EQ(ErrorOf(Call("CreateComputeQuota", Quota("qa2", "team-a", G5(1))), &message),
            "ConflictException");
  EXPECT_NE(message.find("Team team-a already has compute quota qa"), std::string::npos)
      << message;
  EXPECT_TRUE(Call("CreateComputeQuota", Quota("qb", "team-b", G5(1))).ok());
  // Another cluster takes its own policy and the same team.
  auto other = AddCluster("other", {{"ml.c5.xlarge", 2}});
  Json p = Policy("first");
  p["ClusterArn"] = other.arn;
  EXPECT_TRUE(Call("CreateClusterSchedulerConfig", p).ok());
  Json q = Quota("qa", "team-a", Json::array());
  q["ClusterArn"] = other.arn;
  EXPECT_TRUE(Call("CreateComputeQuota", q).ok());
  // The per-cluster limit (3 in this test).
  EXPECT_TRUE(Call("CreateComputeQuota", Quota("qc", "team-c", G5(0))).ok());
  EXPECT_EQ(ErrorOf(Call("CreateComputeQuota", Quota("qd", "team-d", G5(0)))),
            "ResourceLimitExceeded");
}

TEST_F(GovernanceTest, UnknownClusterOrIdIsNotFoundAndDeletingClusterIsAConflict) {
  Json p = Policy("p");
  p["ClusterArn"] = "arn:aws:sagemaker:us-west-2:123456789012:cluster/aaaaaaaaaaaa";
  EXPECT_EQ(ErrorOf(Call("CreateClusterSchedulerConfig", p)), "ResourceNotFound");
  EXPECT_EQ(ErrorOf(Call("DescribeComputeQuota", {{"ComputeQuotaId", "aaaaaaaaaaaa"}})),
            "ResourceNotFound");
  EXPECT_EQ(ErrorOf(Call("DeleteClusterSchedulerConfig",
                         {{"ClusterSchedulerConfigId", "aaaaaaaaaaaa"}})),
            "ResourceNotFound");
  EXPECT_EQ(ErrorOf(Call("UpdateComputeQuota",
                         {{"ComputeQuotaId", "aaaaaaaaaaaa"}, {"TargetVersion", 1}})),
            "ResourceNotFound");
  model::Cluster c = cluster_;
  c.status = model::cluster_status::kDeleting;
  store::WriteBatch b;
  b.clusters.push_back({c, c.revision, false});
  ASSERT_TRUE(store_->commit(b).ok());
  EXPECT_EQ(ErrorOf(Call("CreateClusterSchedulerConfig", Policy("p"))), "ConflictException");
}

TEST_F(GovernanceTest, UpdatesNeedTheCurrentVersionAndKeepOldVersions) {
  auto q = Call("CreateComputeQuota", Quota("qa", "team-a", G5(1)));
  ASSERT_TRUE(q.ok());
  const Json id = (*q)["ComputeQuotaId"];
  auto u = Call("UpdateComputeQuota", {{"ComputeQuotaId", id},
                                       {"TargetVersion", 1},
                                       {"ComputeQuotaConfig", {{"ComputeQuotaResources", G5(2)}}},
                                       {"ActivationState", "Disabled"}});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ((*u)["ComputeQuotaVersion"], 2);
  EXPECT_EQ((*u)["ComputeQuotaArn"], (*q)["ComputeQuotaArn"]);
  std::string message;
  EXPECT_EQ(ErrorOf(Call("UpdateComputeQuota", {{"ComputeQuotaId", id}, {"TargetVersion", 1}}),
                    &message),
            "ConflictException");
  EXPECT_NE(message.find("TargetVersion 1 does not match the current version 2"),
            std::string::npos)
      << message;
  // The team is the quota's identity.
  EXPECT_EQ(ErrorOf(Call("UpdateComputeQuota", {{"ComputeQuotaId", id},
                                                {"TargetVersion", 2},
                                                {"ComputeQuotaTarget", {{"TeamName", "team-b"}}}}),
                    &message),
            "ValidationException");
  EXPECT_NE(message.find("computeQuotaTarget.teamName"), std::string::npos) << message;
  // A rejected update changes nothing.
  auto d = Call("DescribeComputeQuota", {{"ComputeQuotaId", id}});
  EXPECT_EQ((*d)["ComputeQuotaVersion"], 2);
  EXPECT_EQ((*d)["Status"], "Updated");
  EXPECT_EQ((*d)["ActivationState"], "Disabled");
  EXPECT_EQ((*d)["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Count"], 2);
  auto v1 = Call("DescribeComputeQuota", {{"ComputeQuotaId", id}, {"ComputeQuotaVersion", 1}});
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)["ComputeQuotaVersion"], 1);
  EXPECT_EQ((*v1)["ActivationState"], "Enabled");
  EXPECT_EQ((*v1)["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Count"], 1);
  EXPECT_EQ(ErrorOf(Call("DescribeComputeQuota", {{"ComputeQuotaId", id}, {"ComputeQuotaVersion", 9}})),
            "ResourceNotFound");

  auto p = Call("CreateClusterSchedulerConfig", Policy("p"));
  const Json pid = (*p)["ClusterSchedulerConfigId"];
  auto pu = Call("UpdateClusterSchedulerConfig",
                 {{"ClusterSchedulerConfigId", pid},
                  {"TargetVersion", 1},
                  {"SchedulerConfig", {{"FairShare", "Disabled"}}},
                  {"Description", "first come, first served"}});
  ASSERT_TRUE(pu.ok()) << pu.status();
  EXPECT_EQ((*pu)["ClusterSchedulerConfigVersion"], 2);
  auto pd = Call("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", pid}});
  EXPECT_EQ((*pd)["SchedulerConfig"]["FairShare"], "Disabled");
  EXPECT_EQ((*pd)["Description"], "first come, first served");
  EXPECT_EQ((*pd)["Status"], "Updated");
  EXPECT_EQ(ErrorOf(Call("UpdateClusterSchedulerConfig",
                         {{"ClusterSchedulerConfigId", pid}, {"TargetVersion", 1}})),
            "ConflictException");
}

TEST_F(GovernanceTest, ChangesInFlightAreConflictsAndDeleteGoesThroughDeleting) {
  Reset(/*auto_settle=*/false);
  auto p = Call("CreateClusterSchedulerConfig", Policy("p"));
  const Json id = (*p)["ClusterSchedulerConfigId"];
  EXPECT_EQ(ErrorOf(Call("UpdateClusterSchedulerConfig",
                         {{"ClusterSchedulerConfigId", id}, {"TargetVersion", 1}})),
            "ConflictException");
  ASSERT_TRUE(ops_->settle(cluster_.id).ok());
  EXPECT_TRUE(Call("DeleteClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}}).ok());
  auto d = Call("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}});
  EXPECT_EQ((*d)["Status"], "Deleting");
  // A second delete is accepted and changes nothing; the policy still blocks a new one.
  EXPECT_TRUE(Call("DeleteClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}}).ok());
  EXPECT_EQ(ErrorOf(Call("CreateClusterSchedulerConfig", Policy("p2"))), "ConflictException");
  ASSERT_TRUE(ops_->settle("").ok());
  EXPECT_EQ(ErrorOf(Call("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", id}})),
            "ResourceNotFound");
  EXPECT_TRUE(Call("CreateClusterSchedulerConfig", Policy("p2")).ok());
  const auto events = EventTexts();
  EXPECT_NE(events[events.size() - 2].find("deleted"), std::string::npos);
}

TEST_F(GovernanceTest, QuotaBeyondTheClusterIsAcceptedAndReported) {
  // The cluster has 4 x ml.g5.8xlarge (1 GPU each).
  ASSERT_TRUE(Call("CreateComputeQuota", Quota("qa", "team-a", G5(3))).ok());
  for (const auto& e : EventTexts()) EXPECT_EQ(e.rfind("Warn", 0), std::string::npos) << e;
  auto qb = Call("CreateComputeQuota",
                 Quota("qb", "team-b",
                       Json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Accelerators", 2}}})));
  ASSERT_TRUE(qb.ok()) << qb.status();
  std::vector<std::string> warnings;
  for (const auto& e : EventTexts()) {
    if (e.rfind("Warn", 0) == 0) warnings.push_back(e);
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ml.g5.8xlarge: 5 instances allocated (teams team-a, team-b), "
                             "the cluster has 4 (1 over)"),
            std::string::npos)
      << warnings[0];
  // Quota for a type the cluster lacks is excess too; a Disabled quota counts for nothing.
  ASSERT_TRUE(Call("CreateComputeQuota",
                   Quota("qc", "team-c",
                         Json::array({{{"InstanceType", "ml.p5.48xlarge"}, {"Count", 1}}}),
                         {{"ActivationState", "Disabled"}}))
                  .ok());
  warnings.clear();
  for (const auto& e : EventTexts()) {
    if (e.rfind("Warn", 0) == 0) warnings.push_back(e);
  }
  EXPECT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings.back().find("p5"), std::string::npos) << warnings.back();
}

TEST_F(GovernanceTest, RatioFill) {
  // ml.g5.8xlarge: 1 GPU, 32 vCPU, 128 GiB.
  auto a = QuotaAmountOf({{"InstanceType", "ml.g5.8xlarge"}, {"Count", 2}});
  EXPECT_DOUBLE_EQ(a.accelerators, 2);
  EXPECT_DOUBLE_EQ(a.vcpus, 64);
  EXPECT_DOUBLE_EQ(a.instances, 2);
  a = QuotaAmountOf({{"InstanceType", "ml.g5.8xlarge"}, {"VCpu", 16}});
  EXPECT_DOUBLE_EQ(a.accelerators, 0);
  EXPECT_DOUBLE_EQ(a.memory_gib, 64);
  EXPECT_DOUBLE_EQ(a.instances, 0.5);
  a = QuotaAmountOf({{"InstanceType", "ml.g5.8xlarge"}, {"Accelerators", 3}});
  EXPECT_DOUBLE_EQ(a.vcpus, 96);
  EXPECT_DOUBLE_EQ(a.instances, 3);
}

TEST_F(GovernanceTest, ListFiltersSortsAndPages) {
  for (const char* team : {"t1", "t2", "t3"}) {
    ASSERT_TRUE(Call("CreateComputeQuota", Quota(std::string("quota-") + team, team, G5(1))).ok());
  }
  auto other = AddCluster("other", {{"ml.c5.xlarge", 2}});
  Json q = Quota("elsewhere", "t1", Json::array());
  q["ClusterArn"] = other.arn;
  ASSERT_TRUE(Call("CreateComputeQuota", q).ok());

  auto names = [](const Json& page) {
    std::vector<std::string> out;
    for (const auto& s : page["ComputeQuotaSummaries"]) out.push_back(s["Name"]);
    return out;
  };
  // Default: newest first.
  auto all = Call("ListComputeQuotas", Json::object());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(names(*all), (std::vector<std::string>{"elsewhere", "quota-t3", "quota-t2", "quota-t1"}));
  EXPECT_EQ((*all)["ComputeQuotaSummaries"][0]["ComputeQuotaTarget"]["TeamName"], "t1");
  auto mine = Call("ListComputeQuotas", {{"ClusterArn", cluster_.arn},
                                         {"SortBy", "Name"},
                                         {"SortOrder", "Ascending"},
                                         {"MaxResults", 2}});
  EXPECT_EQ(names(*mine), (std::vector<std::string>{"quota-t1", "quota-t2"}));
  ASSERT_TRUE(mine->contains("NextToken"));
  auto rest = Call("ListComputeQuotas", {{"ClusterArn", cluster_.arn},
                                         {"SortBy", "Name"},
                                         {"SortOrder", "Ascending"},
                                         {"MaxResults", 2},
                                         {"NextToken", (*mine)["NextToken"]}});
  EXPECT_EQ(names(*rest), (std::vector<std::string>{"quota-t3"}));
  EXPECT_FALSE(rest->contains("NextToken"));
  EXPECT_EQ(names(*Call("ListComputeQuotas", {{"NameContains", "t2"}})),
            (std::vector<std::string>{"quota-t2"}));
  EXPECT_TRUE(names(*Call("ListComputeQuotas", {{"Status", "Deleting"}})).empty());
  EXPECT_EQ(ErrorOf(Call("ListComputeQuotas", {{"NextToken", "zz"}})), "ValidationException");
  // A token of one sort order does not fit another.
  EXPECT_EQ(ErrorOf(Call("ListComputeQuotas", {{"NextToken", (*mine)["NextToken"]}})),
            "ValidationException");
  auto policies = Call("ListClusterSchedulerConfigs", {{"ClusterArn", other.arn}});
  EXPECT_TRUE((*policies)["ClusterSchedulerConfigSummaries"].empty());
}

TEST_F(GovernanceTest, ErasingTheClusterErasesItsGovernanceObjects) {
  ASSERT_TRUE(Call("CreateClusterSchedulerConfig", Policy("p")).ok());
  auto q = Call("CreateComputeQuota",
                Quota("qa", "team-a", G5(1), {{"Tags", {{{"Key", "k"}, {"Value", "v"}}}}}));
  ASSERT_TRUE(q.ok());
  const std::string arn = (*q)["ComputeQuotaArn"];
  EXPECT_EQ(store_->tags(arn)->size(), 1u);
  auto c = *store_->clusterById(cluster_.id);
  store::WriteBatch b;
  b.clusters.push_back({c, c.revision, true});
  ASSERT_TRUE(store_->commit(b).ok());
  EXPECT_EQ(Count(model::governance_kind::kSchedulerConfig), 0u);
  EXPECT_EQ(Count(model::governance_kind::kComputeQuota), 0u);
  EXPECT_TRUE(store_->tags(arn)->empty());
}

}  // namespace
}  // namespace hf::api
