// Every operation the server implements, SageMaker's and the CloudWatch Logs subset's, driven
// with real requests through the ApiHandler on an in-memory store, answers only with members
// of the model's output shape: structures by member name, lists and maps recursively, scalars
// by JSON type and enum value. Nodes and events carry the planner's bookkeeping as the
// controller writes it (a replacement's and a retry's marks, a recovery, a fault), events carry
// a metadata member the model does not define, and the modeled members stored beside them are
// still returned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api_world.h"
#include "hyperfleet/logs/log_operations.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using testing::ApiWorld;

/// Appends to `problems` what in `v` (at `path`) shape `name` of `model` does not define.
void Walk(const model::ServiceModel& model, const Json& v, const std::string& name,
          const std::string& path, std::vector<std::string>& problems) {
  const Json* shape = model.shape(name);
  if (shape == nullptr) {
    problems.push_back(absl::StrCat(path, ": shape ", name, " is not in the model"));
    return;
  }
  const std::string type = shape->value("type", "");
  auto wrong = [&](const char* wanted) {
    problems.push_back(absl::StrCat(path, ": ", v.dump(), " is not ", wanted, " (", name, ")"));
  };
  if (type == "structure") {
    if (shape->value("document", false)) return;
    if (!v.is_object()) return wrong("an object");
    const Json members = shape->value("members", Json::object());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!members.contains(it.key())) {
        problems.push_back(absl::StrCat(path, ".", it.key(), ": not a member of ", name));
        continue;
      }
      Walk(model, it.value(), members[it.key()]["shape"], absl::StrCat(path, ".", it.key()),
           problems);
    }
  } else if (type == "list") {
    if (!v.is_array()) return wrong("an array");
    for (size_t i = 0; i < v.size(); ++i) {
      Walk(model, v[i], (*shape)["member"]["shape"], absl::StrCat(path, "[", i, "]"), problems);
    }
  } else if (type == "map") {
    if (!v.is_object()) return wrong("an object");
    for (auto it = v.begin(); it != v.end(); ++it) {
      Walk(model, it.value(), (*shape)["value"]["shape"], absl::StrCat(path, ".", it.key()),
           problems);
    }
  } else if (type == "string") {
    if (!v.is_string()) return wrong("a string");
    if (shape->contains("enum")) {
      const Json& values = (*shape)["enum"];
      if (std::find(values.begin(), values.end(), v) == values.end()) wrong("of the enum");
    }
  } else if (type == "integer" || type == "long") {
    if (!v.is_number_integer()) return wrong("an integer");
  } else if (type == "float" || type == "double" || type == "timestamp") {
    if (!v.is_number()) return wrong("a number");
  } else if (type == "boolean") {
    if (!v.is_boolean()) return wrong("a boolean");
  } else if (type == "blob") {
    if (!v.is_string()) return wrong("a string");
  }
}

class OutputShapesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-output-shapes-XXXXXX";
    dir_ = mkdtemp(tmpl);
    log_store_ = std::move(logs::OpenLogStoreInDataDir(dir_, w_.clock).value());
    log_ops_ = std::make_unique<logs::LogOperations>(*log_store_, logs::LogsConfig{});
    w_.handler.addService(*log_ops_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Calls `op` of the service with X-Amz-Target prefix `prefix`, expects success, and
  /// checks the response against the operation's output shape in `model`.
  Json Drive(const model::ServiceModel& model, const std::string& prefix, const std::string& op,
             const Json& in) {
    auto out = w_.Call(prefix + "." + op, in);
    EXPECT_TRUE(out.ok()) << op << " " << in.dump() << ": " << out.status();
    if (!out.ok()) return Json::object();
    const std::string shape = model.outputShape(op);
    if (shape.empty()) {  // an operation without output answers {}
      if (*out != Json::object()) problems_.push_back(op + ": has no output but answered " + out->dump());
    } else {
      Walk(model, *out, shape, op, problems_);
    }
    driven_[prefix].insert(op);
    return *out;
  }
  Json Sm(const std::string& op, const Json& in) { return Drive(*w_.model, "SageMaker", op, in); }
  Json Logs(const std::string& op, const Json& in) {
    return Drive(log_ops_->model(), "Logs_20140328", op, in);
  }

  /// Writes nodes and events to cluster `name` as the controller does, bookkeeping included.
  void WriteControllerState(const std::string& name);

  ApiWorld w_;
  std::string dir_;
  std::unique_ptr<logs::LogStore> log_store_;
  std::unique_ptr<logs::LogOperations> log_ops_;
  std::vector<std::string> problems_;
  std::map<std::string, std::set<std::string>> driven_;  // prefix -> operations
};

const Json kModeledExtras = {
    {"ThreadsPerCore", 2},
    {"InstanceStorageConfigs", {{{"EbsVolumeConfig", {{"VolumeSizeInGB", 100}}}}}},
    {"OverrideVpcConfig",
     {{"SecurityGroupIds", {"sg-0123456789abcdef0"}}, {"Subnets", {"subnet-0123456789abcdef0"}}}}};

void OutputShapesTest::WriteControllerState(const std::string& name) {
  namespace is = model::instance_status;
  const model::Cluster c = w_.store->cluster(name).value();
  const SystemTime now = w_.clock.now();
  auto node = [&](int k, model::InstanceStatus status) {
    model::Node n;
    n.cluster_id = c.id;
    n.instance_id = absl::StrCat("i-0000000000000000", k);
    n.logical_id = absl::StrCat("workers-00000000000", k);
    n.group = "workers";
    n.instance_type = "ml.c5.xlarge";
    n.status = status;
    n.launch_time = now;
    n.private_ip = absl::StrCat("10.224.0.", 10 + k);
    n.hostname = absl::StrCat("ip-10-224-0-", 10 + k);
    n.lifecycle = {{"SourceS3Uri", "s3://bucket/lifecycle/"}, {"OnCreate", "on_create.sh"}};
    n.spec_extras = kModeledExtras;
    n.marks.requested_ip = n.private_ip;
    return n;
  };
  model::Node running = node(1, is::kRunning);
  model::Node replacement = node(2, is::kPending);  // replaces node 9
  replacement.marks.replacement_of = "i-00000000000000009";
  replacement.marks.replace_attempt = 2;
  replacement.marks.slurm_down_pending = true;
  replacement.marks.slurm_down_reasons = {"Hyperfleet: replacing i-00000000000000009"};
  model::Node retry = node(3, is::kFailure);  // a Continuous retry that failed
  retry.message = "on_create.sh exited with 1";
  retry.marks.retry_of = "i-00000000000000008";
  retry.fault = model::NodeFault{model::NodeFault::Kind::kHardwareFault, "GPU fell off", now, {}};
  retry.lifecycle_state = "Failed";
  retry.lifecycle_message = "exit 1";
  model::Node rebooting = node(4, is::kRunning);
  rebooting.recovery = model::NodeRecoveryRequest{
      model::NodeRecoveryRequest::Action::kReboot, "software fault", now, false,
      model::NodeRecoveryRequest::Source::kSoftwareFault};
  rebooting.recovery_progress.started_at = now;
  store::WriteBatch b;
  for (const auto& n : {running, replacement, retry, rebooting}) {
    b.nodes.push_back({n, store::kMustNotExist, false});
  }
  // Events as the planner writes them (src/control/plan/), with a member beyond the model in
  // the metadata of two (older planners wrote an Action there).
  auto event = [&](const model::Node& n, const char* level, const std::string& text,
                   Json metadata) {
    b.events.push_back(model::MakeEvent(w_.ids.eventId(), c.id, now,
                                        {"Instance", level, text, n.group, n.instance_id,
                                         std::move(metadata)}));
  };
  event(replacement, "Info", "Replacing instance i-00000000000000009",
        {{"Instance", {{"NodeLogicalId", replacement.logical_id}, {"Action", "Replace"}}}});
  event(rebooting, "Info", "Rebooting instance i-00000000000000004",
        {{"Instance", {{"NodeLogicalId", rebooting.logical_id}, {"Action", "Reboot"}}}});
  event(retry, "Error", "Instance failed",
        {{"Instance", {{"NodeLogicalId", retry.logical_id}, {"FailureMessage", retry.message}}}});
  ASSERT_TRUE(w_.store->commit(b).ok());
}

TEST_F(OutputShapesTest, EveryOperationAnswersOnlyWithItsModeledMembers) {
  // Clusters: one with the modeled extras on its group, one Continuous.
  Json spec = ApiWorld::ClusterSpec("shapes");
  for (auto it = kModeledExtras.begin(); it != kModeledExtras.end(); ++it) {
    spec["InstanceGroups"][0][it.key()] = it.value();
  }
  spec["VpcConfig"] = kModeledExtras["OverrideVpcConfig"];
  spec["Tags"] = {{{"Key", "env"}, {"Value", "dev"}}};
  const std::string arn = Sm("CreateCluster", spec)["ClusterArn"];
  Json continuous = ApiWorld::ClusterSpec("continuous");
  continuous["NodeProvisioningMode"] = "Continuous";
  Sm("CreateCluster", continuous);
  w_.SetClusterStatus("shapes", "InService");
  w_.SetClusterStatus("continuous", "InService");
  ASSERT_NO_FATAL_FAILURE(WriteControllerState("shapes"));

  Sm("DescribeCluster", {{"ClusterName", "shapes"}});
  Sm("ListClusters", {{"MaxResults", 100}});
  Sm("ListClusterNodes", {{"ClusterName", "shapes"}, {"MaxResults", 100}});
  for (int k = 1; k <= 4; ++k) {
    const Json d = Sm("DescribeClusterNode", {{"ClusterName", "shapes"},
                                              {"NodeId", absl::StrCat("i-0000000000000000", k)}});
    // The modeled members stored beside the bookkeeping are returned.
    for (auto it = kModeledExtras.begin(); it != kModeledExtras.end(); ++it) {
      EXPECT_EQ(d["NodeDetails"][it.key()], it.value()) << k << " " << it.key();
    }
    EXPECT_EQ(d["NodeDetails"]["PrivatePrimaryIp"], absl::StrCat("10.224.0.", 10 + k));
  }
  Sm("DescribeClusterNode", {{"ClusterName", "shapes"}, {"NodeLogicalId", "workers-000000000002"}});
  const Json events = Sm("ListClusterEvents", {{"ClusterName", "shapes"}, {"MaxResults", 100}});
  ASSERT_GE(events["Events"].size(), 3u);
  for (const auto& e : events["Events"]) {
    Sm("DescribeClusterEvent", {{"ClusterName", "shapes"}, {"EventId", e["EventId"]}});
  }
  Sm("BatchReplaceClusterNodes",
     {{"ClusterName", "shapes"}, {"NodeIds", {"i-00000000000000001", "i-0000000000000abcd"}}});
  Sm("BatchRebootClusterNodes", {{"ClusterName", "shapes"},
                                 {"NodeIds", {"i-00000000000000003", "i-00000000000000004"}},
                                 {"NodeLogicalIds", {"workers-nosuchnode"}}});
  Sm("BatchDeleteClusterNodes", {{"ClusterName", "shapes"},
                                 {"NodeIds", {"i-00000000000000002", "i-0000000000000abcd"}},
                                 {"NodeLogicalIds", {"workers-nosuchnode"}}});
  Sm("BatchAddClusterNodes",
     {{"ClusterName", "continuous"},
      {"NodesToAdd", {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 1}},
                      {{"InstanceGroupName", "nosuchgroup"}, {"IncrementTargetCountBy", 1}}}}});
  Sm("UpdateCluster", ApiWorld::ClusterSpec("continuous", 4));

  // Governance.
  const Json policy = Sm("CreateClusterSchedulerConfig",
                         {{"Name", "policy"},
                          {"ClusterArn", arn},
                          {"SchedulerConfig",
                           {{"PriorityClasses", {{{"Name", "training"}, {"Weight", 70}}}}}}});
  const std::string pid = policy["ClusterSchedulerConfigId"];
  Sm("UpdateClusterSchedulerConfig",
     {{"ClusterSchedulerConfigId", pid}, {"TargetVersion", 1}, {"Description", "v2"}});
  Sm("DescribeClusterSchedulerConfig", {{"ClusterSchedulerConfigId", pid}});
  Sm("DescribeClusterSchedulerConfig",
     {{"ClusterSchedulerConfigId", pid}, {"ClusterSchedulerConfigVersion", 1}});
  Sm("ListClusterSchedulerConfigs", {{"MaxResults", 1}});
  const Json quota = Sm("CreateComputeQuota",
                        {{"Name", "quota"},
                         {"ClusterArn", arn},
                         {"ComputeQuotaConfig",
                          {{"ComputeQuotaResources",
                            {{{"InstanceType", "ml.c5.xlarge"}, {"Count", 8}}}}}},
                         {"ComputeQuotaTarget", {{"TeamName", "team-a"}}}});
  const std::string qid = quota["ComputeQuotaId"];
  Sm("UpdateComputeQuota",
     {{"ComputeQuotaId", qid}, {"TargetVersion", 1}, {"ActivationState", "Disabled"}});
  Sm("DescribeComputeQuota", {{"ComputeQuotaId", qid}});
  Sm("DescribeComputeQuota", {{"ComputeQuotaId", qid}, {"ComputeQuotaVersion", 1}});
  Sm("ListComputeQuotas", {{"ClusterArn", arn}});

  // Tags on every taggable ARN.
  for (const std::string& a : {arn, policy["ClusterSchedulerConfigArn"].get<std::string>(),
                               quota["ComputeQuotaArn"].get<std::string>()}) {
    Sm("AddTags", {{"ResourceArn", a}, {"Tags", {{{"Key", "k"}, {"Value", "v"}}}}});
    Sm("ListTags", {{"ResourceArn", a}});
    Sm("DeleteTags", {{"ResourceArn", a}, {"TagKeys", {"k"}}});
  }
  Sm("DeleteComputeQuota", {{"ComputeQuotaId", qid}});
  Sm("DeleteClusterSchedulerConfig", {{"ClusterSchedulerConfigId", pid}});
  Sm("DeleteCluster", {{"ClusterName", "continuous"}});

  // CloudWatch Logs.
  const std::string group = "/aws/sagemaker/Clusters/shapes/abc";
  const logs::InputLogEvent lines[] = {{1000, "hello"}, {2000, "world"}};
  ASSERT_TRUE(log_store_->append(group, "LifecycleConfig/workers/i-00000000000000001", lines).ok());
  Logs("DescribeLogGroups", {{"logGroupNamePrefix", "/aws/"}});
  Logs("DescribeLogStreams", {{"logGroupName", group}});
  Logs("GetLogEvents", {{"logGroupName", group},
                        {"logStreamName", "LifecycleConfig/workers/i-00000000000000001"}});
  Logs("FilterLogEvents", {{"logGroupName", group}, {"filterPattern", "hello"}});

  EXPECT_TRUE(problems_.empty()) << problems_.size() << " members outside the model:\n"
                                 << absl::StrJoin(problems_, "\n");

  // Every operation of both models was driven, or is one Hyperfleet refuses as unimplemented.
  const std::set<std::string> unimplemented = {"AttachClusterNodeVolume",
                                               "DetachClusterNodeVolume",
                                               "StartClusterHealthCheck", "UpdateClusterSoftware"};
  for (const std::string& op : w_.model->operations()) {
    if (driven_["SageMaker"].count(op)) continue;
    EXPECT_TRUE(unimplemented.count(op)) << op << " is not driven here";
    EXPECT_FALSE(w_.clusters.implements(op) || w_.governance.implements(op)) << op;
  }
  for (const std::string& op : log_ops_->model().operations()) {
    EXPECT_TRUE(driven_["Logs_20140328"].count(op)) << op << " is not driven here";
  }
}

}  // namespace
}  // namespace hf::api
