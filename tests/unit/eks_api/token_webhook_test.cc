// The EKS token webhook: tokens made by the aws CLI's own get-token code (fixtures from
// tests/unit/auth/gen_presigned_fixtures.py) verified against the API's keys (good, forged,
// expired, wrong cluster, wrong region, a longer X-Amz-Expires, unknown key), the principal
// mapped through access entries, and TokenReview answers in the version asked.
#include "hyperfleet/eks/token_webhook.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/eks/eks_operations.h"

namespace hf::eks {
namespace {

#include "unit/auth/presigned_fixtures.inc"

using Json = nlohmann::json;

const SystemTime kSignedAt = FromEpochSeconds(1796220000);  // kTokenSignedAt

auth::SecretLookup Keys() {
  return [](std::string_view key) -> std::optional<std::string> {
    if (key == kTokenKeyId) return std::string(kTokenSecret);
    return std::nullopt;
  };
}

/// `token` with its URL changed by `edit` (a forgery).
std::string Reencode(std::string_view token, const std::function<void(std::string&)>& edit) {
  std::string url;
  EXPECT_TRUE(absl::WebSafeBase64Unescape(AbslView(token.substr(11)), &url));
  edit(url);
  std::string b64;
  absl::WebSafeBase64Escape(url, &b64);
  return "k8s-aws-v1." + b64;
}

TEST(VerifyEksTokenTest, TheCliTokenIsGoodFor15MinutesForItsClusterOnly) {
  for (auto after : {std::chrono::seconds(0), std::chrono::seconds(61),
                     std::chrono::seconds(15 * 60)}) {
    auto key = VerifyEksToken(kTokenC1, "c1", Keys(), "us-west-2", kSignedAt + after);
    ASSERT_TRUE(key.ok()) << after.count() << ": " << key.status();
    EXPECT_EQ(*key, kTokenKeyId);
  }
  struct Case {
    std::string name, token, cluster;
    SystemTime now;
    std::string error;
  };
  const std::string forged = Reencode(kTokenC1, [](std::string& url) {
    url.replace(url.find("X-Amz-Signature=") + 16, 1, "0");
  });
  const std::string unsigned_cluster = Reencode(kTokenC1, [](std::string& url) {
    url.replace(url.find("host%3Bx-k8s-aws-id"), 19, "host");
  });
  const std::vector<Case> cases = {
      {"expired", kTokenC1, "c1", kSignedAt + std::chrono::seconds(15 * 60 + 1),
       "the token has expired"},
      {"future", kTokenC1, "c1", kSignedAt - std::chrono::minutes(6),
       "the token is not yet valid"},
      {"other cluster", kTokenC1, "c2", kSignedAt, "the token's signature does not match"},
      {"forged", forged, "c1", kSignedAt, "the token's signature does not match"},
      {"no x-k8s-aws-id", unsigned_cluster, "c1", kSignedAt,
       "the token does not sign x-k8s-aws-id"},
      {"region", kTokenOtherRegion, "c1", kSignedAt,
       "the token is not scoped to sts in us-west-2"},
      {"expires 900", kTokenLongExpiry, "c1", kSignedAt,
       "the token's X-Amz-Expires must be 1 to 60 seconds"},
      {"prefix", "k8s-aws-v2.abc", "c1", kSignedAt, "the token does not start with k8s-aws-v1."},
      {"base64", "k8s-aws-v1.!!!", "c1", kSignedAt, "the token is not base64url"},
  };
  for (const Case& c : cases) {
    auto key = VerifyEksToken(c.token, c.cluster, Keys(), "us-west-2", c.now);
    ASSERT_FALSE(key.ok()) << c.name;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kUnauthenticated) << c.name;
    EXPECT_EQ(key.status().message(), c.error) << c.name;
  }
  auto unknown = VerifyEksToken(kTokenC1, "c1", [](std::string_view) { return std::nullopt; },
                                "us-west-2", kSignedAt);
  EXPECT_EQ(unknown.status().message(), "the token's access key is not known");
}

store::EksAccessEntry Entry(const std::string& principal) {
  store::EksAccessEntry e;
  e.cluster = "c1";
  e.principal_arn = principal;
  return e;
}

TEST(MapPrincipalTest, Table) {
  const std::string admin = "arn:aws:iam::123456789012:user/AKIDTOKENTEST";
  store::EksAccessEntry a = Entry(admin);
  a.policies.push_back({AccessPolicyArn("AmazonEKSClusterAdminPolicy"), "cluster", {}, {}, {}});
  store::EksAccessEntry dev = Entry("arn:aws:iam::123456789012:role/dev");
  dev.username = "dev";
  dev.kubernetes_groups = {"devs", "ml"};
  dev.policies.push_back({AccessPolicyArn("AmazonEKSViewPolicy"), "cluster", {}, {}, {}});
  dev.policies.push_back({AccessPolicyArn("AmazonEKSEditPolicy"), "namespace", {"ml"}, {}, {}});
  const std::vector<store::EksAccessEntry> entries = {a, dev};

  EXPECT_EQ(MapPrincipal(admin, entries),
            (KubernetesUser{admin, "aws-iam-authenticator:" + admin, {"system:masters"}}));
  EXPECT_EQ(MapPrincipal("arn:aws:iam::123456789012:role/dev", entries),
            (KubernetesUser{"dev", "aws-iam-authenticator:arn:aws:iam::123456789012:role/dev",
                            {"devs", "hyperfleet:eks:view", "ml"}}));
  EXPECT_EQ(MapPrincipal("arn:aws:iam::123456789012:role/other", entries), std::nullopt);
}

TEST(TokenReviewReplyTest, AnswersInTheVersionAsked) {
  const KubernetesUser user{"u", "uid", {"g"}};
  Json v1 = TokenReviewReply({{"apiVersion", "authentication.k8s.io/v1"}}, user, "");
  EXPECT_EQ(v1, Json({{"apiVersion", "authentication.k8s.io/v1"},
                      {"kind", "TokenReview"},
                      {"status",
                       {{"authenticated", true},
                        {"user", {{"username", "u"}, {"uid", "uid"}, {"groups", {"g"}}}}}}}));
  Json beta = TokenReviewReply({{"apiVersion", "authentication.k8s.io/v1beta1"}}, std::nullopt,
                               "no");
  EXPECT_EQ(beta["apiVersion"], "authentication.k8s.io/v1beta1");
  EXPECT_EQ(beta["status"], Json({{"authenticated", false}, {"error", "no"}}));
}

class FixedClock : public Clock {
 public:
  SystemTime now() const override { return kSignedAt + std::chrono::seconds(30); }
};

TEST(TokenWebhookTest, AuthenticatesThroughTheStoredAccessEntries) {
  auto store = std::move(store::OpenSqliteStore(":memory:").value());
  store::WriteBatch b;
  store::EksCluster c;
  c.name = "c1";
  c.arn = "arn:aws:eks:us-west-2:123456789012:cluster/c1";
  b.eks_clusters.push_back({c, store::kMustNotExist, false});
  store::EksAccessEntry e = Entry("arn:aws:iam::123456789012:user/AKIDTOKENTEST");
  e.arn = "arn:aws:eks:us-west-2:123456789012:access-entry/c1/user/x";
  e.kubernetes_groups = {"devs"};
  b.eks_access_entries.push_back({e, store::kMustNotExist, false});
  ASSERT_TRUE(store->commit(b).ok());
  FixedClock clock;
  TokenWebhook webhook(*store, Keys(), clock, "us-west-2", "123456789012");

  auto ask = [&](const std::string& cluster, const std::string& token) {
    http::HttpRequest req;
    req.method = "POST";
    req.target = std::string(kTokenWebhookPath) + cluster;
    req.body = Json{{"apiVersion", "authentication.k8s.io/v1beta1"},
                    {"kind", "TokenReview"},
                    {"spec", {{"token", token}}}}
                   .dump();
    EXPECT_TRUE(TokenWebhook::Handles(req));
    http::HttpResponse r = webhook.handle(req);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["status"];
  };
  Json ok = ask("c1", kTokenC1);
  EXPECT_EQ(ok["authenticated"], true) << ok.dump();
  EXPECT_EQ(ok["user"]["username"], "arn:aws:iam::123456789012:user/AKIDTOKENTEST");
  EXPECT_EQ(ok["user"]["groups"], Json({"devs"}));
  EXPECT_EQ(ask("c2", kTokenC1)["authenticated"], false);  // another cluster
  // No access entry: the entry goes, the same token is refused.
  e = store->eksAccessEntry("c1", e.principal_arn).value();
  store::WriteBatch del;
  del.eks_access_entries.push_back({e, e.revision, true});
  ASSERT_TRUE(store->commit(del).ok());
  Json refused = ask("c1", kTokenC1);
  EXPECT_EQ(refused["authenticated"], false);
  EXPECT_EQ(refused["error"],
            "no access entry of cluster c1 is arn:aws:iam::123456789012:user/AKIDTOKENTEST");

  http::HttpRequest bad;
  bad.method = "POST";
  bad.target = "/eks/v1/authenticate/c1";
  bad.body = "{}";
  EXPECT_EQ(webhook.handle(bad).status, 400);
  bad.method = "GET";
  EXPECT_EQ(webhook.handle(bad).status, 405);
}

}  // namespace
}  // namespace hf::eks
