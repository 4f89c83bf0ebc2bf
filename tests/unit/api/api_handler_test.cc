// The API front door, through ApiHandler::handle with SigV4-signed requests on an in-memory
// store: the order of its checks (method, SigV4 scope, target, Content-Type, nesting depth,
// JSON, model validation, operation) and each check's exact error, for SageMaker's operation
// sets (ClusterOperations, GovernanceOperations) and for an added service with its own
// prefix, signing name and error type (the CloudWatch Logs subset).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "api_world.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/logs/log_operations.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using testing::ApiWorld;

constexpr char kKeyId[] = "AKIDHANDLERTEST";
constexpr char kSecret[] = "handler-test-secret";

/// One request's options; the defaults make a well-formed SageMaker request.
struct Req {
  std::string target;
  std::string body = "{}";
  std::string content_type = "application/x-amz-json-1.1";
  std::string service = "sagemaker";  ///< the signature's scope
  std::string method = "POST";
};

/// An answer: HTTP status, AWS error type ("" on success) and message, or the body.
struct Answer {
  int status = 0;
  std::string type;
  std::string message;
  Json body;
};

class ApiHandlerTest : public ::testing::Test {
 protected:
  ApiHandlerTest() {
    char tmpl[] = "/tmp/hf-api-handler-XXXXXX";
    dir_ = mkdtemp(tmpl);
    log_store_ = std::move(logs::OpenLogStoreInDataDir(dir_, w_.clock).value());
    log_ops_ = std::make_unique<logs::LogOperations>(*log_store_, logs::LogsConfig{});
    handler_.addService(w_.clusters);
    handler_.addService(w_.governance);
    handler_.addService(*log_ops_);
  }

  ~ApiHandlerTest() override { std::filesystem::remove_all(dir_); }

  Answer Send(const Req& r) {
    http::HttpRequest req;
    req.method = r.method;
    req.target = "/";
    if (!r.content_type.empty()) req.headers.emplace_back("Content-Type", r.content_type);
    if (!r.target.empty()) req.headers.emplace_back("X-Amz-Target", r.target);
    req.body = r.body;
    auth::SignSigV4(req, {kKeyId, kSecret}, "us-west-2", r.service, "localhost",
                    w_.clock.now());
    http::HttpResponse res = handler_.handle(std::move(req));
    Answer a;
    a.status = res.status;
    a.body = Json::parse(res.body, nullptr, false);
    if (res.status != 200) {
      a.type = a.body.value("__type", "?");
      a.message = a.body.value("message", "?");
    }
    return a;
  }

  ApiWorld w_;
  std::string dir_;
  std::unique_ptr<logs::LogStore> log_store_;
  std::unique_ptr<logs::LogOperations> log_ops_;
  ApiHandler handler_{
      [](std::string_view key) -> std::optional<std::string> {
        if (key == kKeyId) return std::string(kSecret);
        return std::nullopt;
      },
      w_.clock, w_.ids, ApiConfig{}};
};

#define EXPECT_ERROR(answer, http_status, aws_type, text)  \
  do {                                                     \
    const Answer a_ = (answer);                            \
    EXPECT_EQ(a_.status, http_status) << a_.body.dump();   \
    EXPECT_EQ(a_.type, aws_type) << a_.body.dump();        \
    EXPECT_EQ(a_.message, text) << a_.body.dump();         \
  } while (0)

TEST_F(ApiHandlerTest, EachServiceReachesItsOperations) {
  Answer a = Send({.target = "SageMaker.ListClusters"});
  EXPECT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body, Json({{"ClusterSummaries", Json::array()}}));
  a = Send({.target = "SageMaker.ListComputeQuotas"});  // GovernanceOperations
  EXPECT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body, Json({{"ComputeQuotaSummaries", Json::array()}}));
  a = Send({.target = "Logs_20140328.DescribeLogGroups", .service = "logs"});
  EXPECT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body, Json({{"logGroups", Json::array()}}));
  // An operation's own error comes through with its type.
  EXPECT_ERROR(Send({.target = "SageMaker.DescribeCluster", .body = R"({"ClusterName":"nope"})"}),
               400, "ResourceNotFound", "Cluster nope not found");
}

TEST_F(ApiHandlerTest, MethodIsCheckedFirst) {
  EXPECT_ERROR(Send({.target = "Bogus", .content_type = "text/plain", .method = "GET"}), 400,
               "UnknownOperationException",
               "Method GET is not allowed: the SageMaker API takes POST.");
}

TEST_F(ApiHandlerTest, SignatureScopeMustBeTheTargetsService) {
  EXPECT_ERROR(Send({.target = "SageMaker.ListClusters", .service = "logs"}), 400,
               "InvalidSignatureException",
               "Credential should be scoped to correct service: 'sagemaker'. ");
  EXPECT_ERROR(Send({.target = "Logs_20140328.DescribeLogGroups"}), 400,
               "InvalidSignatureException",
               "Credential should be scoped to correct service: 'logs'. ");
  // A target no service claims is SageMaker's to refuse: scope checked for sagemaker.
  EXPECT_ERROR(Send({.target = "Nobody.Op", .service = "logs"}), 400,
               "InvalidSignatureException",
               "Credential should be scoped to correct service: 'sagemaker'. ");
  // Scopes the endpoint does not serve at all fail in SigV4 itself.
  EXPECT_EQ(Send({.target = "SageMaker.ListClusters", .service = "s3"}).type,
            "InvalidSignatureException");
}

TEST_F(ApiHandlerTest, TargetIsCheckedBeforeTheBody) {
  for (const std::string target : {"", "SageMaker", "Nobody.ListClusters", "sagemaker.ListClusters",
                                   "Logs_20140328", "SageMakerX.ListClusters"}) {
    EXPECT_ERROR(Send({.target = target, .body = "not json", .content_type = "text/plain"}), 400,
                 "UnknownOperationException",
                 "Missing or unknown X-Amz-Target '" + target +
                     "': expected SageMaker.<Operation>.");
  }
  EXPECT_ERROR(Send({.target = "SageMaker.NoSuchOperation", .body = "not json",
                     .content_type = "text/plain"}),
               400, "UnknownOperationException", "Unknown operation SageMaker.NoSuchOperation.");
  EXPECT_ERROR(Send({.target = "SageMaker.", .body = "{}"}), 400, "UnknownOperationException",
               "Unknown operation SageMaker..");
  EXPECT_ERROR(Send({.target = "Logs_20140328.NoSuchOperation", .body = "not json",
                     .content_type = "text/plain", .service = "logs"}),
               400, "UnknownOperationException",
               "Unknown operation Logs_20140328.NoSuchOperation.");
}

TEST_F(ApiHandlerTest, ContentTypeIsCheckedBeforeTheBody) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_ERROR(Send({.target = "SageMaker.ListClusters", .body = deep, .content_type = "text/plain"}),
               400, "UnknownOperationException",
               "Unsupported Content-Type 'text/plain': the SageMaker API takes "
               "application/x-amz-json-1.1.");
  EXPECT_ERROR(Send({.target = "SageMaker.ListClusters", .content_type = ""}), 400,
               "UnknownOperationException",
               "Unsupported Content-Type '': the SageMaker API takes application/x-amz-json-1.1.");
  EXPECT_ERROR(Send({.target = "Logs_20140328.DescribeLogGroups", .body = deep,
                     .content_type = "application/json", .service = "logs"}),
               400, "UnknownOperationException",
               "Unsupported Content-Type 'application/json': expected application/x-amz-json-1.1.");
  // JSON 1.0 and parameters are accepted.
  EXPECT_EQ(Send({.target = "SageMaker.ListClusters",
                  .content_type = "Application/X-Amz-Json-1.0; charset=utf-8"}).status,
            200);
}

TEST_F(ApiHandlerTest, DepthThenSyntaxThenModel) {
  for (const auto& [target, service] :
       {std::pair<std::string, std::string>{"SageMaker.ListClusters", "sagemaker"},
        {"Logs_20140328.DescribeLogGroups", "logs"}}) {
    const std::string deep = "{\"a\":" + std::string(64, '[') + "x";  // malformed and deep
    EXPECT_ERROR(Send({.target = target, .body = deep, .service = service}), 400,
                 "SerializationException", "The request body nests deeper than 64 levels.");
    for (const std::string body : {"{\"a\":", "[]", "\"text\"", "42"}) {
      EXPECT_ERROR(Send({.target = target, .body = body, .service = service}), 400,
                   "SerializationException",
                   "The request body is not a JSON object (malformed JSON).");
    }
  }
  // An empty body is an empty request.
  EXPECT_EQ(Send({.target = "SageMaker.ListClusters", .body = ""}).status, 200);
}

TEST_F(ApiHandlerTest, ModelViolationsCarryTheServicesErrorType) {
  EXPECT_ERROR(Send({.target = "SageMaker.DescribeCluster"}), 400, "ValidationException",
               "1 validation error detected: Value null at 'clusterName' failed to satisfy "
               "constraint: Member must not be null");
  EXPECT_ERROR(Send({.target = "Logs_20140328.GetLogEvents", .service = "logs"}), 400,
               "InvalidParameterException",
               "1 validation error detected: Value null at 'logStreamName' failed to satisfy "
               "constraint: Member must not be null");
  // A type error is a SerializationException, for every service.
  EXPECT_EQ(Send({.target = "SageMaker.DescribeCluster", .body = R"({"ClusterName":5})"}).type,
            "SerializationException");
  EXPECT_EQ(Send({.target = "Logs_20140328.DescribeLogGroups", .body = R"({"limit":"x"})",
                  .service = "logs"}).type,
            "SerializationException");
}

TEST_F(ApiHandlerTest, ModeledButUnimplementedOperationsAreRefusedAfterValidation) {
  EXPECT_EQ(Send({.target = "SageMaker.UpdateClusterSoftware"}).type, "ValidationException");
  EXPECT_ERROR(Send({.target = "SageMaker.UpdateClusterSoftware",
                     .body = R"({"ClusterName":"c"})"}),
               400, "UnknownOperationException",
               "Hyperfleet does not implement SageMaker.UpdateClusterSoftware yet.");
}

/// One more operation set of SageMaker's, added like every other service.
class SoftwareUpdates final : public OperationSet {
 public:
  bool implements(std::string_view op) const override { return op == "UpdateClusterSoftware"; }
  StatusOr<Json> call(std::string_view, const Json& in) override {
    seen = in;
    return Json{{"ClusterArn", "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc"},
                {"Bookkeeping", "not in the model"}};
  }
  Json seen;
};

TEST_F(ApiHandlerTest, AnotherOperationSetIsServedLikeTheOthers) {
  SoftwareUpdates updates;
  handler_.addService(updates);
  Answer a = Send({.target = "SageMaker.UpdateClusterSoftware",
                   .body = R"({"ClusterName":"c","Unmodeled":1})"});
  EXPECT_EQ(a.status, 200) << a.body.dump();
  // Input validated and pruned, output pruned, by the SageMaker model.
  EXPECT_EQ(updates.seen, Json({{"ClusterName", "c"}}));
  EXPECT_EQ(a.body, Json({{"ClusterArn", "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc"}}));
  EXPECT_EQ(Send({.target = "SageMaker.UpdateClusterSoftware"}).type, "ValidationException");
  // The sets added before it still answer their own operations.
  EXPECT_EQ(Send({.target = "SageMaker.ListClusters"}).status, 200);
  EXPECT_EQ(Send({.target = "SageMaker.ListComputeQuotas"}).status, 200);
}

}  // namespace
}  // namespace hf::api
