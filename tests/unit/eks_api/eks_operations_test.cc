// The EKS API subset through ApiHandler (SigV4-signed REST-JSON requests) on a real SQLite
// store: CreateCluster's defaults and errors, Describe/List/Delete, tags on clusters and
// access entries, access entries only on API modes, access policies, pagination.
#include "hyperfleet/eks/eks_operations.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/uri.h"

namespace hf::eks {
namespace {

using Json = nlohmann::json;

constexpr char kKey[] = "AKIDEKSTEST";
constexpr char kCreator[] = "arn:aws:iam::123456789012:user/AKIDEKSTEST";
constexpr char kAdminPolicy[] =
    "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy";
constexpr char kViewPolicy[] = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy";

class StepClock : public Clock {
 public:
  SystemTime now() const override {
    return SystemTime(std::chrono::seconds(1'700'000'000 + ++ticks_));
  }
  mutable std::atomic<int> ticks_{0};
};

struct Answer {
  int status = 0;
  std::string type;  ///< x-amzn-ErrorType, "" on success
  Json body;
};

class EksOperationsTest : public ::testing::Test {
 protected:
  EksOperationsTest() { handler_.addService(ops_); }

  Answer Send(const std::string& method, const std::string& target, const Json& body = {}) {
    http::HttpRequest req;
    req.method = method;
    req.target = target;
    if (!body.is_null()) {
      req.body = body.dump();
      req.headers.emplace_back("Content-Type", "application/json");
    }
    auth::SignSigV4(req, {kKey, "eks-secret"}, "us-west-2", "eks", "localhost", clock_.now());
    http::HttpResponse res = handler_.handle(std::move(req));
    Answer a{res.status, "", Json::parse(res.body, nullptr, false)};
    for (const auto& [k, v] : res.headers) {
      if (k == "x-amzn-ErrorType") a.type = v;
    }
    return a;
  }

  Answer Create(const std::string& name, const Json& extra = Json::object()) {
    Json body = {{"name", name},
                 {"roleArn", "arn:aws:iam::123456789012:role/eks"},
                 {"resourcesVpcConfig", {{"subnetIds", {"subnet-a", "subnet-b"}}}}};
    body.update(extra);
    return Send("POST", "/clusters", body);
  }

  static std::string Enc(const std::string& s) { return UriEncode(s); }

  StepClock clock_;
  SequentialIdSource ids_{3};
  std::unique_ptr<store::Store> store_ = std::move(store::OpenSqliteStore(":memory:").value());
  std::vector<std::string> changed_;
  std::optional<std::string> in_use_by_;
  EksOperations ops_{*store_, clock_, ids_, EksConfig{},
                     [this](const std::string& n) { changed_.push_back(n); },
                     [this](const std::string&) { return in_use_by_; }};
  api::ApiHandler handler_{[](std::string_view key) -> std::optional<std::string> {
                             if (key == kKey) return std::string("eks-secret");
                             return std::nullopt;
                           },
                           clock_, ids_, api::ApiConfig{}};
};

TEST_F(EksOperationsTest, CreateClusterRecordsWhatWasAskedWithEksDefaults) {
  Answer a = Create("c1", {{"version", "1.29"}, {"tags", {{"team", "ml"}}}});
  ASSERT_EQ(a.status, 200) << a.body.dump();
  const Json& c = a.body["cluster"];
  EXPECT_EQ(c["name"], "c1");
  EXPECT_EQ(c["arn"], "arn:aws:eks:us-west-2:123456789012:cluster/c1");
  EXPECT_EQ(c["status"], "CREATING");
  EXPECT_EQ(c["version"], "1.29");
  EXPECT_EQ(c["roleArn"], "arn:aws:iam::123456789012:role/eks");
  EXPECT_EQ(c["resourcesVpcConfig"]["subnetIds"], Json({"subnet-a", "subnet-b"}));
  const std::string vpc = c["resourcesVpcConfig"]["vpcId"];
  const std::string sg = c["resourcesVpcConfig"]["clusterSecurityGroupId"];
  EXPECT_EQ(vpc.substr(4), sg.substr(3));  // one synthetic id for both
  EXPECT_EQ(c["kubernetesNetworkConfig"],
            Json({{"serviceIpv4Cidr", "10.100.0.0/16"}, {"ipFamily", "ipv4"}}));
  EXPECT_EQ(c["accessConfig"], Json({{"bootstrapClusterCreatorAdminPermissions", true},
                                     {"authenticationMode", "CONFIG_MAP"}}));
  EXPECT_EQ(c["tags"], Json({{"team", "ml"}}));
  EXPECT_FALSE(c.contains("endpoint"));          // not before ACTIVE
  EXPECT_FALSE(c.contains("platformVersion"));   // no Kubernetes serves it yet
  EXPECT_EQ(changed_, std::vector<std::string>{"c1"});
  // Omitted version: the newest supported.
  EXPECT_EQ(Create("c2").body["cluster"]["version"], "1.34");
  // Describe gives the same cluster.
  EXPECT_EQ(Send("GET", "/clusters/c1").body["cluster"], c);
}

TEST_F(EksOperationsTest, CreateClusterErrors) {
  ASSERT_EQ(Create("c1").status, 200);
  Answer a = Create("c1");
  EXPECT_EQ(a.status, 409);
  EXPECT_EQ(a.type, "ResourceInUseException");
  EXPECT_EQ(a.body["message"], "Cluster already exists with name: c1");
  a = Create("c3", {{"version", "1.19"}});
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.type, "InvalidParameterException");
  EXPECT_NE(a.body["message"].get<std::string>().find("'version'"), std::string::npos);
  a = Create("bad name!");  // the model's ClusterName pattern
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.type, "InvalidParameterException");
  a = Send("POST", "/clusters", Json{{"name", "c4"}});  // required members
  EXPECT_EQ(a.type, "InvalidParameterException");
  a = Create("c5", {{"accessConfig", {{"authenticationMode", "CONFIG_MAP"},
                                      {"bootstrapClusterCreatorAdminPermissions", false}}}});
  EXPECT_EQ(a.type, "InvalidParameterException");
  EXPECT_EQ(a.body["message"],
            "bootstrapClusterCreatorAdminPermissions must be true if cluster authentication mode "
            "is set to CONFIG_MAP");
  EXPECT_EQ(Create("c6", {{"accessConfig", {{"authenticationMode", "API"},
                                            {"bootstrapClusterCreatorAdminPermissions", false}}}})
                .status,
            200);
  EXPECT_EQ(store_->eksClusters()->size(), 2u);  // refused requests changed nothing
}

TEST_F(EksOperationsTest, CreateClusterChecksTheServiceRange) {
  // EKS's rules (the model's documentation): /12 to /24 inside a private block.
  for (const char* bad : {"garbage", "0.0.0.0/0", "10.100.0.0", "10.100.0.0/30", "10.0.0.0/8",
                          "8.8.0.0/16", "172.32.0.0/16", "10.100.0.0/16x", "10.300.0.0/16",
                          // Host bits set, or written loosely: the text goes to a flag as is.
                          "10.100.0.1/16", "10.100.0.0/12", "10.100.0.0/016", "10.100.0.0/+16",
                          "10.100.0.0/ 16", "10.100.0.0/16\n"}) {
    Answer a = Create("s1", {{"kubernetesNetworkConfig", {{"serviceIpv4Cidr", bad}}}});
    EXPECT_EQ(a.status, 400) << bad;
    EXPECT_EQ(a.type, "InvalidParameterException") << bad;
    EXPECT_NE(a.body["message"].get<std::string>().find(
                  "'kubernetesNetworkConfig.serviceIpv4Cidr'"),
              std::string::npos)
        << a.body.dump();
  }
  // A NUL inside: the address must not end there.
  Answer nul = Create("s1", {{"kubernetesNetworkConfig",
                              {{"serviceIpv4Cidr", std::string("10.100.0.0\0x/16", 16)}}}});
  EXPECT_EQ(nul.type, "InvalidParameterException") << nul.body.dump();
  EXPECT_TRUE(store_->eksClusters()->empty());  // refused requests changed nothing
  int n = 0;
  for (const char* good : {"10.100.0.0/16", "172.20.0.0/16", "192.168.0.0/24", "10.0.0.0/12"}) {
    Answer a = Create("g" + std::to_string(++n),
                      {{"kubernetesNetworkConfig", {{"serviceIpv4Cidr", good}}}});
    EXPECT_EQ(a.status, 200) << good << a.body.dump();
    EXPECT_EQ(a.body["cluster"]["kubernetesNetworkConfig"]["serviceIpv4Cidr"], good);
  }
}

TEST_F(EksOperationsTest, DescribeListDelete) {
  Answer a = Send("GET", "/clusters/nope");
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.type, "ResourceNotFoundException");
  EXPECT_EQ(a.body["message"], "No cluster found for name: nope.");
  for (const char* n : {"b", "a", "c"}) ASSERT_EQ(Create(n).status, 200);
  a = Send("GET", "/clusters?maxResults=2");
  EXPECT_EQ(a.body["clusters"], Json({"a", "b"}));
  ASSERT_TRUE(a.body.contains("nextToken"));
  a = Send("GET", "/clusters?maxResults=2&nextToken=" + Enc(a.body["nextToken"]));
  EXPECT_EQ(a.body, Json({{"clusters", {"c"}}}));
  EXPECT_EQ(Send("GET", "/clusters?nextToken=zz").type, "InvalidParameterException");

  in_use_by_ = "hp-1";
  a = Send("DELETE", "/clusters/a");
  EXPECT_EQ(a.status, 409);
  EXPECT_EQ(a.type, "ResourceInUseException");
  in_use_by_.reset();
  a = Send("DELETE", "/clusters/a");
  EXPECT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["cluster"]["status"], "DELETING");
  EXPECT_EQ(Send("GET", "/clusters/a").body["cluster"]["status"], "DELETING");
  EXPECT_EQ(Send("DELETE", "/clusters/zz").status, 404);
}

TEST_F(EksOperationsTest, CreateClusterStopsAtTheClusterLimit) {
  // EksConfig::max_clusters (default 10): each EKS cluster is a control plane on this host.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Create("l" + std::to_string(i)).status, 200) << i;
  Answer a = Create("l10");
  EXPECT_EQ(a.status, 400) << a.body.dump();
  EXPECT_EQ(a.type, "ResourceLimitExceededException");
  EXPECT_NE(a.body["message"].get<std::string>().find("--max-eks-clusters"), std::string::npos);
  EXPECT_EQ(store_->eksClusters()->size(), 10u);  // the refused request changed nothing
}

TEST_F(EksOperationsTest, TagsOnClustersAndAccessEntries) {
  ASSERT_EQ(Create("c1", {{"accessConfig", {{"authenticationMode", "API"}}}}).status, 200);
  const std::string arn = "arn:aws:eks:us-west-2:123456789012:cluster/c1";
  EXPECT_EQ(Send("POST", "/tags/" + Enc(arn), {{"tags", {{"a", "1"}, {"b", "2"}}}}).status, 200);
  EXPECT_EQ(Send("DELETE", "/tags/" + Enc(arn) + "?tagKeys=a").status, 200);
  EXPECT_EQ(Send("GET", "/tags/" + Enc(arn)).body, Json({{"tags", {{"b", "2"}}}}));

  Answer e = Send("POST", "/clusters/c1/access-entries",
                  {{"principalArn", "arn:aws:iam::123456789012:role/dev"}});
  ASSERT_EQ(e.status, 200) << e.body.dump();
  const std::string entry_arn = e.body["accessEntry"]["accessEntryArn"];
  EXPECT_EQ(Send("POST", "/tags/" + Enc(entry_arn), {{"tags", {{"x", "y"}}}}).status, 200);
  EXPECT_EQ(Send("GET", "/tags/" + Enc(entry_arn)).body, Json({{"tags", {{"x", "y"}}}}));

  Answer missing = Send("GET", "/tags/" + Enc("arn:aws:eks:us-west-2:1:cluster/none"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.type, "NotFoundException");
}

TEST_F(EksOperationsTest, TagsAtMostFiftyPerResource) {
  ASSERT_EQ(Create("c1", {{"tags", {{"t0", "v"}}}}).status, 200);
  const std::string tags = "/tags/" + Enc("arn:aws:eks:us-west-2:123456789012:cluster/c1");
  Json more = Json::object();
  for (int i = 1; i < 50; ++i) more["t" + std::to_string(i)] = "v";
  ASSERT_EQ(Send("POST", tags, {{"tags", more}}).status, 200);  // 50: the limit
  Answer a = Send("POST", tags, {{"tags", {{"t50", "v"}}}});
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.type, "BadRequestException");
  EXPECT_NE(a.body["message"].get<std::string>().find("'tags'"), std::string::npos);
  EXPECT_EQ(Send("GET", tags).body["tags"].size(), 50u);  // the refused request changed nothing
  // Input the model refuses is BadRequestException here too: the model lists no
  // InvalidParameterException for TagResource or UntagResource (CreateCluster keeps it).
  for (const auto& [method, target, body] :
       {std::tuple<std::string, std::string, Json>{"POST", tags, {{"tags", Json::object()}}},
        {"POST", tags, {{"tags", {{std::string(129, 'k'), "v"}}}}},
        {"DELETE", tags + "?tagKeys=", Json()}}) {
    Answer bad = Send(method, target, body);
    EXPECT_EQ(bad.status, 400) << target << bad.body.dump();
    EXPECT_EQ(bad.type, "BadRequestException") << target << bad.body.dump();
  }
  EXPECT_EQ(Send("GET", tags).body["tags"].size(), 50u);
  EXPECT_EQ(Send("POST", tags, {{"tags", {{"t0", "changed"}}}}).status, 200);  // a change: 50
}

TEST_F(EksOperationsTest, ConcurrentTagResourceAllApply) {
  // Each TagResource reads the row and commits at its revision: concurrent ones on one
  // cluster conflict, and every one must still apply (as in EKS), not answer "retry".
  ASSERT_EQ(Create("c1").status, 200);
  const std::string tags = "/tags/" + Enc("arn:aws:eks:us-west-2:123456789012:cluster/c1");
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (Send("POST", tags, {{"tags", {{key, "v"}}}}).status != 200) ++refused;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(Send("GET", tags).body["tags"].size(), 48u);
}

TEST_F(EksOperationsTest, AccessEntriesNeedAnApiMode) {
  ASSERT_EQ(Create("cm").status, 200);  // CONFIG_MAP by default
  Answer a = Send("GET", "/clusters/cm/access-entries");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.type, "InvalidRequestException");
  EXPECT_EQ(a.body["message"],
            "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] "
            "to perform this operation.");
  a = Send("GET", "/clusters/none/access-entries");
  EXPECT_EQ(a.status, 404);
}

TEST_F(EksOperationsTest, AccessEntriesAndPolicies) {
  ASSERT_EQ(Create("c1", {{"accessConfig", {{"authenticationMode", "API_AND_CONFIG_MAP"}}}})
                .status,
            200);
  // The creator's admin entry comes with the cluster.
  Answer a = Send("GET", "/clusters/c1/access-entries");
  EXPECT_EQ(a.body, Json({{"accessEntries", {kCreator}}}));
  a = Send("GET", "/clusters/c1/access-entries/" + Enc(kCreator) + "/access-policies");
  ASSERT_EQ(a.body["associatedAccessPolicies"].size(), 1u) << a.body.dump();
  EXPECT_EQ(a.body["associatedAccessPolicies"][0]["policyArn"], kAdminPolicy);
  EXPECT_EQ(a.body["associatedAccessPolicies"][0]["accessScope"], Json({{"type", "cluster"}}));

  const std::string dev = "arn:aws:iam::123456789012:role/team/dev";
  a = Send("POST", "/clusters/c1/access-entries",
           {{"principalArn", dev}, {"kubernetesGroups", {"devs"}}, {"username", "dev"}});
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["accessEntry"]["kubernetesGroups"], Json({"devs"}));
  EXPECT_EQ(a.body["accessEntry"]["type"], "STANDARD");
  EXPECT_EQ(Send("POST", "/clusters/c1/access-entries", {{"principalArn", dev}}).status, 409);
  EXPECT_EQ(Send("POST", "/clusters/c1/access-entries",
                 {{"principalArn", "arn:aws:iam::1:role/x"}, {"kubernetesGroups", {"system:x"}}})
                .type,
            "InvalidParameterException");
  for (const char* reserved : {"system:kube-controller-manager", "eks:x", "aws:x", "amazon:x",
                               "iam:x"}) {
    a = Send("POST", "/clusters/c1/access-entries",
             {{"principalArn", "arn:aws:iam::1:role/x"}, {"username", reserved}});
    EXPECT_EQ(a.type, "InvalidParameterException") << reserved;
    EXPECT_NE(a.body["message"].get<std::string>().find("username"), std::string::npos);
  }
  EXPECT_EQ(Send("GET", "/clusters/c1/access-entries").body["accessEntries"].size(), 2u);

  const std::string policies = "/clusters/c1/access-entries/" + Enc(dev) + "/access-policies";
  a = Send("POST", policies,
           {{"policyArn", kViewPolicy}, {"accessScope", {{"type", "namespace"}}}});
  EXPECT_EQ(a.type, "InvalidParameterException");  // namespaces missing
  a = Send("POST", policies,
           {{"policyArn", "arn:aws:eks::aws:cluster-access-policy/Nope"},
            {"accessScope", {{"type", "cluster"}}}});
  EXPECT_EQ(a.type, "InvalidParameterException");
  a = Send("POST", policies,
           {{"policyArn", kViewPolicy},
            {"accessScope", {{"type", "namespace"}, {"namespaces", {"ml"}}}}});
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["associatedAccessPolicy"]["accessScope"],
            Json({{"type", "namespace"}, {"namespaces", {"ml"}}}));
  a = Send("GET", "/clusters/c1/access-entries?associatedPolicyArn=" + Enc(kViewPolicy));
  EXPECT_EQ(a.body, Json({{"accessEntries", {dev}}}));
  EXPECT_EQ(Send("DELETE", policies + "/" + Enc(kViewPolicy)).status, 200);
  EXPECT_EQ(Send("DELETE", policies + "/" + Enc(kViewPolicy)).status, 404);

  EXPECT_EQ(Send("GET", "/clusters/c1/access-entries/" + Enc(dev)).body["accessEntry"]["username"],
            "dev");
  EXPECT_EQ(Send("DELETE", "/clusters/c1/access-entries/" + Enc(dev)).status, 200);
  a = Send("GET", "/clusters/c1/access-entries/" + Enc(dev));
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.type, "ResourceNotFoundException");
}

TEST_F(EksOperationsTest, ConcurrentPolicyAssociationsAllApply) {
  // Several policies associated with one entry at once (as Terraform does): each call reads
  // the entry and commits at its revision; every one must apply, none answer "retry".
  ASSERT_EQ(Create("c1", {{"accessConfig", {{"authenticationMode", "API"}}}}).status, 200);
  const std::string dev = "arn:aws:iam::123456789012:role/dev";
  ASSERT_EQ(Send("POST", "/clusters/c1/access-entries", {{"principalArn", dev}}).status, 200);
  const std::string policies = "/clusters/c1/access-entries/" + Enc(dev) + "/access-policies";
  const std::vector<std::string> names = {"AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy",
                                          "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"};
  std::atomic<int> refused{0};
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> threads;
    for (const std::string& name : names) {
      threads.emplace_back([&, name] {
        const std::string arn = "arn:aws:eks::aws:cluster-access-policy/" + name;
        if (Send("POST", policies, {{"policyArn", arn}, {"accessScope", {{"type", "cluster"}}}})
                .status != 200) {
          ++refused;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(Send("GET", policies).body["associatedAccessPolicies"].size(), 4u);
    threads.clear();
    for (const std::string& name : names) {
      threads.emplace_back([&, name] {
        const std::string arn = "arn:aws:eks::aws:cluster-access-policy/" + name;
        if (Send("DELETE", policies + "/" + Enc(arn)).status != 200) ++refused;
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(Send("GET", policies).body["associatedAccessPolicies"].size(), 0u);
  }
  EXPECT_EQ(refused.load(), 0);
}

TEST_F(EksOperationsTest, ListAccessPoliciesPages) {
  Answer a = Send("GET", "/access-policies?maxResults=3");
  ASSERT_EQ(a.body["accessPolicies"].size(), 3u) << a.body.dump();
  EXPECT_EQ(a.body["accessPolicies"][0],
            Json({{"name", "AmazonEKSAdminPolicy"},
                  {"arn", "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy"}}));
  a = Send("GET", "/access-policies?maxResults=3&nextToken=" + Enc(a.body["nextToken"]));
  EXPECT_EQ(a.body["accessPolicies"], Json({{{"name", "AmazonEKSViewPolicy"},
                                             {"arn", kViewPolicy}}}));
  EXPECT_FALSE(a.body.contains("nextToken"));
}

}  // namespace
}  // namespace hf::eks
