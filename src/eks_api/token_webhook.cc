#include "hyperfleet/eks/token_webhook.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/eks/eks_operations.h"

namespace hf::eks {
namespace {

using nlohmann::json;

constexpr std::string_view kTokenPrefix = "k8s-aws-v1.";
constexpr size_t kMaxTokenBytes = 8192;  // a real token is ~700 bytes

}  // namespace

StatusOr<std::string> VerifyEksToken(std::string_view token, std::string_view cluster,
                                     const auth::SecretLookup& secrets, std::string_view region,
                                     SystemTime now) {
  if (!token.starts_with(kTokenPrefix)) {
    return absl::UnauthenticatedError("the token does not start with k8s-aws-v1.");
  }
  if (token.size() > kMaxTokenBytes) return absl::UnauthenticatedError("the token is too long");
  std::string url;
  if (!absl::WebSafeBase64Unescape(AbslView(token.substr(kTokenPrefix.size())), &url)) {
    return absl::UnauthenticatedError("the token is not base64url");
  }
  // x-k8s-aws-id must be among the signed headers, or the token would fit every cluster.
  const size_t at = url.find("X-Amz-SignedHeaders=");
  const std::string_view rest =
      at == std::string::npos ? "" : std::string_view(url).substr(at + 20);
  const std::string signed_headers = FormDecodeLenient(rest.substr(0, rest.find('&')));
  bool names_cluster = false;
  for (size_t start = 0; start <= signed_headers.size();) {
    const size_t end = std::min(signed_headers.find(';', start), signed_headers.size());
    names_cluster |= signed_headers.substr(start, end - start) == "x-k8s-aws-id";
    start = end + 1;
  }
  if (!names_cluster) return absl::UnauthenticatedError("the token does not sign x-k8s-aws-id");
  auth::PresignedPolicy policy;
  policy.region = std::string(region);
  HF_ASSIGN_OR_RETURN(auth::VerifiedIdentity who,
                      auth::VerifyPresignedUrl(url, {{"x-k8s-aws-id", std::string(cluster)}},
                                               secrets, policy, now));
  return who.access_key_id;
}

std::optional<KubernetesUser> MapPrincipal(std::string_view principal_arn,
                                           const std::vector<store::EksAccessEntry>& entries) {
  for (const store::EksAccessEntry& e : entries) {
    if (e.principal_arn != principal_arn) continue;
    KubernetesUser user;
    user.username = e.username.empty() ? e.principal_arn : e.username;
    user.uid = "aws-iam-authenticator:" + e.principal_arn;
    user.groups = e.kubernetes_groups;
    for (const store::EksPolicyAssociation& p : e.policies) {
      const AccessPolicy* policy = AccessPolicyOfArn(p.policy_arn);
      if (policy != nullptr && p.scope_type == "cluster") user.groups.emplace_back(policy->group);
    }
    std::sort(user.groups.begin(), user.groups.end());
    user.groups.erase(std::unique(user.groups.begin(), user.groups.end()), user.groups.end());
    return user;
  }
  return std::nullopt;
}

json TokenReviewReply(const json& review, const std::optional<KubernetesUser>& user,
                      std::string_view error) {
  std::string version = "authentication.k8s.io/v1beta1";
  if (review.is_object() && review.value("apiVersion", "") == "authentication.k8s.io/v1") {
    version = "authentication.k8s.io/v1";
  }
  json status = {{"authenticated", user.has_value()}};
  if (user) {
    status["user"] = {{"username", user->username},
                      {"uid", user->uid},
                      {"groups", user->groups}};
  } else {
    status["error"] = std::string(error);
  }
  return {{"apiVersion", version}, {"kind", "TokenReview"}, {"status", status}};
}

TokenWebhook::TokenWebhook(store::Store& store, auth::SecretLookup secrets, const Clock& clock,
                           std::string region, std::string account_id)
    : store_(store),
      secrets_(std::move(secrets)),
      clock_(clock),
      region_(std::move(region)),
      account_id_(std::move(account_id)) {}

bool TokenWebhook::Handles(const http::HttpRequest& request) {
  return request.path().starts_with(kTokenWebhookPath);
}

http::HttpResponse TokenWebhook::handle(const http::HttpRequest& request) {
  http::HttpResponse r;
  r.headers = {{"Content-Type", "application/json"}};
  if (request.method != "POST") {
    r.status = 405;
    r.body = R"({"message":"The token webhook takes POST."})";
    return r;
  }
  const std::string cluster(request.path().substr(kTokenWebhookPath.size()));
  const json review = json::parse(request.body, nullptr, false);
  const json* token = nullptr;
  if (review.is_object() && review.contains("spec") && review["spec"].is_object()) {
    auto it = review["spec"].find("token");
    if (it != review["spec"].end() && it->is_string()) token = &*it;
  }
  if (token == nullptr) {
    r.status = 400;
    r.body = R"({"message":"The body is not a TokenReview with spec.token."})";
    return r;
  }
  std::optional<KubernetesUser> user;
  std::string error;
  auto key = VerifyEksToken(token->get<std::string>(), cluster, secrets_, region_, clock_.now());
  if (!key.ok()) {
    error = std::string(key.status().message());
  } else {
    const std::string principal = PrincipalArnOf(account_id_, *key);
    auto entries = store_.eksAccessEntries(cluster);
    if (entries.ok()) user = MapPrincipal(principal, *entries);
    if (!user) error = "no access entry of cluster " + cluster + " is " + principal;
  }
  if (!user) spdlog::info("EKS token refused for cluster {}: {}", cluster, error);
  r.status = 200;
  r.body = TokenReviewReply(review, user, error)
               .dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace hf::eks
