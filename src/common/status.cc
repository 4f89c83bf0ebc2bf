#include "hyperfleet/common/status.h"

#include "absl/strings/cord.h"

namespace hf {
namespace {
// absl::string_view is not std::string_view in Debian's abseil build.
constexpr absl::string_view kAwsTypeUrl = "hyperfleet/aws-error-type";
}

Status WithAwsErrorType(Status status, std::string_view aws_type) {
  status.SetPayload(kAwsTypeUrl, absl::Cord(absl::string_view(aws_type.data(), aws_type.size())));
  return status;
}

std::optional<std::string> AwsErrorTypeOf(const Status& status) {
  auto payload = status.GetPayload(kAwsTypeUrl);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace hf
