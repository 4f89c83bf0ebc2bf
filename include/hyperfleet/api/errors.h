#pragma once
// The single place where a Status becomes an AWS JSON 1.1 error response.
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::api {

/// The AWS error type of `status`: its explicit type (WithAwsErrorType) if any, else by code:
/// InvalidArgument→ValidationException, NotFound→ResourceNotFound, AlreadyExists→
/// ResourceInUse, FailedPrecondition/Aborted→ConflictException, ResourceExhausted→
/// ResourceLimitExceeded, PermissionDenied→AccessDeniedException, Unimplemented→
/// UnknownOperationException, Unavailable→ServiceUnavailable, others→InternalFailure.
std::string AwsErrorType(const Status& status);

/// The HTTP status for `status`: 503 for Unavailable, 500 for server faults, 400 for every
/// client error, authentication failures included (as AWS's JSON 1.1 services answer
/// UnrecognizedClientException and InvalidSignatureException).
int HttpStatusFor(const Status& status);

/// The error response: body {"__type": <type>, "message": <text>}, header x-amzn-ErrorType,
/// Content-Type application/x-amz-json-1.1 and x-amzn-RequestId `request_id`.
http::HttpResponse ErrorResponse(const Status& status, const std::string& request_id);

}  // namespace hf::api
