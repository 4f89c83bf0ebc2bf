#include "hyperfleet/model/service_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "model/embedded_model.h"


namespace hf::model {
namespace {

using nlohmann::json;

const std::vector<std::string> kOperations = {
    "AddTags",
    "AttachClusterNodeVolume",
    "BatchAddClusterNodes",
    "BatchDeleteClusterNodes",
    "BatchRebootClusterNodes",
    "BatchReplaceClusterNodes",
    "CreateCluster",
    "CreateClusterSchedulerConfig",
    "CreateComputeQuota",
    "DeleteCluster",
    "DeleteClusterSchedulerConfig",
    "DeleteComputeQuota",
    "DeleteTags",
    "DescribeCluster",
    "DescribeClusterEvent",
    "DescribeClusterNode",
    "DescribeClusterSchedulerConfig",
    "DescribeComputeQuota",
    "DetachClusterNodeVolume",
    "ListClusterEvents",
    "ListClusterNodes",
    "ListClusterSchedulerConfigs",
    "ListClusters",
    "ListComputeQuotas",
    "ListTags",
    "StartClusterHealthCheck",
    "UpdateCluster",
    "UpdateClusterSchedulerConfig",
    "UpdateClusterSoftware",
    "UpdateComputeQuota",
};

// The create-cluster body aws-cli 2.9.19 sent on the wire.
json ValidCreateCluster() {
  return json::parse(
      R"({"ClusterName": "demo", "InstanceGroups": [{"InstanceGroupName": "controller",
    "InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "LifeCycleConfig": {"SourceS3Uri":
    "s3://sagemaker-lc/scripts/", "OnCreate": "on_create.sh"}, "ExecutionRole":
    "arn:aws:iam::123456789012:role/HyperPodRole", "ThreadsPerCore": 1}], "Tags": [{"Key": "env",
    "Value": "dev"}], "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
    "NodeRecovery": "Automatic"})");
}

const ServiceModel& Model() { return *ServiceModel::Embedded(); }

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(ServiceModel, EmbeddedHasExactlyTheHyperPodOperations) {
  EXPECT_EQ(Model().operations(), kOperations);
  for (const auto& op : kOperations) EXPECT_TRUE(Model().hasOperation(op)) << op;
  EXPECT_FALSE(Model().hasOperation("CreateTrainingJob"));
  EXPECT_FALSE(Model().hasOperation("createcluster"));
  EXPECT_EQ(ServiceModel::Embedded().get(), ServiceModel::Embedded().get());
}

TEST(ServiceModel, EveryOperationHasAnInputShape) {
  json doc = json::parse(hf::data::kSageMakerServiceModel);
  ASSERT_TRUE(doc.contains("operations"));
  EXPECT_EQ(doc["operations"].size(), kOperations.size());
  for (const auto& op : kOperations) {
    SCOPED_TRACE(op);
    ASSERT_TRUE(doc["operations"].contains(op));
    const json& operation = doc["operations"][op];
    ASSERT_TRUE(operation.contains("input"));
    const std::string input = operation["input"]["shape"].get<std::string>();
    const json* shape = Model().shape(input);
    ASSERT_NE(shape, nullptr);
    EXPECT_EQ((*shape)["type"], "structure");
    // An empty body is either fine or a validation error, never unknown or a crash.
    Status s = Model().validateInput(op, json::object());
    EXPECT_TRUE(s.ok() || absl::IsInvalidArgument(s)) << s;
  }
}

TEST(ServiceModel, ModelMetadataAndNoDocumentation) {
  json doc = json::parse(hf::data::kSageMakerServiceModel);
  EXPECT_EQ(doc["version"], "2.0");
  EXPECT_EQ(doc["metadata"]["targetPrefix"], "SageMaker");
  EXPECT_EQ(doc["metadata"]["jsonVersion"], "1.1");
  EXPECT_EQ(hf::data::kSageMakerServiceModel.find("\"documentation\""), std::string_view::npos);
  // Keys the validator or clients rely on survive the stripping.
  const json* request = Model().shape("BatchAddClusterNodesRequest");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ((*request)["members"]["ClientToken"]["idempotencyToken"], true);
  const json* storage = Model().shape("ClusterInstanceStorageConfig");
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ((*storage)["union"], true);
}

TEST(ServiceModel, ShapeAndEnumLookup) {
  EXPECT_EQ(Model().enumValues("ClusterNodeRecovery"),
            (std::vector<std::string>{"Automatic", "None"}));
  EXPECT_TRUE(Model().enumValues("ClusterName").empty());
  EXPECT_TRUE(Model().enumValues("NoSuchShape").empty());
  ASSERT_NE(Model().shape("Tag"), nullptr);
  EXPECT_EQ((*Model().shape("Tag"))["required"], json::parse(R"(["Key","Value"])"));
  EXPECT_EQ(Model().shape("NoSuchShape"), nullptr);
}

TEST(ValidateInput, WireBodiesPass) {
  EXPECT_TRUE(Model().validateInput("CreateCluster", ValidCreateCluster()).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"DescribeCluster", R"({"ClusterName": "demo"})"},
      {"DescribeCluster",
       R"({"ClusterName": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456"})"},
      {"ListClusterNodes",
       R"({"ClusterName": "demo", "InstanceGroupNameContains": "contr", "SortBy": "NAME",
           "SortOrder": "Ascending"})"},
      {"ListClusters", R"({"CreationTimeAfter": 1735689600})"},
      {"ListClusters", R"({"CreationTimeAfter": 1735689600.25})"},
      {"ListClusters", R"({"CreationTimeAfter": "2025-01-01T00:00:00Z"})"},
      {"ListClusters", R"({"CreationTimeBefore": "2025-01-01T00:00:00.123+02:00"})"},
      {"ListClusters", R"({"MaxResults": 5, "NextToken": "tok2"})"},
      {"ListClusters", "{}"},
      {"DescribeClusterSchedulerConfig", R"({"ClusterSchedulerConfigId": "abcdefabcdef"})"},
      {"CreateComputeQuota",
       R"({"Name": "team-a-quota", "ClusterArn":
           "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456",
           "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.g5.8xlarge",
           "Count": 2}], "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
           "PreemptTeamTasks": "LowerPriority"}, "ComputeQuotaTarget": {"TeamName": "team-a",
           "FairShareWeight": 10}, "ActivationState": "Enabled"})"},
      {"BatchDeleteClusterNodes",
       R"({"ClusterName": "demo", "NodeIds": ["i-0123456789abcdef0", "i-01234567"]})"},
  };
  for (const auto& [op, body] : cases) {
    Status s = Model().validateInput(op, json::parse(body));
    EXPECT_TRUE(s.ok()) << op << " " << body << ": " << s;
  }
}

// absl::string_view is not std::string_view in Debian's abseil; compare as std::string.
std::string Message(const Status& s) { return std::string(s.message()); }

struct Case {
  std::string name;
  std::string operation;
  json body;
  std::string message;  // exact expected message
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

json WithGroup(const char* member, json value) {
  json body = ValidCreateCluster();
  body["InstanceGroups"][0][member] = std::move(value);
  return body;
}

json With(const char* member, json value) {
  json body = ValidCreateCluster();
  body[member] = std::move(value);
  return body;
}

std::vector<Case> ValidationCases() {
  json no_name = ValidCreateCluster();
  no_name.erase("ClusterName");
  json two = ValidCreateCluster();
  two["ClusterName"] = "bad_name!";
  two["NodeRecovery"] = "Bogus";
  const std::string kNamePattern =
      "Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*";
  return {
      {"MissingClusterName", "CreateCluster", no_name,
       "1 validation error detected: Value null at 'clusterName' failed to satisfy constraint: "
       "Member must not be null"},
      {"NameTooLong", "CreateCluster", With("ClusterName", std::string(64, 'a')),
       "1 validation error detected: Value '" + std::string(64, 'a') +
           "' at 'clusterName' failed to satisfy constraint: Member must have length less than "
           "or equal to 63"},
      {"NameBadPattern", "CreateCluster", With("ClusterName", "bad_name!"),
       "1 validation error detected: Value 'bad_name!' at 'clusterName' failed to satisfy "
       "constraint: " +
           kNamePattern},
      {"EmptyNameIsTooShortAndMissesPattern", "CreateCluster", With("ClusterName", ""),
       "2 validation errors detected: Value '' at 'clusterName' failed to satisfy constraint: "
       "Member must have length greater than or equal to 1; Value '' at 'clusterName' failed to "
       "satisfy constraint: " +
           kNamePattern},
      {"BadEnum", "CreateCluster", With("NodeRecovery", "Bogus"),
       "1 validation error detected: Value 'Bogus' at 'nodeRecovery' failed to satisfy "
       "constraint: Member must satisfy enum value set: [Automatic, None]"},
      {"NegativeInstanceCount", "CreateCluster", WithGroup("InstanceCount", -1),
       "1 validation error detected: Value '-1' at 'instanceGroups.1.member.instanceCount' failed "
       "to satisfy constraint: Member must have value greater than or equal to 0"},
      {"InstanceCountTooLarge", "CreateCluster", WithGroup("InstanceCount", 6759),
       "1 validation error detected: Value '6759' at 'instanceGroups.1.member.instanceCount' "
       "failed to satisfy constraint: Member must have value less than or equal to 6758"},
      {"NoInstanceGroups", "CreateCluster", With("InstanceGroups", json::array()),
       "1 validation error detected: Value '[]' at 'instanceGroups' failed to satisfy constraint: "
       "Member must have length greater than or equal to 1"},
      {"TwoErrorsAtOnce", "CreateCluster", two,
       "2 validation errors detected: Value 'bad_name!' at 'clusterName' failed to satisfy "
       "constraint: " +
           kNamePattern +
           "; Value 'Bogus' at 'nodeRecovery' failed to satisfy constraint: Member must satisfy "
           "enum value set: [Automatic, None]"},
      {"MissingNestedRequired", "CreateCluster",
       json::parse(R"({"ClusterName": "demo", "InstanceGroups": [{"InstanceCount": 1,
          "ExecutionRole": "arn:aws:iam::123456789012:role/R"}, {"InstanceCount": 1,
          "InstanceGroupName": "b"}]})"),
       "2 validation errors detected: Value null at 'instanceGroups.1.member.instanceGroupName' "
       "failed to satisfy constraint: Member must not be null; Value null at "
       "'instanceGroups.2.member.executionRole' failed to satisfy constraint: Member must not be "
       "null"},
      {"ListItemPath", "BatchDeleteClusterNodes",
       json::parse(R"({"ClusterName": "demo", "NodeIds": ["i-01234567", "node-1"]})"),
       "1 validation error detected: Value 'node-1' at 'nodeIds.2.member' failed to satisfy "
       "constraint: Member must satisfy regular expression pattern: "
       "i-[a-f0-9]{8}(?:[a-f0-9]{9})?"},
      {"MapValuePath", "CreateCluster",
       WithGroup("KubernetesConfig", json::parse(R"({"Labels": {"team": "-bad-"}})")),
       "1 validation error detected: Value '-bad-' at "
       "'instanceGroups.1.member.kubernetesConfig.labels.team' failed to satisfy constraint: "
       "Member must satisfy regular expression pattern: "
       "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"},
      {"MaxResultsZero", "ListClusters", json::parse(R"({"MaxResults": 0})"),
       "1 validation error detected: Value '0' at 'maxResults' failed to satisfy constraint: "
       "Member must have value greater than or equal to 1"},
      {"TagControlCharacter", "AddTags",
       json::parse("{\"ResourceArn\": \"arn:aws:sagemaker:us-west-2:123456789012:cluster/"
                   "abc123def456\", \"Tags\": [{\"Key\": \"a\\u0001b\", \"Value\": \"v\"}]}"),
       "1 validation error detected: Value 'a\x01"
       "b' at 'tags.1.member.key' failed to satisfy "
       "constraint: Member must satisfy regular expression pattern: "
       "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)"},
      {"UnionWithTwoMembers", "CreateCluster",
       WithGroup("InstanceStorageConfigs",
                 json::parse(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 100},
                   "FsxLustreConfig": {"DnsName": "fs-0123456789abcdef0.fsx.aws.com",
                   "MountName": "abc"}}])")),
       "1 validation error detected: Value '{EbsVolumeConfig={VolumeSizeInGB=100}, "
       "FsxLustreConfig={DnsName=fs-0123456789abcdef0.fsx.aws.com, MountName=abc}}' at "
       "'instanceGroups.1.member.instanceStorageConfigs.1.member' failed to satisfy constraint: "
       "Member must have exactly one member set"},
      {"UnionWithNoMember", "CreateCluster",
       WithGroup("InstanceStorageConfigs", json::parse(R"([{}])")),
       "1 validation error detected: Value '{}' at "
       "'instanceGroups.1.member.instanceStorageConfigs.1.member' failed to satisfy constraint: "
       "Member must have exactly one member set"},
      {"RoleArnDigitsAreAscii", "CreateCluster",
       With("ClusterRole", "arn:aws:iam::\u0661\u0662\u0663456789012:role/R"),
       "1 validation error detected: Value 'arn:aws:iam::\u0661\u0662\u0663456789012:role/R' at "
       "'clusterRole' failed to satisfy constraint: Member must satisfy regular expression "
       "pattern: arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+"},
  };
}

class ValidationErrors : public testing::TestWithParam<Case> {};

TEST_P(ValidationErrors, ReportsAwsMessage) {
  const Case& c = GetParam();
  Status s = Model().validateInput(c.operation, c.body);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(AwsErrorTypeOf(s), std::nullopt);
  EXPECT_EQ(Message(s), c.message);
}

INSTANTIATE_TEST_SUITE_P(Table, ValidationErrors, testing::ValuesIn(ValidationCases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

struct TypeCase {
  std::string name;
  std::string operation;
  json body;
  std::string message;
};
void PrintTo(const TypeCase& c, std::ostream* os) { *os << c.name; }

std::vector<TypeCase> TypeCases() {
  return {
      {"StringForInteger", "CreateCluster", WithGroup("InstanceCount", "1"),
       "Expected a JSON integer at 'instanceGroups.1.member.instanceCount'"},
      {"FractionForInteger", "CreateCluster", WithGroup("InstanceCount", 1.5),
       "Expected a JSON integer at 'instanceGroups.1.member.instanceCount'"},
      {"IntegerOutOfRange", "ListClusters", json::parse(R"({"MaxResults": 10000000000})"),
       "Expected a JSON 32-bit integer at 'maxResults'"},
      {"NumberForString", "CreateCluster", With("ClusterName", 7),
       "Expected a JSON string at 'clusterName'"},
      {"ObjectForList", "CreateCluster", With("InstanceGroups", json::object()),
       "Expected a JSON array at 'instanceGroups'"},
      {"StringForStructure", "CreateCluster", With("Orchestrator", "Slurm"),
       "Expected a JSON object at 'orchestrator'"},
      {"ArrayForMap", "CreateCluster",
       WithGroup("KubernetesConfig", json::parse(R"({"Labels": ["a"]})")),
       "Expected a JSON object at 'instanceGroups.1.member.kubernetesConfig.labels'"},
      {"StringForBoolean", "CreateCluster",
       WithGroup("InstanceStorageConfigs",
                 json::parse(R"([{"EbsVolumeConfig": {"RootVolume": "yes"}}])")),
       "Expected a JSON boolean at "
       "'instanceGroups.1.member.instanceStorageConfigs.1.member.ebsVolumeConfig.rootVolume'"},
      {"WordForTimestamp", "ListClusters", json::parse(R"({"CreationTimeAfter": "yesterday"})"),
       "Expected a JSON timestamp (epoch seconds or ISO-8601 string) at 'creationTimeAfter'"},
      {"BodyNotObject", "DescribeCluster", json::array(),
       "Expected a JSON object as the request body"},
      {"StringForFloat", "CreateComputeQuota", json::parse(R"({"Name": "q", "ClusterArn":
          "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456", "ComputeQuotaConfig":
          {"ComputeQuotaResources": [{"InstanceType": "ml.g5.8xlarge", "VCpu": "2"}]},
          "ComputeQuotaTarget": {"TeamName": "t"}})"),
       "Expected a JSON number at "
       "'computeQuotaConfig.computeQuotaResources.1.member.vCpu'"},
  };
}

class SerializationErrors : public testing::TestWithParam<TypeCase> {};

TEST_P(SerializationErrors, AreTaggedSerializationException) {
  const TypeCase& c = GetParam();
  Status s = Model().validateInput(c.operation, c.body);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(AwsErrorTypeOf(s), "SerializationException");
  EXPECT_EQ(Message(s), c.message);
}

INSTANTIATE_TEST_SUITE_P(Table, SerializationErrors, testing::ValuesIn(TypeCases()),
                         [](const testing::TestParamInfo<TypeCase>& info) {
                           return info.param.name;
                         });

TEST(ValidateInput, SerializationErrorWinsOverConstraintViolations) {
  json body = WithGroup("InstanceCount", "x");
  body["ClusterName"] = "bad_name!";
  Status s = Model().validateInput("CreateCluster", body);
  EXPECT_EQ(AwsErrorTypeOf(s), "SerializationException");
}

TEST(ValidateInput, UnicodeTagKeysMatchLetterClasses) {
  for (const char* key : {"env", "Größe", "環境 タグ", "ключ_1", "a:b/c=d+e-f@g"}) {
    json body = {{"ResourceArn", "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456"},
                 {"Tags", json::array({{{"Key", key}, {"Value", "värde"}}})}};
    Status s = Model().validateInput("AddTags", body);
    EXPECT_TRUE(s.ok()) << key << ": " << s;
  }
  for (const char* key : {"tab\tkey", "nl\n", "bell\x07", "semi;colon"}) {
    json body = {{"ResourceArn", "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456"},
                 {"Tags", json::array({{{"Key", key}, {"Value", "v"}}})}};
    EXPECT_TRUE(absl::IsInvalidArgument(Model().validateInput("AddTags", body))) << key;
  }
}

TEST(ValidateInput, LengthCountsCodePoints) {
  // 63 code points, 189 bytes: within TagKey's max of 128 only when counted as code points.
  std::string key;
  for (int i = 0; i < 63; ++i) key += "日";
  json body = {{"ResourceArn", "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456"},
               {"Tags", json::array({{{"Key", key}, {"Value", "v"}}})}};
  EXPECT_TRUE(Model().validateInput("AddTags", body).ok());
  std::string long_key;
  for (int i = 0; i < 129; ++i) long_key += "é";
  body["Tags"][0]["Key"] = long_key;
  Status s = Model().validateInput("AddTags", body);
  EXPECT_NE(Message(s).find("Member must have length less than or equal to 128"), std::string::npos)
      << s;
}

TEST(ValidateInput, OldStyleRequestWithFormerlyRequiredMembersPasses) {
  // The 2024-05-30 model required InstanceGroups, InstanceType and LifeCycleConfig
  // {SourceS3Uri, OnCreate}; old clients still send them.
  json old_style = json::parse(R"({"ClusterName": "old", "InstanceGroups": [{"InstanceCount": 2,
      "InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "LifeCycleConfig":
      {"SourceS3Uri": "s3://bucket/lc/", "OnCreate": "on_create.sh"}, "ExecutionRole":
      "arn:aws:iam::123456789012:role/HyperPodRole"}]})");
  EXPECT_TRUE(Model().validateInput("CreateCluster", old_style).ok());
  // ... and the current model needs none of them.
  EXPECT_TRUE(
      Model().validateInput("CreateCluster", json::parse(R"({"ClusterName": "new"})")).ok());
  json new_group = json::parse(R"({"ClusterName": "new", "InstanceGroups": [{"InstanceCount": 0,
      "InstanceGroupName": "g", "ExecutionRole": "arn:aws:iam::123456789012:role/R",
      "LifeCycleConfig": {}}]})");
  EXPECT_TRUE(Model().validateInput("CreateCluster", new_group).ok());
}

TEST(ValidateInput, UnknownMembersAreIgnored) {
  json body = ValidCreateCluster();
  body["SomethingNew"] = {{"x", json::array({1, 2, "three"})}};
  body["InstanceGroups"][0]["FutureField"] = "whatever";
  body["Orchestrator"]["Slurm"]["Extra"] = nullptr;
  EXPECT_TRUE(Model().validateInput("CreateCluster", body).ok());
}

TEST(ValidateInput, NullOptionalMemberIsTreatedAsAbsent) {
  json body = ValidCreateCluster();
  body["NodeRecovery"] = nullptr;
  EXPECT_TRUE(Model().validateInput("CreateCluster", body).ok());
  body["ClusterName"] = nullptr;
  EXPECT_EQ(Message(Model().validateInput("CreateCluster", body)),
            "1 validation error detected: Value null at 'clusterName' failed to satisfy "
            "constraint: Member must not be null");
}

TEST(ValidateInput, DeeplyNestedInputDoesNotCrash) {
  // Bodies are parsed from text: copying a deep nlohmann value would itself recurse.
  const std::string deep = Nested(5000);
  auto body = [](const std::string& member, const std::string& value) {
    if (member == "ClusterName") return json::parse("{\"ClusterName\": " + value + "}");
    return json::parse("{\"ClusterName\": \"demo\", \"" + member + "\": " + value + "}");
  };
  for (const char* member : {"Tags", "InstanceGroups", "ClusterName", "Orchestrator"}) {
    Status s = Model().validateInput("CreateCluster", body(member, deep));
    EXPECT_EQ(AwsErrorTypeOf(s), "SerializationException") << member << ": " << s;
  }
  // Unknown members are not walked at all.
  EXPECT_TRUE(Model().validateInput("CreateCluster", body("Unknown", deep)).ok());
  Status s = Model().validateInput("CreateCluster",
                                   body("Tags", "[{\"Key\": \"k\", \"Value\": " + deep + "}]"));
  EXPECT_EQ(AwsErrorTypeOf(s), "SerializationException");
  // A too-long list holding a deep unknown member: the printed value stays bounded.
  std::string groups = "[{\"Deep\": " + deep + "}";
  for (int i = 0; i < 100; ++i) groups += ", {}";
  groups += "]";
  s = Model().validateInput("CreateCluster", body("InstanceGroups", groups));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(Message(s).find("Member must have length less than or equal to 100"),
            std::string::npos);
  EXPECT_LT(s.message().size(), 100000u);
}

TEST(ValidateInput, MapKeysAreCheckedAtTheMap) {
  Status s = Model().validateInput(
      "CreateCluster", WithGroup("KubernetesConfig", json::parse(R"({"Labels": {"-bad": "v"}})")));
  EXPECT_EQ(Message(s),
            "1 validation error detected: Value '-bad' at "
            "'instanceGroups.1.member.kubernetesConfig.labels' failed to satisfy constraint: "
            "Member must satisfy regular expression pattern: "
            "([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?");
}

TEST(ValidateInput, HugeBacktrackingInputsStayCheap) {
  // ClusterKubernetesLabelKey's pattern backtracks on long runs of '-'.
  const std::string key = "a" + std::string(200000, '-') + "!";
  json labels = {{"Labels", {{key, "v"}}}};
  const auto start = std::chrono::steady_clock::now();
  Status s = Model().validateInput("CreateCluster", WithGroup("KubernetesConfig", labels));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  EXPECT_NE(Message(s).find("Member must have length less than or equal to 317"),
            std::string::npos);
  EXPECT_EQ(Message(s).find("regular expression"), std::string::npos);
  // Within the max length the pattern is still checked.
  const std::string near = "a" + std::string(300, '-') + "!";
  labels = {{"Labels", {{near, "v"}}}};
  s = Model().validateInput("CreateCluster", WithGroup("KubernetesConfig", labels));
  EXPECT_NE(Message(s).find("regular expression"), std::string::npos) << s;
}

TEST(ValidateInput, PrintedValuesAreCapped) {
  const std::string name(300, 'x');
  Status s = Model().validateInput("CreateCluster", With("ClusterName", name));
  EXPECT_EQ(Message(s), "1 validation error detected: Value '" + std::string(256, 'x') +
                            "...' at 'clusterName' failed to satisfy constraint: Member must "
                            "have length less than or equal to 63");
}

TEST(ValidateInput, ManyViolationsAreCountedButListingIsBounded) {
  json ids = json::array();
  for (int i = 0; i < 500; ++i) ids.push_back("bad");
  Status s =
      Model().validateInput("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", ids}});
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  const std::string message(s.message());
  EXPECT_EQ(message.rfind("500 validation errors detected: ", 0), 0u) << message.substr(0, 80);
  size_t listed = 0;
  for (size_t at = message.find("Value '"); at != std::string::npos;
       at = message.find("Value '", at + 1)) {
    ++listed;
  }
  EXPECT_EQ(listed, 100u);
}

TEST(ValidateInput, UnknownOperationIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(Model().validateInput("CreateTrainingJob", json::object())));
  EXPECT_TRUE(absl::IsNotFound(Model().validateInput("", json::object())));
}

TEST(ValidateInput, IsThreadSafe) {
  json bad = ValidCreateCluster();
  bad["ClusterName"] = "bad_name!";
  bad["Tags"][0]["Key"] = "日本";
  const std::string expected(Model().validateInput("CreateCluster", bad).message());
  ASSERT_FALSE(expected.empty());
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        if (Message(Model().validateInput("CreateCluster", bad)) != expected) ++failures[t];
        if (!Model().validateInput("CreateCluster", ValidCreateCluster()).ok()) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

constexpr const char* kTinyModel = R"({
  "version": "2.0", "metadata": {"apiVersion": "2020-01-01"},
  "operations": {"Op": {"name": "Op", "input": {"shape": "In"}}, "NoInput": {"name": "NoInput"}},
  "shapes": {
    "In": {"type": "structure",
           "members": {"Name": {"shape": "OldName"}, "Size": {"shape": "Size"}}},
    "OldName": {"type": "string", "pattern": "^[a-z]+$"},
    "Size": {"type": "long", "min": -5, "max": 9007199254740993}
  }})";

TEST(FromJson, OldStyleAnchoredPatternsAreFullMatch) {
  auto model = ServiceModel::FromJson(kTinyModel);
  ASSERT_TRUE(model.ok()) << model.status();
  const ServiceModel& m = **model;
  EXPECT_EQ(m.operations(), (std::vector<std::string>{"NoInput", "Op"}));
  EXPECT_TRUE(m.validateInput("Op", {{"Name", "abc"}}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(m.validateInput("Op", {{"Name", "abc\n"}})));
  EXPECT_TRUE(absl::IsInvalidArgument(m.validateInput("Op", {{"Name", "1abc"}})));
  EXPECT_TRUE(absl::IsInvalidArgument(m.validateInput("Op", {{"Name", "abc1"}})));
  EXPECT_TRUE(m.validateInput("NoInput", json::array()).ok());
}

TEST(FromJson, LongRangesAreExact) {
  auto model = ServiceModel::FromJson(kTinyModel);
  ASSERT_TRUE(model.ok()) << model.status();
  const ServiceModel& m = **model;
  EXPECT_TRUE(m.validateInput("Op", {{"Size", 9007199254740993LL}}).ok());
  EXPECT_EQ(Message(m.validateInput("Op", {{"Size", 9007199254740994LL}})),
            "1 validation error detected: Value '9007199254740994' at 'size' failed to satisfy "
            "constraint: Member must have value less than or equal to 9007199254740993");
  EXPECT_EQ(Message(m.validateInput("Op", {{"Size", -6}})),
            "1 validation error detected: Value '-6' at 'size' failed to satisfy constraint: "
            "Member must have value greater than or equal to -5");
}

TEST(FromJson, RejectsBrokenModels) {
  const std::vector<std::string> bad = {
      "not json",
      "[]",
      R"({"operations": {}})",
      R"({"operations": {"Op": {"input": {"shape": "Missing"}}}, "shapes": {}})",
      R"({"operations": {}, "shapes": {"S": {"type": "list", "member": {"shape": "Nope"}}}})",
      R"({"operations": {}, "shapes": {"S": {"type": "string", "pattern": "(unclosed"}}})",
      R"({"operations": {}, "shapes": {"S": {"type": "string", "min": "1"}}})",
      R"({"operations": {}, "shapes": {"S": {"members": {}}}})",
      R"({"operations": {}, "shapes": {"S": {"type": "structure", "required": ["X"],
          "members": {}}}})",
  };
  for (const auto& doc : bad) {
    auto model = ServiceModel::FromJson(doc);
    EXPECT_TRUE(absl::IsInvalidArgument(model.status())) << doc << ": " << model.status();
  }
}

}  // namespace
}  // namespace hf::model

namespace hf::model {
namespace {

TEST(ServiceModelPrune, KeepsOnlyTheModelsMembersAtEveryDepth) {
  const auto& model = *ServiceModel::Embedded();
  nlohmann::json in = {
      {"ClusterName", "demo"},
      {"Junk", "x"},
      {"InstanceGroups",
       {{{"InstanceGroupName", "g"},
         {"InstanceCount", 1},
         {"Extra", {{"a", 1}}},
         {"LifeCycleConfig", {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "a.sh"}, {"Z", 1}}}}}},
      {"Tags", {{{"Key", "k"}, {"Value", "v"}, {"Other", true}}}},
      {"NodeRecovery", nullptr}};
  auto out = model.pruneInput("CreateCluster", in);
  EXPECT_EQ(out, (nlohmann::json{
                     {"ClusterName", "demo"},
                     {"InstanceGroups",
                      {{{"InstanceGroupName", "g"},
                        {"InstanceCount", 1},
                        {"LifeCycleConfig", {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "a.sh"}}}}}},
                     {"Tags", {{{"Key", "k"}, {"Value", "v"}}}}}));
  EXPECT_EQ(model.pruneInput("NoSuchOperation", in), nlohmann::json::object());
}

TEST(ServiceModelPrune, OutputKeepsOnlyTheOutputShapesMembersAndDocumentsWhole) {
  const auto& model = *ServiceModel::Embedded();
  EXPECT_EQ(model.outputShape("DescribeClusterNode"), "DescribeClusterNodeResponse");
  EXPECT_EQ(model.outputShape("DeleteComputeQuota"), "");  // no output in the model
  nlohmann::json out = {
      {"NodeDetails",
       {{"InstanceId", "i-00000000000000001"},
        {"ThreadsPerCore", 2},
        {"ReplacementOf", "i-00000000000000009"},
        {"InstanceStatus", {{"Status", "Running"}, {"Mine", 1}}}}},
      {"Bookkeeping", true}};
  EXPECT_EQ(model.pruneOutput("DescribeClusterNode", out),
            (nlohmann::json{{"NodeDetails",
                             {{"InstanceId", "i-00000000000000001"},
                              {"ThreadsPerCore", 2},
                              {"InstanceStatus", {{"Status", "Running"}}}}}}));
  EXPECT_EQ(model.pruneOutput("DeleteComputeQuota", out), nlohmann::json::object());
  EXPECT_EQ(model.pruneOutput("NoSuchOperation", out), nlohmann::json::object());

  auto free_form = ServiceModel::FromJson(R"({"operations": {"Why": {"name": "Why",
      "output": {"shape": "WhyResponse"}}}, "shapes": {
      "WhyResponse": {"type": "structure", "document": true, "members": {}}}})");
  ASSERT_TRUE(free_form.ok()) << free_form.status();
  const nlohmann::json report = {{"Anything", {{"goes", {1, 2}}}}};
  EXPECT_EQ((*free_form)->pruneOutput("Why", report), report);
}

}  // namespace
}  // namespace hf::model
