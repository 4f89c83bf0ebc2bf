#include "hyperfleet/api/errors.h"

#include <nlohmann/json.hpp>

namespace hf::api {

std::string AwsErrorType(const Status& status) {
  if (auto explicit_type = AwsErrorTypeOf(status)) return *explicit_type;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return "ValidationException";
    case absl::StatusCode::kNotFound:
      return "ResourceNotFound";
    case absl::StatusCode::kAlreadyExists:
      return "ResourceInUse";
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return "ConflictException";
    case absl::StatusCode::kResourceExhausted:
      return "ResourceLimitExceeded";
    case absl::StatusCode::kPermissionDenied:
      return "AccessDeniedException";
    case absl::StatusCode::kUnauthenticated:
      return "UnrecognizedClientException";
    case absl::StatusCode::kUnimplemented:
      return "UnknownOperationException";
    case absl::StatusCode::kUnavailable:
      return "ServiceUnavailable";
    default:
      return "InternalFailure";
  }
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kDeadlineExceeded:
      return 500;
    default:
      return 400;
  }
}

http::HttpResponse ErrorResponse(const Status& status, const std::string& request_id) {
  const std::string type = AwsErrorType(status);
  http::HttpResponse r;
  r.status = HttpStatusFor(status);
  nlohmann::json body = {{"__type", type}, {"message", std::string(status.message())}};
  // Messages may carry client-supplied bytes: replace invalid UTF-8 instead of throwing.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.headers = {{"Content-Type", "application/x-amz-json-1.1"},
               {"x-amzn-RequestId", request_id},
               {"x-amzn-ErrorType", type}};
  return r;
}

}  // namespace hf::api
