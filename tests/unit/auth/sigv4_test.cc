#include "hyperfleet/auth/sigv4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace hf::auth {
namespace {

using http::HttpRequest;
using ::testing::HasSubstr;

// A request signed by a real client, with the time and scope it was signed for.
struct SignedFixture {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string amz_date;
  std::string region;
  std::string service;
};

#include "sigv4_fixtures.inc"

constexpr char kKeyId[] = "AKIDEXAMPLE";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

// Captured on the wire from aws-cli 2.9.19.
const SignedFixture kAwsCli2CreateCluster = {
    "POST", "/",
    {
        {"Host", "127.0.0.1:18080"},
        {"Accept-Encoding", "identity"},
        {"X-Amz-Target", "SageMaker.CreateCluster"},
        {"Content-Type", "application/x-amz-json-1.1"},
        {"User-Agent", "aws-cli/2.9.19 Python/3.11.2 Linux/6.18.44-fc-v857 "
                       "source/x86_64.debian.12 prompt/off command/sagemaker.create-cluster"},
        {"X-Amz-Date", "20261130T010104Z"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-west-2/sagemaker/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=209bbc44ee70f6f64eddf0cb2b233569cc2ff6e94f2a37b88413579b0c5b2a5e"},
        {"Content-Length", "445"},
    },
    R"({"ClusterName": "demo", "InstanceGroups": [{"InstanceGroupName": "controller", )"
    R"("InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "LifeCycleConfig": )"
    R"({"SourceS3Uri": "s3://sagemaker-lc/scripts/", "OnCreate": "on_create.sh"}, )"
    R"("ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole", "ThreadsPerCore": 1}], )"
    R"("Tags": [{"Key": "env", "Value": "dev"}], "Orchestrator": {"Slurm": )"
    R"({"SlurmConfigStrategy": "Managed"}}, "NodeRecovery": "Automatic"})",
    "20261130T010104Z", "us-west-2", "sagemaker",
};

// Captured on the wire from @aws-sdk/client-sagemaker 3.1142.0.
const SignedFixture kJsSdk3CreateCluster = {
    "POST", "/",
    {
        {"content-type", "application/x-amz-json-1.1"},
        {"x-amz-target", "SageMaker.CreateCluster"},
        {"content-length", "417"},
        {"x-amz-user-agent", "aws-sdk-js/3.1141.0"},
        {"user-agent", "aws-sdk-js/3.1141.0 ua/2.1 os/linux#6.18.44-fc-v857 lang/js "
                       "md/nodejs#20.20.2 api/sagemaker#3.1141.0 m/N,E,e"},
        {"host", "127.0.0.1:18080"},
        {"amz-sdk-invocation-id", "3c68dd49-fde4-4362-b68f-777ce7844bbb"},
        {"amz-sdk-request", "attempt=1; max=1"},
        {"x-amz-date", "20261130T010239Z"},
        {"x-amz-content-sha256",
         "6f57d7323728be2abbbb2e565668be021e1ecceaf471958cd3bc2a8c2c1c21d8"},
        {"authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-west-2/sagemaker/aws4_request, "
         "SignedHeaders=amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;"
         "x-amz-content-sha256;x-amz-date;x-amz-target;x-amz-user-agent, "
         "Signature=50771879a71422c5c62cce7b04ccb6a2933bebd50cdcf4e176bbda8fd6773b4e"},
        {"Connection", "keep-alive"},
    },
    R"({"ClusterName":"demo","InstanceGroups":[{"InstanceCount":1,"InstanceGroupName":)"
    R"("controller","ExecutionRole":"arn:aws:iam::123456789012:role/HyperPodRole",)"
    R"("InstanceType":"ml.m5.xlarge","LifeCycleConfig":{"SourceS3Uri":)"
    R"("s3://sagemaker-lc/scripts/","OnCreate":"on_create.sh"},"ThreadsPerCore":1}],)"
    R"("Tags":[{"Key":"env","Value":"dev"}],"Orchestrator":{"Slurm":)"
    R"({"SlurmConfigStrategy":"Managed"}},"NodeRecovery":"Automatic"})",
    "20261130T010239Z", "us-west-2", "sagemaker",
};

SystemTime At(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  using namespace std::chrono;
  return SystemTime(sys_days(year_month_day{year(y), month(mo), day(d)})) + hours(h) +
         minutes(mi) + seconds(s);
}

// Parses "20261130T010104Z" (test input is trusted).
SystemTime ParseAmz(const std::string& v) {
  return At(std::stoi(v.substr(0, 4)), std::stoul(v.substr(4, 2)), std::stoul(v.substr(6, 2)),
            std::stoi(v.substr(9, 2)), std::stoi(v.substr(11, 2)), std::stoi(v.substr(13, 2)));
}

HttpRequest ToRequest(const SignedFixture& f) {
  HttpRequest r;
  r.method = f.method;
  r.target = f.target;
  r.headers = f.headers;
  r.body = f.body;
  return r;
}

SecretLookup Secrets() {
  return [](std::string_view id) -> std::optional<std::string> {
    if (id == kKeyId) return std::string(kSecret);
    return std::nullopt;
  };
}

SigV4Policy Policy(std::string region = "us-west-2") {
  SigV4Policy p;
  p.region = std::move(region);
  p.services = {"sagemaker", "logs"};
  return p;
}

StatusOr<VerifiedIdentity> Verify(const HttpRequest& r, const SigV4Policy& policy,
                                  SystemTime now) {
  return VerifySigV4(r, Secrets(), policy, now);
}

// Verifies `f` at its own signing time (plus a little network delay).
StatusOr<VerifiedIdentity> VerifyFixture(const HttpRequest& r, const SignedFixture& f) {
  return Verify(r, Policy(f.region), ParseAmz(f.amz_date) + std::chrono::seconds(2));
}

std::string* HeaderRef(HttpRequest& r, std::string_view name) {
  for (auto& [k, v] : r.headers) {
    if (http::HeaderNameEquals(k, name)) return &v;
  }
  return nullptr;
}

void ExpectAwsError(const Status& s, absl::StatusCode code, const std::string& type,
                    const std::string& message) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_EQ(AwsErrorTypeOf(s).value_or("<none>"), type) << s;
  EXPECT_EQ(std::string(s.message()), message);
}

constexpr char kMismatch[] =
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details.";

void ExpectMismatch(const Status& s) {
  ExpectAwsError(s, absl::StatusCode::kUnauthenticated, "InvalidSignatureException", kMismatch);
}

// ---- Real clients ------------------------------------------------------------------------

TEST(SigV4Verify, AcceptsRequestsSignedByRealClients) {
  const std::vector<std::pair<const char*, const SignedFixture*>> fixtures = {
      {"botocore create-cluster", &kBotocoreCreateCluster},
      {"JS SDK header set", &kJsSdkDescribeCluster},
      {"session token", &kBotocoreSessionToken},
      {"query string", &kBotocoreQuery},
      {"aws-cli 2.9.19 capture", &kAwsCli2CreateCluster},
      {"JS SDK 3.1142.0 capture", &kJsSdk3CreateCluster},
  };
  for (const auto& [name, f] : fixtures) {
    auto id = VerifyFixture(ToRequest(*f), *f);
    ASSERT_TRUE(id.ok()) << name << ": " << id.status();
    EXPECT_EQ(id->access_key_id, kKeyId) << name;
    EXPECT_EQ(id->region, "us-west-2") << name;
    EXPECT_EQ(id->service, "sagemaker") << name;
  }
}

TEST(SigV4Verify, AcceptsAwsTestSuiteGetVanilla) {
  SigV4Policy policy = Policy("us-east-1");
  policy.services = {"service"};
  auto id = Verify(ToRequest(kAwsGetVanilla), policy, At(2015, 8, 30, 12, 40, 0));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->service, "service");
}

TEST(SigV4Verify, HeaderNameCaseDoesNotMatter) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  for (auto& [k, v] : r.headers) std::transform(k.begin(), k.end(), k.begin(), ::toupper);
  EXPECT_TRUE(VerifyFixture(r, kBotocoreCreateCluster).ok());
}

TEST(SigV4Verify, HeaderValueWhitespaceIsCanonicalized) {
  HttpRequest r = ToRequest(kJsSdkDescribeCluster);
  *HeaderRef(r, "amz-sdk-request") = "  attempt=1;\t  max=1 ";
  EXPECT_TRUE(VerifyFixture(r, kJsSdkDescribeCluster).ok());
}

TEST(SigV4Verify, AuthorizationSpacingAndOrderVariants) {
  const SignedFixture& f = kBotocoreCreateCluster;
  const std::string original(*ToRequest(f).header("Authorization"));
  // Pull the three parameters out of botocore's header.
  auto param = [&](const std::string& name) {
    size_t b = original.find(name + "=") + name.size() + 1;
    size_t e = original.find(',', b);
    return original.substr(b, e == std::string::npos ? std::string::npos : e - b);
  };
  std::string c = param("Credential"), h = param("SignedHeaders"), s = param("Signature");
  const std::vector<std::string> variants = {
      "AWS4-HMAC-SHA256 Credential=" + c + ",SignedHeaders=" + h + ",Signature=" + s,
      "AWS4-HMAC-SHA256 Signature=" + s + ", Credential=" + c + ", SignedHeaders=" + h,
      "  AWS4-HMAC-SHA256\tCredential=" + c + " ,  SignedHeaders=" + h + " ,Signature=" + s + " ",
      "AWS4-HMAC-SHA256 Credential = " + c + ", SignedHeaders= " + h + ", Signature =" + s,
      "AWS4-HMAC-SHA256 Credential=" + c + " SignedHeaders=" + h + " Signature=" + s,
      "AWS4-HMAC-SHA256 Credential=" + c + ", SignedHeaders=" + h + ", Signature=" + s + ",",
      "AWS4-HMAC-SHA256 Credential=" + c + ", Foo=bar, SignedHeaders=" + h + ", Signature=" + s,
  };
  for (const auto& v : variants) {
    HttpRequest r = ToRequest(f);
    *HeaderRef(r, "Authorization") = v;
    auto id = VerifyFixture(r, f);
    EXPECT_TRUE(id.ok()) << v << ": " << id.status();
  }
  // Uppercase hex in the signature is the same signature.
  HttpRequest r = ToRequest(f);
  std::string upper = s;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  *HeaderRef(r, "Authorization") =
      "AWS4-HMAC-SHA256 Credential=" + c + ", SignedHeaders=" + h + ", Signature=" + upper;
  EXPECT_TRUE(VerifyFixture(r, f).ok());
}

TEST(SigV4Verify, UnsignedHeadersMayChange) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "User-Agent") = "something else";
  r.headers.emplace_back("X-Forwarded-For", "10.0.0.1");
  EXPECT_TRUE(VerifyFixture(r, kBotocoreCreateCluster).ok());
}

TEST(SigV4Verify, UnsignedSecurityTokenIsIgnored) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  r.headers.emplace_back("X-Amz-Security-Token", "anything");
  EXPECT_TRUE(VerifyFixture(r, kBotocoreCreateCluster).ok());
}

// ---- Errors --------------------------------------------------------------------------------

TEST(SigV4Verify, NoAuthorizationHeader) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  r.headers.erase(std::remove_if(r.headers.begin(), r.headers.end(),
                                 [](const auto& h) { return h.first == "Authorization"; }),
                  r.headers.end());
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kUnauthenticated, "MissingAuthenticationTokenException",
                 "Request is missing Authentication Token");
}

TEST(SigV4Verify, GarbageHeader) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "Authorization") = "Bearer abc.def";
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "Authorization header requires 'Credential' parameter. Authorization header "
                 "requires 'Signature' parameter. Authorization header requires 'SignedHeaders' "
                 "parameter. Authorization=Bearer abc.def");
}

TEST(SigV4Verify, GarbageHeaderWithoutDate) {
  HttpRequest r;
  r.method = "POST";
  r.target = "/";
  r.headers = {{"Host", "h"}, {"Authorization", "x"}};
  ExpectAwsError(Verify(r, Policy(), At(2026, 11, 30, 1, 1, 4)).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "Authorization header requires 'Credential' parameter. Authorization header "
                 "requires 'Signature' parameter. Authorization header requires 'SignedHeaders' "
                 "parameter. Authorization header requires existence of either a 'X-Amz-Date' "
                 "or a 'Date' header. Authorization=x");
}

TEST(SigV4Verify, MissingSignatureParameter) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  std::string* auth = HeaderRef(r, "Authorization");
  *auth = auth->substr(0, auth->find(", Signature="));
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "Authorization header requires 'Signature' parameter. Authorization=" + *auth);
}

TEST(SigV4Verify, ParameterWithoutEqualSign) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  std::string* auth = HeaderRef(r, "Authorization");
  *auth += ", junk";
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "'junk' not a valid key=value pair (missing equal-sign) in Authorization "
                 "header: '" + *auth + "'.");
}

TEST(SigV4Verify, CredentialWithWrongNumberOfElements) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "Authorization") =
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-west-2/aws4_request, "
      "SignedHeaders=host, Signature=00";
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "Credential must have exactly 5 slash-delimited elements, e.g. "
                 "keyid/date/region/service/term, got "
                 "'AKIDEXAMPLE/20261130/us-west-2/aws4_request'");
}

TEST(SigV4Verify, HostMustBeSigned) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "Authorization") =
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-west-2/sagemaker/aws4_request, "
      "SignedHeaders=content-type;x-amz-date, Signature=00";
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
}

TEST(SigV4Verify, MalformedDate) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "X-Amz-Date") = "2026-11-30T01:01:04Z";
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kInvalidArgument, "IncompleteSignatureException",
                 "Date must be in ISO-8601 'basic format'. Got '2026-11-30T01:01:04Z'. See "
                 "http://en.wikipedia.org/wiki/ISO_8601");
  *HeaderRef(r, "X-Amz-Date") = "20261131T010104Z";  // no November 31st
  EXPECT_EQ(AwsErrorTypeOf(VerifyFixture(r, kBotocoreCreateCluster).status()),
            "IncompleteSignatureException");
}

TEST(SigV4Verify, UnknownAccessKey) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  ExpectAwsError(VerifySigV4(r, none, Policy(), At(2026, 11, 30, 1, 1, 4)).status(),
                 absl::StatusCode::kUnauthenticated, "UnrecognizedClientException",
                 "The security token included in the request is invalid.");
  // An empty lookup function knows no key either.
  EXPECT_EQ(AwsErrorTypeOf(VerifySigV4(r, SecretLookup(), Policy(), At(2026, 11, 30, 1, 1, 4))
                               .status()),
            "UnrecognizedClientException");
}

TEST(SigV4Verify, TamperedBody) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  r.body[r.body.find("demo")] = 'D';
  ExpectMismatch(VerifyFixture(r, kBotocoreCreateCluster).status());
}

TEST(SigV4Verify, TamperedBodyWithSignedContentHash) {
  // The JS SDK signs x-amz-content-sha256; the body must still match it.
  HttpRequest r = ToRequest(kJsSdkDescribeCluster);
  r.body = R"({"ClusterName":"evil"})";
  ExpectMismatch(VerifyFixture(r, kJsSdkDescribeCluster).status());
}

TEST(SigV4Verify, UnsignedPayloadIsRefused) {
  HttpRequest r = ToRequest(kJsSdkDescribeCluster);
  *HeaderRef(r, "x-amz-content-sha256") = "UNSIGNED-PAYLOAD";
  ExpectMismatch(VerifyFixture(r, kJsSdkDescribeCluster).status());
}

TEST(SigV4Verify, TamperedSignedHeader) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  *HeaderRef(r, "X-Amz-Target") = "SageMaker.DeleteCluster";
  ExpectMismatch(VerifyFixture(r, kBotocoreCreateCluster).status());
  r = ToRequest(kBotocoreSessionToken);
  *HeaderRef(r, "X-Amz-Security-Token") = "other-token";
  ExpectMismatch(VerifyFixture(r, kBotocoreSessionToken).status());
}

TEST(SigV4Verify, TamperedMethodPathOrQuery) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  r.method = "PUT";
  ExpectMismatch(VerifyFixture(r, kBotocoreCreateCluster).status());
  r = ToRequest(kBotocoreSessionToken);
  r.target = "/sm/";
  ExpectMismatch(VerifyFixture(r, kBotocoreSessionToken).status());
  r = ToRequest(kBotocoreQuery);
  r.target += "&extra=1";
  ExpectMismatch(VerifyFixture(r, kBotocoreQuery).status());
}

TEST(SigV4Verify, WrongSecret) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  auto other = [](std::string_view) -> std::optional<std::string> {
    return std::string("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEZ");
  };
  ExpectMismatch(VerifySigV4(r, other, Policy(), At(2026, 11, 30, 1, 1, 4)).status());
}

TEST(SigV4Verify, WrongRegion) {
  ExpectAwsError(
      Verify(ToRequest(kBotocoreCreateCluster), Policy("eu-west-1"), At(2026, 11, 30, 1, 1, 4))
          .status(),
      absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
      "Credential should be scoped to a valid region.");
}

TEST(SigV4Verify, WrongService) {
  SigV4Policy policy = Policy();
  policy.services = {"sagemaker"};
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  std::string* auth = HeaderRef(r, "Authorization");
  auth->replace(auth->find("/sagemaker/"), 11, "/ec2/");
  ExpectAwsError(Verify(r, policy, At(2026, 11, 30, 1, 1, 4)).status(),
                 absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
                 "Credential should be scoped to correct service: 'sagemaker'. ");
}

TEST(SigV4Verify, WrongTerminatorAndScopeDate) {
  HttpRequest r = ToRequest(kBotocoreCreateCluster);
  std::string* auth = HeaderRef(r, "Authorization");
  auth->replace(auth->find("aws4_request"), 12, "aws5_request");
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
                 "Credential should be scoped with a valid terminator: 'aws4_request', not "
                 "'aws5_request'. ");
  r = ToRequest(kBotocoreCreateCluster);
  auth = HeaderRef(r, "Authorization");
  auth->replace(auth->find("/20261130/"), 10, "/20261129/");
  ExpectAwsError(VerifyFixture(r, kBotocoreCreateCluster).status(),
                 absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
                 "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
                 "from HTTP: '20261129' != '20261130', from '20261130T010104Z'.");
}

TEST(SigV4Verify, ClockSkew) {
  using std::chrono::minutes;
  const HttpRequest r = ToRequest(kBotocoreCreateCluster);
  const SystemTime signed_at = At(2026, 11, 30, 1, 1, 4);
  EXPECT_TRUE(Verify(r, Policy(), signed_at + minutes(14)).ok());
  EXPECT_TRUE(Verify(r, Policy(), signed_at - minutes(14)).ok());
  EXPECT_TRUE(Verify(r, Policy(), signed_at + minutes(15)).ok());  // the limit is inclusive
  ExpectAwsError(Verify(r, Policy(), signed_at + minutes(16)).status(),
                 absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
                 "Signature expired: 20261130T010104Z is now earlier than 20261130T010204Z "
                 "(20261130T011704Z - 15 min.)");
  ExpectAwsError(Verify(r, Policy(), signed_at - minutes(16)).status(),
                 absl::StatusCode::kUnauthenticated, "InvalidSignatureException",
                 "Signature not yet current: 20261130T010104Z is still later than "
                 "20261130T010004Z (20261130T004504Z + 15 min.)");
  // Years far from now must not overflow the clock arithmetic.
  HttpRequest far = r;
  *HeaderRef(far, "X-Amz-Date") = "99991231T235959Z";
  std::string* auth = HeaderRef(far, "Authorization");
  auth->replace(auth->find("/20261130/"), 10, "/99991231/");
  EXPECT_THAT(std::string(Verify(far, Policy(), signed_at).status().message()),
              HasSubstr("Signature not yet current: 99991231T235959Z is still later than"));
  *HeaderRef(far, "X-Amz-Date") = "00010101T000000Z";
  auth->replace(auth->find("/99991231/"), 10, "/00010101/");
  EXPECT_THAT(std::string(Verify(far, Policy(), signed_at).status().message()),
              HasSubstr("Signature expired: 00010101T000000Z is now earlier than"));
  SigV4Policy tight = Policy();
  tight.max_skew = minutes(5);
  EXPECT_THAT(std::string(Verify(r, tight, signed_at + minutes(6)).status().message()),
              HasSubstr("(20261130T010704Z - 5 min.)"));
}

// ---- Query strings and paths -------------------------------------------------------------

HttpRequest Signed(const std::string& target, SystemTime now) {
  HttpRequest r;
  r.method = "POST";
  r.target = target;
  r.headers = {{"Content-Type", "application/x-amz-json-1.1"},
               {"X-Amz-Target", "SageMaker.ListClusters"}};
  r.body = "{}";
  SignSigV4(r, AccessKey{kKeyId, kSecret}, "us-west-2", "sagemaker", "127.0.0.1:18080", now);
  return r;
}

TEST(SigV4Canonical, QueryIsSortedByNameThenValue) {
  const SystemTime now = At(2026, 11, 30, 1, 1, 4);
  HttpRequest r = Signed("/?b=2&a=1&a=0", now);
  for (const char* same : {"/?a=0&a=1&b=2", "/?a=1&b=2&a=0", "/?b=2&a=0&a=1&"}) {
    r.target = same;
    EXPECT_TRUE(Verify(r, Policy(), now).ok()) << same;
  }
  for (const char* different : {"/?a=0&b=2", "/?a=0&a=1&b=3", "/?a=0&a=1&b=2&c", "/"}) {
    r.target = different;
    ExpectMismatch(Verify(r, Policy(), now).status());
  }
}

TEST(SigV4Canonical, QueryEncodingIsNormalized) {
  const SystemTime now = At(2026, 11, 30, 1, 1, 4);
  HttpRequest r = Signed("/?k=%7e%2f&s=a%20b&u=%c3%a9", now);
  for (const char* same : {"/?k=~%2F&s=a+b&u=%C3%A9", "/?u=%C3%A9&s=a%20b&k=%7E%2F"}) {
    r.target = same;
    EXPECT_TRUE(Verify(r, Policy(), now).ok()) << same;
  }
  r.target = "/?k=~/&s=a%2Bb&u=%C3%A9";  // '+' literal is not a space
  ExpectMismatch(Verify(r, Policy(), now).status());
}

TEST(SigV4Canonical, PathIsNormalizedLikeTheSdks) {
  const SystemTime now = At(2026, 11, 30, 1, 1, 4);
  HttpRequest r = Signed("/sm/a", now);
  for (const char* same : {"/sm//a", "/sm/./a", "/sm/x/../a"}) {
    r.target = same;
    EXPECT_TRUE(Verify(r, Policy(), now).ok()) << same;
  }
  r.target = "/sm/a/";
  ExpectMismatch(Verify(r, Policy(), now).status());
}

// ---- Signing -----------------------------------------------------------------------------

TEST(SigV4Sign, RoundTrip) {
  const SystemTime now = At(2026, 11, 30, 1, 1, 4);
  HttpRequest r = Signed("/", now);
  EXPECT_EQ(*r.header("X-Amz-Date"), "20261130T010104Z");
  EXPECT_EQ(*r.header("Host"), "127.0.0.1:18080");
  EXPECT_THAT(std::string(*r.header("Authorization")),
              HasSubstr("SignedHeaders=content-type;host;x-amz-date;x-amz-target, "));
  auto id = Verify(r, Policy(), now);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->access_key_id, kKeyId);
}

TEST(SigV4Sign, MatchesBotocore) {
  // Same inputs as the botocore fixture: the Authorization header must be identical.
  HttpRequest r;
  r.method = "POST";
  r.target = "/";
  r.headers = {{"X-Amz-Target", "SageMaker.CreateCluster"},
               {"Content-Type", "application/x-amz-json-1.1"},
               {"User-Agent", "hyperfleet"}};
  r.body = kBotocoreCreateCluster.body;
  SignSigV4(r, AccessKey{kKeyId, kSecret}, "us-west-2", "sagemaker", "127.0.0.1:18080",
            At(2026, 11, 30, 1, 1, 4));
  const HttpRequest botocore = ToRequest(kBotocoreCreateCluster);
  EXPECT_EQ(*r.header("Authorization"), *botocore.header("Authorization"));
}

TEST(SigV4Sign, ResigningReplacesAuthAndSignsAmzHeaders) {
  const SystemTime t1 = At(2026, 11, 30, 1, 1, 4);
  HttpRequest r = Signed("/", t1);
  r.headers.emplace_back("X-Amz-Security-Token", "tok");
  // A second signing (a retry) must not add headers, and keeps the Host already present.
  SignSigV4(r, AccessKey{kKeyId, kSecret}, "us-west-2", "sagemaker", "other:1",
            t1 + std::chrono::hours(1));
  int auth_count = 0, date_count = 0;
  for (const auto& [k, v] : r.headers) {
    auth_count += http::HeaderNameEquals(k, "Authorization");
    date_count += http::HeaderNameEquals(k, "X-Amz-Date");
  }
  EXPECT_EQ(auth_count, 1);
  EXPECT_EQ(date_count, 1);
  EXPECT_EQ(*r.header("Host"), "127.0.0.1:18080");
  EXPECT_THAT(std::string(*r.header("Authorization")),
              HasSubstr("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;"
                        "x-amz-target, "));
  EXPECT_TRUE(Verify(r, Policy(), t1 + std::chrono::hours(1)).ok());
}

TEST(SigV4Sign, Sha256Hex) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(kJsSdk3CreateCluster.body),
            "6f57d7323728be2abbbb2e565668be021e1ecceaf471958cd3bc2a8c2c1c21d8");
}

TEST(SigV4Verify, ConcurrentVerificationsShareTheKeyCache) {
  const SystemTime now = At(2026, 11, 30, 1, 1, 4);
  std::vector<HttpRequest> requests;
  for (int day = 0; day < 4; ++day) {
    requests.push_back(Signed("/", now + std::chrono::hours(24 * day)));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        int day = (i + t) % 4;
        if (Verify(requests[day], Policy(), now + std::chrono::hours(24 * day)).ok()) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8 * 200);
}

}  // namespace
}  // namespace hf::auth
