// ClusterOperations' HyperPod rules, through the ApiHandler on an in-memory store: unique
// instance group names, InstanceType XOR InstanceRequirements, UpdateCluster's declarative
// replace (a group left out of InstanceGroups must be in InstanceGroupsToDelete), an
// instance group's fixed InstanceType, ConflictException outside InService, ResourceInUse
// for a taken name, ResourceNotFound for unknown clusters, nodes and events. Every rejected
// request names what is wrong and writes nothing.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api_world.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using testing::ApiWorld;

class ClusterOperationsTest : public ::testing::Test {
 protected:
  /// A request's outcome: the AWS error type ("OK" on success) and message.
  struct Outcome {
    std::string type, message;
    Json body;
  };
  Outcome Sm(const std::string& op, const Json& in) {
    auto r = w_.Sm(op, in);
    Outcome o;
    o.type = ApiWorld::ErrorOf(r, &o.message);
    if (r.ok()) o.body = *r;
    return o;
  }

  /// What a client can see of everything: clusters, their descriptions, nodes and events.
  Json Everything() {
    Json all = Json::object();
    const auto list = w_.Sm("ListClusters", {{"MaxResults", 100}}).value();
    all["list"] = list;
    for (const auto& s : list["ClusterSummaries"]) {
      const std::string name = s["ClusterName"];
      all[name]["cluster"] = w_.Sm("DescribeCluster", {{"ClusterName", name}}).value();
      all[name]["nodes"] =
          w_.Sm("ListClusterNodes", {{"ClusterName", name}, {"MaxResults", 100}}).value();
      all[name]["events"] =
          w_.Sm("ListClusterEvents", {{"ClusterName", name}, {"MaxResults", 100}}).value();
    }
    return all;
  }

  /// Expects `op` on `in` to fail with `type` and a message containing each of `words`,
  /// and to leave everything as it was.
  void ExpectRejected(const std::string& op, const Json& in, const std::string& type,
                      std::initializer_list<std::string> words) {
    const Json before = Everything();
    const Outcome o = Sm(op, in);
    EXPECT_EQ(o.type, type) << op << " " << in.dump() << ": " << o.message;
    for (const auto& w : words) {
      EXPECT_NE(o.message.find(w), std::string::npos) << "'" << w << "' not in: " << o.message;
    }
    EXPECT_EQ(Everything(), before) << op << " " << in.dump() << " changed something";
  }

  /// A group specification like ApiWorld::ClusterSpec's, named `name`.
  static Json Group(const std::string& name, int count = 2,
                    const std::string& type = "ml.c5.xlarge") {
    Json g = ApiWorld::ClusterSpec("x", count)["InstanceGroups"][0];
    g["InstanceGroupName"] = name;
    g["InstanceType"] = type;
    return g;
  }

  /// Creates InService cluster `name` with `groups`.
  void CreateInService(const std::string& name, const Json& groups) {
    ASSERT_EQ(Sm("CreateCluster", {{"ClusterName", name}, {"InstanceGroups", groups}}).type,
              "OK");
    w_.SetClusterStatus(name, "InService");
  }

  /// {InstanceGroupName: Status} of DescribeCluster.
  std::map<std::string, std::string> GroupStatuses(const std::string& name) {
    std::map<std::string, std::string> out;
    const auto d = w_.Sm("DescribeCluster", {{"ClusterName", name}}).value();
    for (const auto& g : d["InstanceGroups"]) out[g["InstanceGroupName"]] = g["Status"];
    return out;
  }

  /// Instance types whose instances run on ssh machines (ApiConfig::runs_on_ssh); for
  /// "ml.m5.large" the machine registry fails.
  std::set<std::string> ssh_types_;
  ApiWorld w_{[this] {
    ApiConfig config;
    config.runs_on_ssh = [this](std::string_view type) -> StatusOr<bool> {
      if (type == "ml.m5.large") return absl::UnavailableError("machine registry down");
      return ssh_types_.count(std::string(type)) > 0;
    };
    return config;
  }()};
};

TEST_F(ClusterOperationsTest, InstanceGroupNamesAreUnique) {
  ExpectRejected("CreateCluster",
                 {{"ClusterName", "dup"}, {"InstanceGroups", {Group("a"), Group("b"), Group("a")}}},
                 "ValidationException",
                 {"Instance group names must be unique: 'a' appears more than once"});
  CreateInService("c", Json::array({Group("a")}));
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "c"}, {"InstanceGroups", {Group("a"), Group("a", 3)}}},
                 "ValidationException", {"must be unique: 'a'"});
}

TEST_F(ClusterOperationsTest, ExactlyOneOfInstanceTypeAndInstanceRequirements) {
  Json both = Group("a");
  both["InstanceRequirements"] = {{"InstanceTypes", {"ml.c5.xlarge"}}};
  ExpectRejected("CreateCluster", {{"ClusterName", "c"}, {"InstanceGroups", {both}}},
                 "ValidationException",
                 {"Instance group 'a' at 'instanceGroups.1.member' must specify exactly one of "
                  "InstanceType and InstanceRequirements."});
  Json neither = Group("b");
  neither.erase("InstanceType");
  ExpectRejected("CreateCluster", {{"ClusterName", "c"}, {"InstanceGroups", {Group("a"), neither}}},
                 "ValidationException",
                 {"'b' at 'instanceGroups.2.member' must specify exactly one"});
  // Flexible instance types: the group runs the first one listed.
  Json flexible = Group("f");
  flexible.erase("InstanceType");
  flexible["InstanceRequirements"] = {{"InstanceTypes", {"ml.m5.xlarge", "ml.c5.xlarge"}}};
  ASSERT_EQ(Sm("CreateCluster", {{"ClusterName", "flex"}, {"InstanceGroups", {flexible}}}).type,
            "OK");
  const auto d = w_.Sm("DescribeCluster", {{"ClusterName", "flex"}}).value();
  EXPECT_EQ(d["InstanceGroups"][0]["InstanceType"], "ml.m5.xlarge") << d.dump();
}

TEST_F(ClusterOperationsTest, OtherGroupRulesOfCreateCluster) {
  ExpectRejected("CreateCluster", {{"ClusterName", "c"}}, "ValidationException",
                 {"InstanceGroups must list at least one instance group."});
  Json no_lifecycle = Group("a");
  no_lifecycle.erase("LifeCycleConfig");
  ExpectRejected("CreateCluster", {{"ClusterName", "c"}, {"InstanceGroups", {no_lifecycle}}},
                 "ValidationException",
                 {"'instanceGroups.1.member.lifeCycleConfig' needs a LifeCycleConfig"});
  Json min_above = Group("a", 2);
  min_above["MinInstanceCount"] = 3;
  ExpectRejected("CreateCluster", {{"ClusterName", "c"}, {"InstanceGroups", {min_above}}},
                 "ValidationException", {"MinInstanceCount cannot exceed InstanceCount"});
}

// HyperPod's checks on Orchestrator.Eks.ClusterArn, each naming the field; none changes anything.
TEST_F(ClusterOperationsTest, OrchestratorEksIsCheckedAgainstTheEksClusters) {
  auto eks = [&](const std::string& name, store::EksClusterStatus status,
                 store::EksAuthMode mode) {
    store::EksCluster c;
    c.name = name;
    c.arn = "arn:aws:eks:us-west-2:123456789012:cluster/" + name;
    c.status = status;
    c.auth_mode = mode;
    store::WriteBatch batch;
    batch.eks_clusters.push_back({c, store::kMustNotExist, false});
    ASSERT_TRUE(w_.store->commit(batch).ok());
  };
  eks("active", store::EksClusterStatus::kActive, store::EksAuthMode::kApiAndConfigMap);
  eks("creating", store::EksClusterStatus::kCreating, store::EksAuthMode::kApi);
  eks("deleting", store::EksClusterStatus::kDeleting, store::EksAuthMode::kApi);
  eks("configmap", store::EksClusterStatus::kActive, store::EksAuthMode::kConfigMap);
  const struct {
    std::string arn;
    std::vector<std::string> words;
  } cases[] = {
      {"arn:aws:eks:us-west-2:123456789012:cluster/none", {"ClusterArn", "no EKS cluster"}},
      {"arn:aws:eks:us-east-1:123456789012:cluster/active", {"ClusterArn", "no EKS cluster"}},
      {"arn:aws:eks:us-west-2:210987654321:cluster/active", {"ClusterArn", "no EKS cluster"}},
      {"arn:aws:eks:us-west-2:123456789012:cluster/creating", {"ClusterArn", "CREATING"}},
      {"arn:aws:eks:us-west-2:123456789012:cluster/deleting", {"ClusterArn", "DELETING"}},
      {"arn:aws:eks:us-west-2:123456789012:cluster/configmap",
       {"ClusterArn", "authenticationMode CONFIG_MAP", "API_AND_CONFIG_MAP"}},
  };
  for (const auto& c : cases) {
    const Outcome o = Sm("CreateCluster", {{"ClusterName", "c"},
                                           {"InstanceGroups", {Group("a")}},
                                           {"Orchestrator", {{"Eks", {{"ClusterArn", c.arn}}}}}});
    EXPECT_EQ(o.type, "ValidationException") << c.arn << ": " << o.message;
    for (const auto& w : c.words) {
      EXPECT_NE(o.message.find(w), std::string::npos) << "'" << w << "' not in: " << o.message;
    }
  }
  // An Orchestrator naming none ({} or a null member) is refused too, not taken as Slurm.
  for (const Json& none : {Json::object(), Json({{"Eks", nullptr}})}) {
    const Outcome o = Sm("CreateCluster", {{"ClusterName", "c"},
                                           {"InstanceGroups", {Group("a")}},
                                           {"Orchestrator", none}});
    EXPECT_EQ(o.type, "ValidationException") << none.dump() << ": " << o.message;
    EXPECT_NE(o.message.find("exactly one of Eks and Slurm"), std::string::npos) << o.message;
  }
  EXPECT_EQ(Sm("ListClusters", Json::object()).body["ClusterSummaries"].size(), 0u);
  // One that passes HyperPod's checks is created, with its orchestrator as given.
  const Outcome made = Sm("CreateCluster",
                          {{"ClusterName", "on-eks"},
                           {"InstanceGroups", {Group("a")}},
                           {"Orchestrator", {{"Eks", {{"ClusterArn",
                                "arn:aws:eks:us-west-2:123456789012:cluster/active"}}}}}});
  ASSERT_EQ(made.type, "OK") << made.message;
  const Outcome described = Sm("DescribeCluster", {{"ClusterName", "on-eks"}});
  EXPECT_EQ(described.body["Orchestrator"]["Eks"]["ClusterArn"],
            "arn:aws:eks:us-west-2:123456789012:cluster/active");
  CreateInService("slurm", Json::array({Group("a")}));
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "slurm"},
                  {"Orchestrator", {{"Eks", {{"ClusterArn",
                                              "arn:aws:eks:us-west-2:123456789012:cluster/active"}}}}}},
                 "ValidationException", {"Orchestrator.Eks", "cannot change a cluster's orchestrator"});
  // An EKS cluster's own Orchestrator, as infrastructure-as-code tools send it, is accepted;
  // another EKS cluster or Slurm is not.
  w_.SetClusterStatus("on-eks", "InService");
  const Json same = {{"Eks", {{"ClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/active"}}}};
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "on-eks"},
                  {"Orchestrator", {{"Eks", {{"ClusterArn",
                                              "arn:aws:eks:us-west-2:123456789012:cluster/configmap"}}}}}},
                 "ValidationException",
                 {"Orchestrator.Eks.ClusterArn", "orchestrated by EKS cluster active",
                  "cannot change a cluster's orchestrator"});
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "on-eks"},
                  {"Orchestrator", {{"Slurm", {{"SlurmConfigStrategy", "Managed"}}}}}},
                 "ValidationException", {"Orchestrator.Slurm", "orchestrated by EKS"});
  const Outcome kept = Sm("UpdateCluster", {{"ClusterName", "on-eks"},
                                            {"InstanceGroups", {Group("a", 3)}},
                                            {"Orchestrator", same}});
  EXPECT_EQ(kept.type, "OK") << kept.message;
  EXPECT_EQ(Sm("DescribeCluster", {{"ClusterName", "on-eks"}}).body["Orchestrator"], same);
}

// The ssh provider runs no EKS nodes: an Orchestrator.Eks group whose new instances would land
// on ssh machines is refused (CreateCluster, UpdateCluster, BatchAddClusterNodes), naming the
// group's InstanceType; Slurm clusters and groups that launch nothing are not concerned.
TEST_F(ClusterOperationsTest, EksGroupsThatWouldRunOnSshMachinesAreRefused) {
  store::EksCluster k;
  k.name = "k";
  k.arn = "arn:aws:eks:us-west-2:123456789012:cluster/k";
  k.status = store::EksClusterStatus::kActive;
  k.auth_mode = store::EksAuthMode::kApi;
  store::WriteBatch batch;
  batch.eks_clusters.push_back({k, store::kMustNotExist, false});
  ASSERT_TRUE(w_.store->commit(batch).ok());
  const Json eks = {{"Eks", {{"ClusterArn", k.arn}}}};
  ssh_types_ = {"ml.c5.large"};

  ExpectRejected("CreateCluster",
                 {{"ClusterName", "on-ssh"},
                  {"InstanceGroups", {Group("a"), Group("b", 1, "ml.c5.large")}},
                  {"Orchestrator", eks}},
                 "ValidationException",
                 {"Instance group 'b' at 'instanceGroups.2.member.instanceType'", "ml.c5.large",
                  "ssh provider does not run EKS nodes (Orchestrator.Eks)"});
  // The registry's own failure is no validation error.
  EXPECT_EQ(Sm("CreateCluster", {{"ClusterName", "boom"},
                                 {"InstanceGroups", {Group("a", 1, "ml.m5.large")}},
                                 {"Orchestrator", eks}})
                .type,
            "ServiceUnavailable");
  // Slurm clusters run on ssh machines as before.
  ASSERT_EQ(Sm("CreateCluster", {{"ClusterName", "slurm-ssh"},
                                 {"InstanceGroups", {Group("b", 1, "ml.c5.large")}}})
                .type,
            "OK");

  // Machines of a type registered after the cluster was made: growing that group is refused,
  // shrinking it or changing another group is not.
  ASSERT_EQ(Sm("CreateCluster", {{"ClusterName", "eks"},
                                 {"InstanceGroups", {Group("a", 2), Group("c", 2, "ml.c5.2xlarge")}},
                                 {"Orchestrator", eks}})
                .type,
            "OK");
  w_.SetClusterStatus("eks", "InService");
  ssh_types_.insert("ml.c5.2xlarge");
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "eks"},
                  {"InstanceGroups", {Group("a", 2), Group("c", 3, "ml.c5.2xlarge")}}},
                 "ValidationException",
                 {"'c' at 'instanceGroups.2.member.instanceType'", "ml.c5.2xlarge"});
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "eks"},
                  {"InstanceGroups",
                   {Group("a", 2), Group("c", 2, "ml.c5.2xlarge"), Group("d", 1, "ml.c5.large")}}},
                 "ValidationException", {"'d' at 'instanceGroups.3.member.instanceType'"});
  EXPECT_EQ(Sm("UpdateCluster", {{"ClusterName", "eks"},
                                 {"InstanceGroups", {Group("a", 3), Group("c", 1, "ml.c5.2xlarge")}}})
                .type,
            "OK");

  // BatchAddClusterNodes fails that group alone, as IncompatibleInstanceTypes.
  ASSERT_EQ(Sm("CreateCluster", {{"ClusterName", "cont"},
                                 {"InstanceGroups", {Group("a", 1), Group("c", 1, "ml.c5.4xlarge")}},
                                 {"Orchestrator", eks},
                                 {"NodeProvisioningMode", "Continuous"}})
                .type,
            "OK");
  w_.SetClusterStatus("cont", "InService");
  ssh_types_.insert("ml.c5.4xlarge");
  const Outcome added = Sm("BatchAddClusterNodes",
                           {{"ClusterName", "cont"},
                            {"NodesToAdd", {{{"InstanceGroupName", "a"}, {"IncrementTargetCountBy", 1}},
                                            {{"InstanceGroupName", "c"}, {"IncrementTargetCountBy", 1}}}}});
  ASSERT_EQ(added.type, "OK") << added.message;
  ASSERT_EQ(added.body["Failed"].size(), 1u) << added.body.dump();
  EXPECT_EQ(added.body["Failed"][0]["InstanceGroupName"], "c");
  EXPECT_EQ(added.body["Failed"][0]["ErrorCode"], "IncompatibleInstanceTypes");
  const std::string why = added.body["Failed"][0]["Message"];
  EXPECT_NE(why.find("does not run EKS nodes"), std::string::npos) << why;
  // Named where the request names it: the second NodesToAdd entry, not a group list.
  EXPECT_NE(why.find("'nodesToAdd.2.member.instanceGroupName'"), std::string::npos) << why;
  ASSERT_EQ(added.body["Successful"].size(), 1u) << added.body.dump();
  EXPECT_EQ(added.body["Successful"][0]["InstanceGroupName"], "a");
}

TEST_F(ClusterOperationsTest, ATakenNameIsResourceInUse) {
  CreateInService("taken", Json::array({Group("a")}));
  ExpectRejected("CreateCluster", {{"ClusterName", "taken"}, {"InstanceGroups", {Group("a")}}},
                 "ResourceInUse",
                 {"Resource Already Exists: Cluster with name taken already exists. Choose a "
                  "different name."});
}

TEST_F(ClusterOperationsTest, UpdateClusterReplacesTheListOfGroups) {
  CreateInService("c", Json::array({Group("a"), Group("b")}));
  // Leaving b out is not deleting it.
  ExpectRejected("UpdateCluster", {{"ClusterName", "c"}, {"InstanceGroups", {Group("a", 3)}}},
                 "ValidationException",
                 {"Instance group 'b' is missing from InstanceGroups",
                  "name groups to remove in InstanceGroupsToDelete"});
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "c"},
                  {"InstanceGroups", {Group("a"), Group("b")}},
                  {"InstanceGroupsToDelete", {"b"}}},
                 "ValidationException",
                 {"Instance group 'b' is both in InstanceGroups and in InstanceGroupsToDelete."});
  ExpectRejected("UpdateCluster", {{"ClusterName", "c"}, {"InstanceGroupsToDelete", {"zz"}}},
                 "ValidationException",
                 {"InstanceGroupsToDelete names 'zz', which is not an instance group of cluster c."});
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "c"}, {"InstanceGroupsToDelete", {"a", "b"}}},
                 "ValidationException",
                 {"UpdateCluster would leave the cluster without instance groups."});

  // Listed with b named for deletion: a scales, b goes, c is added.
  const Outcome o = Sm("UpdateCluster", {{"ClusterName", "c"},
                                         {"InstanceGroups", {Group("a", 3), Group("new", 1)}},
                                         {"InstanceGroupsToDelete", {"b"}}});
  ASSERT_EQ(o.type, "OK") << o.message;
  const auto d = w_.Sm("DescribeCluster", {{"ClusterName", "c"}}).value();
  EXPECT_EQ(d["ClusterStatus"], "Updating");
  EXPECT_EQ(GroupStatuses("c"),
            (std::map<std::string, std::string>{{"a", "Updating"}, {"new", "Updating"},
                                                {"b", "Deleting"}}));
  const auto events = w_.Sm("ListClusterEvents", {{"ClusterName", "c"},
                                                  {"SortOrder", "Ascending"},
                                                  {"MaxResults", 100}})
                          .value()["Events"];
  std::vector<std::string> texts;
  for (const auto& e : events) texts.push_back(e["Description"]);
  const std::vector<std::string> tail(texts.end() - 4, texts.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"Cluster c update started",
                                            "Instance group a scaling from 2 to 3",
                                            "Instance group new added with target count 1",
                                            "Instance group b deletion started"}));
  // All four at one moment.
  for (size_t k = events.size() - 4; k < events.size(); ++k) {
    EXPECT_EQ(events[k]["EventTime"], events[events.size() - 4]["EventTime"]);
  }

  // Without InstanceGroups, only the settings change and every group stays.
  w_.SetClusterStatus("c", "InService");
  ASSERT_EQ(Sm("UpdateCluster", {{"ClusterName", "c"}, {"NodeRecovery", "None"}}).type, "OK");
  const auto after = w_.Sm("DescribeCluster", {{"ClusterName", "c"}}).value();
  EXPECT_EQ(after["ClusterStatus"], "InService");
  EXPECT_EQ(after["NodeRecovery"], "None");
  EXPECT_EQ(after["InstanceGroups"].size(), 3u);  // a, new, and b still deleting
}

TEST_F(ClusterOperationsTest, AGroupsInstanceTypeCannotChange) {
  CreateInService("c", Json::array({Group("a")}));
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "c"}, {"InstanceGroups", {Group("a", 2, "ml.m5.xlarge")}}},
                 "ValidationException",
                 {"The InstanceType of instance group 'a' cannot change (ml.c5.xlarge to "
                  "ml.m5.xlarge). Add a new group instead and delete this one."});
}

TEST_F(ClusterOperationsTest, AGroupBeingDeletedCannotComeBackYet) {
  CreateInService("c", Json::array({Group("a"), Group("b")}));
  ASSERT_EQ(Sm("UpdateCluster", {{"ClusterName", "c"}, {"InstanceGroupsToDelete", {"b"}}}).type,
            "OK");
  w_.SetClusterStatus("c", "InService");
  ExpectRejected("UpdateCluster",
                 {{"ClusterName", "c"}, {"InstanceGroups", {Group("a"), Group("b")}}},
                 "ConflictException",
                 {"Instance group 'b' is still being deleted; add it again later."});
}

TEST_F(ClusterOperationsTest, ChangesOutsideInServiceAreConflicts) {
  ASSERT_EQ(Sm("CreateCluster", ApiWorld::ClusterSpec("c")).type, "OK");  // Creating
  const std::string node_id = "i-0123456789abcdef0";
  ExpectRejected("UpdateCluster", {{"ClusterName", "c"}, {"NodeRecovery", "None"}},
                 "ConflictException",
                 {"Cluster c is Creating; UpdateCluster is accepted only while the cluster is "
                  "InService."});
  ExpectRejected("BatchDeleteClusterNodes", {{"ClusterName", "c"}, {"NodeIds", {node_id}}},
                 "ConflictException",
                 {"Cluster c is Creating; nodes can be deleted once it is InService."});
  ExpectRejected("BatchRebootClusterNodes", {{"ClusterName", "c"}, {"NodeIds", {node_id}}},
                 "ConflictException",
                 {"Cluster c is Creating; nodes can be rebooted while it is InService or "
                  "Updating."});
  ExpectRejected("BatchReplaceClusterNodes", {{"ClusterName", "c"}, {"NodeIds", {node_id}}},
                 "ConflictException", {"nodes can be replaced while it is InService"});
  for (const char* status : {"Updating", "Failed", "RollingBack", "SystemUpdating"}) {
    w_.SetClusterStatus("c", status);
    ExpectRejected("UpdateCluster", {{"ClusterName", "c"}, {"NodeRecovery", "None"}},
                   "ConflictException", {std::string("Cluster c is ") + status});
  }
  // DeleteCluster is taken in any status, and a cluster being deleted takes no more changes.
  ASSERT_EQ(Sm("DeleteCluster", {{"ClusterName", "c"}}).type, "OK");
  ExpectRejected("UpdateCluster", {{"ClusterName", "c"}, {"NodeRecovery", "None"}},
                 "ConflictException", {"Cluster c is Deleting"});
  ExpectRejected("BatchDeleteClusterNodes", {{"ClusterName", "c"}, {"NodeIds", {node_id}}},
                 "ConflictException", {"Cluster c is Deleting"});
}

TEST_F(ClusterOperationsTest, UnknownClustersNodesAndEventsAreNotFound) {
  const Json unknown = {{"ClusterName", "nope"}};
  for (const char* op : {"DescribeCluster", "DeleteCluster", "ListClusterNodes",
                         "ListClusterEvents"}) {
    ExpectRejected(op, unknown, "ResourceNotFound", {"nope"});
  }
  ExpectRejected("UpdateCluster", {{"ClusterName", "nope"}, {"NodeRecovery", "None"}},
                 "ResourceNotFound", {"nope"});
  ExpectRejected("BatchDeleteClusterNodes",
                 {{"ClusterName", "nope"}, {"NodeIds", {"i-0123456789abcdef0"}}},
                 "ResourceNotFound", {"nope"});
  ExpectRejected("DescribeClusterNode", {{"ClusterName", "nope"}, {"NodeId", "i-0123456789abcdef0"}},
                 "ResourceNotFound", {"nope"});
  ExpectRejected("DescribeClusterEvent",
                 {{"ClusterName", "nope"}, {"EventId", "01234567-89ab-cdef-0123-456789abcdef"}},
                 "ResourceNotFound", {"nope"});

  CreateInService("c", Json::array({Group("a")}));
  ExpectRejected("DescribeClusterNode", {{"ClusterName", "c"}, {"NodeId", "i-0123456789abcdef0"}},
                 "ResourceNotFound", {"Node i-0123456789abcdef0 not found in cluster c"});
  ExpectRejected("DescribeClusterNode", {{"ClusterName", "c"}, {"NodeLogicalId", "a-nothere"}},
                 "ResourceNotFound", {"Node a-nothere not found in cluster c"});
  ExpectRejected("DescribeClusterEvent",
                 {{"ClusterName", "c"}, {"EventId", "01234567-89ab-cdef-0123-456789abcdef"}},
                 "ResourceNotFound", {"01234567-89ab-cdef-0123-456789abcdef"});
  // Unknown nodes of a batch fail one by one; the request itself succeeds.
  const Outcome o = Sm("BatchDeleteClusterNodes",
                       {{"ClusterName", "c"}, {"NodeIds", {"i-0123456789abcdef0"}}});
  ASSERT_EQ(o.type, "OK") << o.message;
  EXPECT_EQ(o.body["Failed"][0]["Code"], "NodeIdNotFound") << o.body.dump();
}

TEST_F(ClusterOperationsTest, DescribeClusterNodeNeedsExactlyOneId) {
  CreateInService("c", Json::array({Group("a")}));
  ExpectRejected("DescribeClusterNode", {{"ClusterName", "c"}}, "ValidationException",
                 {"Specify exactly one of NodeId and NodeLogicalId."});
  ExpectRejected("DescribeClusterNode",
                 {{"ClusterName", "c"}, {"NodeId", "i-0123456789abcdef0"}, {"NodeLogicalId", "a-1"}},
                 "ValidationException", {"Specify exactly one of NodeId and NodeLogicalId."});
}

}  // namespace
}  // namespace hf::api
