#pragma once
// The token webhook that each EKS control plane's kube-apiserver asks about bearer tokens
// (`aws eks get-token`, then kubectl): POST /eks/v1/authenticate/<cluster> with a TokenReview,
// served on the API endpoint outside SigV4. A token is "k8s-aws-v1." + base64url (no padding)
// of a presigned STS GetCallerIdentity URL with header x-k8s-aws-id=<cluster> signed; it is
// verified with the API's own keys (auth::VerifyPresignedUrl) and its principal mapped
// through the cluster's access entries. Pure pieces (VerifyEksToken, MapPrincipal,
// TokenReviewReply) and the thin handler.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/store/store.h"

namespace hf::eks {

/// The URL path prefix of the webhook; the cluster's name follows it.
inline constexpr std::string_view kTokenWebhookPath = "/eks/v1/authenticate/";

/// The access key id that signed `token` for cluster `cluster`. Checks: the "k8s-aws-v1."
/// prefix, base64url, a presigned URL scoped to sts in `region` (auth::PresignedPolicy: at
/// most 60 s X-Amz-Expires, at most 15 min old), x-k8s-aws-id signed and equal to
/// `cluster`. Errors: Unauthenticated saying which check failed.
StatusOr<std::string> VerifyEksToken(std::string_view token, std::string_view cluster,
                                     const auth::SecretLookup& secrets, std::string_view region,
                                     SystemTime now);

/// Who a principal is in Kubernetes.
struct KubernetesUser {
  std::string username;             ///< the entry's username, else the principal's ARN
  std::string uid;                  ///< "aws-iam-authenticator:<principal ARN>"
  std::vector<std::string> groups;  ///< the entry's groups, then its policies' (sorted, unique)
  bool operator==(const KubernetesUser&) const = default;
};

/// The user of `principal_arn` by the access entries of its cluster (`entries`); nullopt
/// when no entry is the principal's. Cluster-scoped access policies add their groups
/// (AccessPolicies()); namespace-scoped ones add none (their Kubernetes bindings would be
/// cluster-wide: see docs/kubernetes.md).
std::optional<KubernetesUser> MapPrincipal(std::string_view principal_arn,
                                           const std::vector<store::EksAccessEntry>& entries);

/// The TokenReview answer to `review` (the request's body), in the request's apiVersion
/// (authentication.k8s.io/v1 or v1beta1; v1beta1 for anything else): authenticated with
/// `user`, or not authenticated with `error` when `user` is nullopt.
nlohmann::json TokenReviewReply(const nlohmann::json& review,
                                const std::optional<KubernetesUser>& user,
                                std::string_view error);

/// The webhook's HTTP handler. Thread-safe.
class TokenWebhook {
 public:
  /// `account_id`: the account of principals (PrincipalArnOf); `region`: the tokens' scope.
  TokenWebhook(store::Store& store, auth::SecretLookup secrets, const Clock& clock,
               std::string region, std::string account_id);

  /// True for a request this webhook serves (its path starts with kTokenWebhookPath).
  static bool Handles(const http::HttpRequest& request);

  /// Answers a TokenReview: 200 with status.authenticated true or false (never an error
  /// status for a bad token: the apiserver then answers 401 itself); 400 for a body that is
  /// not a TokenReview, 405 for a method other than POST.
  http::HttpResponse handle(const http::HttpRequest& request);

 private:
  store::Store& store_;
  auth::SecretLookup secrets_;
  const Clock& clock_;
  std::string region_;
  std::string account_id_;
};

}  // namespace hf::eks
