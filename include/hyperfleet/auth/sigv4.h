#pragma once
// AWS Signature Version 4 for the JSON protocol: verification on the server, signing for
// Hyperfleet's own clients (CLI, benchmark load generator). Rules from AWS's "Signature
// Version 4 signing process" documentation; error types and wording as AWS's JSON-protocol
// services answer (see docs/compatibility.md).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/http/http.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::auth {
using http::HttpRequest;

/// An access key pair.
struct AccessKey {
  std::string access_key_id;
  std::string secret_access_key;
};

/// Looks up the secret of an access key id; nullopt when the key is unknown.
/// Must be thread-safe: called from every HTTP I/O thread.
using SecretLookup = std::function<std::optional<std::string>(std::string_view access_key_id)>;

/// What a verified request was signed for.
struct VerifiedIdentity {
  std::string access_key_id;
  std::string region;   ///< from the credential scope
  std::string service;  ///< from the credential scope, e.g. "sagemaker" or "logs"
};

/// What the verifier accepts.
struct SigV4Policy {
  std::string region;                     ///< the server's region (scope must match)
  std::vector<std::string> services;      ///< accepted signing names
  Duration max_skew = std::chrono::minutes(15);  ///< AWS's limit on clock skew
};

/// Verifies the `Authorization: AWS4-HMAC-SHA256 ...` header of `request` at time `now`.
///
/// Canonical request, as botocore and the JS SDK v3 build it:
///   - the SignedHeaders list as received (clients sign different sets); values trimmed with
///     inner whitespace collapsed, repeated headers joined by ',', names matched
///     case-insensitively. `host` must be in the list;
///   - canonical URI: the received path with empty, "." and ".." segments resolved, then
///     URI-encoded once more (so "/" and "/sm" are used unchanged, "%" becomes "%25");
///   - canonical query: each name and value percent-decoded ('+' is a space), re-encoded
///     (A-Z a-z 0-9 - _ . ~ kept, the rest as uppercase %XX), sorted by name then value;
///   - payload hash: the x-amz-content-sha256 value when that header is present (it must equal
///     the SHA-256 of the body, so UNSIGNED-PAYLOAD is refused), else SHA-256 of the body.
/// The request time is X-Amz-Date (ISO-8601 basic, 20261130T010104Z) or, without it, Date
/// (basic format or IMF-fixdate). X-Amz-Security-Token is accepted and not checked: temporary
/// credentials map to their access key id. `secrets` is called only once the header, scope
/// and time have passed, so unknown keys cost no HMAC.
///
/// Errors (each tagged with its AWS type via WithAwsErrorType; messages as AWS words them):
///   no Authorization header           -> MissingAuthenticationTokenException, Unauthenticated:
///                                        "Missing Authentication Token"
///   header without Credential, Signature or SignedHeaders, unknown scheme, no X-Amz-Date or
///   Date, a parameter without '=', a Credential without 5 '/'-separated parts, host not
///   signed, unparsable date           -> IncompleteSignatureException, InvalidArgument
///   scope terminator not aws4_request, region != policy.region, service not in
///   policy.services, scope date != request date
///                                     -> InvalidSignatureException, Unauthenticated
///   request time more than max_skew before/after `now`
///                                     -> InvalidSignatureException, Unauthenticated:
///                                        "Signature expired: ..." / "Signature not yet
///                                        current: ..."
///   unknown access key id             -> UnrecognizedClientException, Unauthenticated: "The
///                                        security token included in the request is invalid."
///   signature or payload hash mismatch -> InvalidSignatureException, Unauthenticated: "The
///                                        request signature we calculated does not match ..."
StatusOr<VerifiedIdentity> VerifySigV4(
    const HttpRequest& request, const SecretLookup& secrets, const SigV4Policy& policy,
    SystemTime now);

/// What VerifyPresignedUrl accepts (the rules of EKS's token authenticator).
struct PresignedPolicy {
  std::string region;             ///< the credential scope's region must be this one
  std::string service = "sts";    ///< and its service this one
  /// X-Amz-Expires must be present and at most this (`aws eks get-token` signs 60 s).
  std::chrono::seconds max_expires{60};
  /// A URL signed longer ago than this is refused, whatever X-Amz-Expires says: EKS's
  /// tokens live 15 minutes (kubectl reuses one that long), not X-Amz-Expires.
  std::chrono::seconds max_age{std::chrono::minutes(15)};
  /// A URL signed later than now plus this is refused (clock skew).
  std::chrono::seconds max_skew{std::chrono::minutes(5)};
};

/// Verifies a query-string-signed (presigned) GET URL, "https://host/path?...&X-Amz-
/// Signature=<hex>", as botocore's generate_presigned_url makes it: the canonical request is
/// GET, the path, every query parameter but X-Amz-Signature, the headers of
/// X-Amz-SignedHeaders (host from the URL, the others from `headers`, e.g.
/// {"x-k8s-aws-id", "<cluster>"}; a signed header missing there fails the signature), and the
/// SHA-256 of the empty payload. Errors, all Unauthenticated: a URL without a host or with a
/// query parameter missing (X-Amz-Algorithm AWS4-HMAC-SHA256, Credential, Date, Expires,
/// SignedHeaders, Signature), a scope of another region or service, X-Amz-Expires over
/// policy.max_expires, a date older than max_age or later than max_skew, an unknown key,
/// a signature that does not match.
StatusOr<VerifiedIdentity> VerifyPresignedUrl(std::string_view url, const http::Headers& headers,
                                              const SecretLookup& secrets,
                                              const PresignedPolicy& policy, SystemTime now);

/// Signs `request` in place as botocore does: replaces `X-Amz-Date` and `Authorization`, adds
/// `Host` (from `host`) when absent, and signs content-type, host and every x-amz-* header
/// present (x-amz-date, x-amz-target, x-amz-security-token, ...). Payload hash: the
/// x-amz-content-sha256 value when present, else SHA-256 of the body. Cannot fail.
void SignSigV4(HttpRequest& request, const AccessKey& key, std::string_view region,
               std::string_view service, std::string_view host, SystemTime now);

/// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace hf::auth
