// The REST-JSON protocol on the embedded EKS model: routes (labels, %2F inside a label,
// greedy labels, most literal segments winning), input binding (query lists and integers,
// body members, bad values), output shaping, errors' status and headers as botocore's
// RestJSONParser reads them, and ApiHandler serving a REST service next to JSON 1.1 ones.
#include "hyperfleet/api/rest_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/auth/sigv4.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;

const model::ServiceModel& Eks() { return *model::ServiceModel::EmbeddedEks(); }

TEST(MatchRestRouteTest, MethodAndPathPickTheOperation) {
  struct Case {
    std::string method, path, op;
    std::map<std::string, std::string> labels;
  };
  const std::vector<Case> cases = {
      {"POST", "/clusters", "CreateCluster", {}},
      {"GET", "/clusters", "ListClusters", {}},
      {"GET", "/clusters/c1", "DescribeCluster", {{"name", "c1"}}},
      {"DELETE", "/clusters/c1", "DeleteCluster", {{"name", "c1"}}},
      {"GET", "/clusters/c1/access-entries", "ListAccessEntries", {{"name", "c1"}}},
      {"GET", "/clusters/c1/access-entries/arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fadmin",
       "DescribeAccessEntry", {{"name", "c1"}, {"principalArn", "arn:aws:iam::1:role/admin"}}},
      {"DELETE",
       "/clusters/c1/access-entries/p/access-policies/arn%3Aaws%3Aeks%3A%3Aaws%3Acluster-"
       "access-policy%2FAmazonEKSViewPolicy",
       "DisassociateAccessPolicy",
       {{"name", "c1"},
        {"principalArn", "p"},
        {"policyArn", "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"}}},
      {"GET", "/access-policies", "ListAccessPolicies", {}},
      {"GET", "/tags/arn%3Aaws%3Aeks%3Aus-west-2%3A1%3Acluster%2Fc1", "ListTagsForResource",
       {{"resourceArn", "arn:aws:eks:us-west-2:1:cluster/c1"}}},
  };
  for (const Case& c : cases) {
    auto route = MatchRestRoute(Eks(), c.method, c.path);
    ASSERT_TRUE(route.ok()) << c.method << " " << c.path << ": " << route.status();
    EXPECT_EQ(route->operation, c.op) << c.path;
    EXPECT_EQ(route->labels, c.labels) << c.path;
  }
}

TEST(MatchRestRouteTest, UnknownPathsAndMethodsAreNotFound) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"PUT", "/clusters"}, {"GET", "/nodegroups"}, {"GET", "/clusters/c1/extra/x/y/z/w"},
           {"GET", "/clusters//access-entries"}, {"GET", "/"}, {"POST", "/clusters/c1"}}) {
    auto route = MatchRestRoute(Eks(), method, path);
    ASSERT_FALSE(route.ok()) << method << " " << path << " -> " << route->operation;
    EXPECT_EQ(AwsErrorType(route.status()), "UnknownOperationException");
    EXPECT_EQ(route.status().message(),
              "No operation of this API is " + method + " " + path + ".");
  }
  auto bad = MatchRestRoute(Eks(), "GET", "/clusters/a%zz");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(AwsErrorType(bad.status()), "InvalidParameterException");
}

/// Binds a request of `method` `target` with `body` to its operation's input.
StatusOr<Json> Bind(const std::string& method, const std::string& target,
                    const std::string& body = "") {
  http::HttpRequest req;
  req.method = method;
  req.target = target;
  req.body = body;
  HF_ASSIGN_OR_RETURN(RestRoute route, MatchRestRoute(Eks(), method, req.path()));
  return BindRestInput(Eks(), route, req, "InvalidParameterException");
}

TEST(BindRestInputTest, LabelsQueryAndBodyBecomeTheInput) {
  EXPECT_EQ(Bind("GET", "/clusters?maxResults=5&nextToken=a%2Bb&include=all").value(),
            Json({{"maxResults", 5}, {"nextToken", "a+b"}, {"include", {"all"}}}));
  EXPECT_EQ(Bind("DELETE", "/tags/arn%3Ax?tagKeys=a&tagKeys=b%20c").value(),
            Json({{"resourceArn", "arn:x"}, {"tagKeys", {"a", "b c"}}}));
  // A label whose locationName differs from the member's name: ListAccessEntries' clusterName.
  EXPECT_EQ(Bind("GET", "/clusters/c1/access-entries").value(), Json({{"clusterName", "c1"}}));
  EXPECT_EQ(Bind("POST", "/clusters/c1/access-entries",
                 R"({"principalArn":"p","kubernetesGroups":["g"],"clusterName":"other"})")
                .value(),
            Json({{"clusterName", "c1"}, {"principalArn", "p"}, {"kubernetesGroups", {"g"}}}));
}

TEST(BindRestInputTest, BadValuesNameTheMember) {
  auto r = Bind("GET", "/clusters?maxResults=five");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(AwsErrorType(r.status()), "InvalidParameterException");
  EXPECT_EQ(r.status().message(), "Value 'five' at 'maxResults' is not a valid integer.");
  r = Bind("POST", "/clusters", "[1]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(AwsErrorType(r.status()), "SerializationException");
  r = Bind("POST", "/clusters", std::string(100, '[') + std::string(100, ']'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "The request body nests deeper than 64 levels.");
}

TEST(ShapeRestOutputTest, BodyHasTheOutputMembers) {
  RestReply r = ShapeRestOutput(Eks(), "DescribeCluster", {{"cluster", {{"name", "c1"}}}});
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.headers.empty());
  EXPECT_EQ(r.body, Json({{"cluster", {{"name", "c1"}}}}));
  EXPECT_EQ(ShapeRestOutput(Eks(), "UntagResource", Json::object()).body, Json::object());
}

TEST(RestErrorResponseTest, StatusFromTheModelTypeInTheHeader) {
  struct Case {
    Status status;
    int http;
    std::string type;
  };
  const std::vector<Case> cases = {
      {WithAwsErrorType(absl::NotFoundError("No cluster found for name: x."),
                        "ResourceNotFoundException"), 404, "ResourceNotFoundException"},
      {WithAwsErrorType(absl::AlreadyExistsError("in use"), "ResourceInUseException"), 409,
       "ResourceInUseException"},
      {WithAwsErrorType(absl::InvalidArgumentError("bad"), "InvalidParameterException"), 400,
       "InvalidParameterException"},
      {WithAwsErrorType(absl::NotFoundError("none"), "NotFoundException"), 404,
       "NotFoundException"},
      {WithAwsErrorType(absl::NotFoundError("no route"), "UnknownOperationException"), 404,
       "UnknownOperationException"},
      {absl::UnavailableError("busy"), 503, "ServiceUnavailable"},
  };
  for (const Case& c : cases) {
    http::HttpResponse r = RestErrorResponse(Eks(), c.status, "rid");
    EXPECT_EQ(r.status, c.http) << c.type;
    const Json body = Json::parse(r.body);
    EXPECT_EQ(body, Json({{"message", std::string(c.status.message())}}));
    std::string type_header;
    for (const auto& [k, v] : r.headers) {
      if (k == "x-amzn-ErrorType") type_header = v;
    }
    EXPECT_EQ(type_header, c.type);
  }
}

/// A REST-JSON service over the EKS model answering DescribeCluster with what it was asked
/// and who asked (so the test sees the binding and the caller).
class EchoEks : public JsonService {
 public:
  std::string_view targetPrefix() const override { return ""; }
  std::string_view signingName() const override { return "eks"; }
  const model::ServiceModel& model() const override { return Eks(); }
  std::string_view validationErrorType() const override { return "InvalidParameterException"; }
  bool restJson() const override { return true; }
  bool implements(std::string_view op) const override { return op == "DescribeCluster"; }
  StatusOr<Json> call(std::string_view, const Json&) override {
    return absl::InternalError("callAs expected");
  }
  StatusOr<Json> callAs(std::string_view, const Json& input, std::string_view key) override {
    return Json{{"cluster", {{"name", input["name"]}, {"roleArn", key}, {"secret", 1}}}};
  }
};

class RestHandlerTest : public ::testing::Test {
 protected:
  RestHandlerTest() { handler_.addService(eks_); }

  http::HttpResponse Send(const std::string& method, const std::string& target,
                          const std::string& service = "eks", bool with_target = false) {
    http::HttpRequest req;
    req.method = method;
    req.target = target;
    if (with_target) req.headers.emplace_back("X-Amz-Target", "SageMaker.ListClusters");
    auth::SignSigV4(req, {"AKIDREST", "rest-secret"}, "us-west-2", service, "localhost",
                    clock_.now());
    return handler_.handle(std::move(req));
  }

  class FixedClock : public Clock {
   public:
    SystemTime now() const override { return SystemTime(std::chrono::seconds(1'700'000'000)); }
  } clock_;
  SequentialIdSource ids_{1};
  EchoEks eks_;
  ApiHandler handler_{[](std::string_view key) -> std::optional<std::string> {
                        if (key == "AKIDREST") return std::string("rest-secret");
                        return std::nullopt;
                      },
                      clock_, ids_, ApiConfig{}};
};

TEST_F(RestHandlerTest, RoutesBindsCallsAndPrunes) {
  http::HttpResponse r = Send("GET", "/clusters/a%2Fb");
  EXPECT_EQ(r.status, 200) << r.body;
  // "a/b" is bound, then the model's name pattern is not checked for DescribeCluster (String).
  EXPECT_EQ(Json::parse(r.body), Json({{"cluster", {{"name", "a/b"}, {"roleArn", "AKIDREST"}}}}));
}

TEST_F(RestHandlerTest, ErrorsAreRestJson) {
  http::HttpResponse r = Send("GET", "/nodegroups");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Json::parse(r.body)["message"], "No operation of this API is GET /nodegroups.");
  r = Send("GET", "/clusters");  // modeled, not implemented
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["message"], "Hyperfleet does not implement ListClusters yet.");
  r = Send("GET", "/clusters?maxResults=0");  // the model's min is 1
  EXPECT_EQ(r.status, 400);
  bool typed = false;
  for (const auto& [k, v] : r.headers) {
    typed |= k == "x-amzn-ErrorType" && v == "InvalidParameterException";
  }
  EXPECT_TRUE(typed) << r.body;
}

TEST_F(RestHandlerTest, OtherScopesKeepTheJson11Path) {
  // Signed for sagemaker without a target: the JSON 1.1 front door's method check answers.
  http::HttpResponse r = Send("GET", "/clusters", "sagemaker");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["__type"], "UnknownOperationException");
  // An eks-scoped request with a target is a JSON 1.1 request too.
  r = Send("POST", "/", "eks", /*with_target=*/true);
  EXPECT_EQ(Json::parse(r.body)["__type"], "InvalidSignatureException");
}

}  // namespace
}  // namespace hf::api
