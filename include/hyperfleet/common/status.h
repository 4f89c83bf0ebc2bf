#pragma once
// Errors: expected failures are absl::Status / absl::StatusOr<T> values. The AWS error type
// that a status maps to on the wire is derived from its canonical code (see api/errors.h);
// a status may override it with an explicit AWS type through WithAwsErrorType(), which the
// SigV4 and protocol errors need (their types have no canonical-code equivalent).
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hf {

using Status = absl::Status;
template <class T>
using StatusOr = absl::StatusOr<T>;

/// Returns `status` carrying `aws_type` (e.g. "InvalidSignatureException") as its wire
/// error type. The canonical code still decides the HTTP status class (4xx/5xx).
Status WithAwsErrorType(Status status, std::string_view aws_type);

/// The explicit AWS error type set by WithAwsErrorType(), if any.
std::optional<std::string> AwsErrorTypeOf(const Status& status);

}  // namespace hf

#define HF_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::hf::Status hf_status_ = (expr);      \
    if (!hf_status_.ok()) return hf_status_; \
  } while (0)

#define HF_CONCAT_INNER_(a, b) a##b
#define HF_CONCAT_(a, b) HF_CONCAT_INNER_(a, b)
#define HF_ASSIGN_OR_RETURN(lhs, expr) \
  HF_ASSIGN_OR_RETURN_IMPL_(HF_CONCAT_(hf_statusor_, __LINE__), lhs, expr)
#define HF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
