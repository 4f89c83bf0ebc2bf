// BatchReplaceClusterNodes / BatchRebootClusterNodes on an in-memory store: which node
// statuses are accepted (Running and Failure, as on HyperPod), which are refused with
// InvalidInstanceStatus (a change under way), and what the accepted request records.
#include "hyperfleet/api/cluster_operations.h"

#include <gtest/gtest.h>

#include "hyperfleet/model/service_model.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
namespace is = model::instance_status;
using Action = model::NodeRecoveryRequest::Action;

class FixedClock : public Clock {
 public:
  SystemTime now() const override { return FromEpochSeconds(1'800'000'000); }
};

class RecoveryOperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore(":memory:"));
    ops_ = std::make_unique<ClusterOperations>(*store_, *model::ServiceModel::Embedded(), clock_,
                                               ids_, ApiConfig{}, [](const std::string&) {});
    model::Cluster c;
    c.id = "abcdefabcdef";
    c.name = "rec";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + c.id;
    c.status = model::cluster_status::kInService;
    c.creation_time = clock_.now();
    model::InstanceGroup g;
    g.name = "workers";
    g.instance_type = "ml.c5.xlarge";
    g.target_count = 4;
    g.spec = {{"InstanceGroupName", g.name}, {"InstanceType", g.instance_type},
              {"InstanceCount", 4}};
    c.groups.push_back(g);
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    const model::InstanceStatus statuses[] = {is::kRunning, is::kFailure, is::kPending, is::kShuttingDown};
    for (int k = 0; k < 4; ++k) {
      model::Node n;
      n.cluster_id = c.id;
      n.instance_id = "i-0000000000000000" + std::to_string(k);
      n.logical_id = "workers-" + std::to_string(k);
      n.group = g.name;
      n.instance_type = g.instance_type;
      n.status = statuses[k];
      n.launch_time = clock_.now();
      if (n.status == is::kFailure) {
        n.message = "on_create.sh exited with 1";
        n.fault = model::NodeFault{model::NodeFault::Kind::kReplacementFailed, n.message};
      }
      b.nodes.push_back({n, store::kMustNotExist, false});
    }
    ASSERT_TRUE(store_->commit(b).ok());
  }

  StatusOr<Json> Call(const std::string& op, const Json& in) {
    const auto& model = *model::ServiceModel::Embedded();
    HF_RETURN_IF_ERROR(model.validateInput(op, in));
    return ops_->call(op, model.pruneInput(op, in));
  }

  model::Node Node(int k) {
    return store_->node("abcdefabcdef", "i-0000000000000000" + std::to_string(k)).value();
  }

  /// {NodeId: ErrorCode} of a response's Failed list.
  static std::map<std::string, std::string> Errors(const Json& out) {
    std::map<std::string, std::string> errors;
    for (const auto& f : out.value("Failed", Json::array())) {
      errors[f.value("NodeId", "")] = f.value("ErrorCode", "");
    }
    return errors;
  }

  FixedClock clock_;
  SequentialIdSource ids_{1};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ClusterOperations> ops_;
};

TEST_F(RecoveryOperationsTest, ReplaceAcceptsRunningAndFailedNodesAndRefusesChangingOnes) {
  auto out = Call("BatchReplaceClusterNodes",
                  {{"ClusterName", "rec"},
                   {"NodeIds", {"i-00000000000000000", "i-00000000000000001",
                                "i-00000000000000002", "i-00000000000000003"}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["Successful"], Json({"i-00000000000000000", "i-00000000000000001"}));
  EXPECT_EQ(Errors(*out), (std::map<std::string, std::string>{
                              {"i-00000000000000002", "InvalidInstanceStatus"},
                              {"i-00000000000000003", "InvalidInstanceStatus"}}));
  const model::Node running = Node(0);
  ASSERT_TRUE(running.recovery);
  EXPECT_EQ(running.recovery->action, Action::kReplace);
  EXPECT_FALSE(running.recovery->hard);  // asked to shut down cleanly
  const model::Node failed = Node(1);
  EXPECT_EQ(failed.status, is::kPending);
  ASSERT_TRUE(failed.recovery);
  EXPECT_EQ(failed.recovery->action, Action::kReplace);
  EXPECT_TRUE(failed.recovery->hard);  // it cannot be asked: killed
  EXPECT_FALSE(failed.fault);          // the request answers the fault
  // The same node again is in use.
  auto again = Call("BatchReplaceClusterNodes",
                    {{"ClusterName", "rec"}, {"NodeIds", {"i-00000000000000001"}}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Errors(*again).at("i-00000000000000001"), "InstanceIdInUse");
}

TEST_F(RecoveryOperationsTest, RebootAcceptsAFailedNodeAsAPowerCycle) {
  auto out = Call("BatchRebootClusterNodes",
                  {{"ClusterName", "rec"},
                   {"NodeIds", {"i-00000000000000001", "i-00000000000000002"}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["Successful"], Json({"i-00000000000000001"}));
  EXPECT_EQ(Errors(*out).at("i-00000000000000002"), "InvalidInstanceStatus");
  const model::Node failed = Node(1);
  ASSERT_TRUE(failed.recovery);
  EXPECT_EQ(failed.recovery->action, Action::kReboot);
  EXPECT_TRUE(failed.recovery->hard);
}

}  // namespace
}  // namespace hf::api
