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
/// Uses the SignedHeaders list as received (clients sign different sets); the canonical
/// URI is the path exactly as received; the payload hash is x-amz-content-sha256 when
/// present and signed, else SHA-256 of the body. Errors (each tagged with its AWS type):
///   no Authorization header          -> MissingAuthenticationTokenException (403)
///   malformed header / missing parts -> IncompleteSignatureException (400)
///   unknown access key id            -> UnrecognizedClientException (403), "The security
///                                       token included in the request is invalid."
///   wrong region or service in scope -> InvalidSignatureException (403)
///   timestamp more than max_skew off -> InvalidSignatureException, "Signature expired: ..."
///   signature mismatch               -> InvalidSignatureException (403)
StatusOr<VerifiedIdentity> VerifySigV4(
    const HttpRequest& request, const SecretLookup& secrets, const SigV4Policy& policy,
    SystemTime now);

/// Signs `request` in place as botocore does: sets `X-Amz-Date`, `Host` (if absent, from
/// `host`), and `Authorization` over content-type, host, x-amz-date, x-amz-target and any
/// x-amz-* headers present. Payload hash: SHA-256 of the body.
void SignSigV4(HttpRequest& request, const AccessKey& key, std::string_view region,
               std::string_view service, std::string_view host, SystemTime now);

/// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace hf::auth
