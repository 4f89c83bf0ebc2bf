#pragma once
// The interface of another AWS JSON 1.1 service that api::ApiHandler serves on its endpoint.
// Header-only, so that a service (hf_logs, hf_jobsapi) implements it without linking hf_api.
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// Another AWS JSON 1.1 service served on the same endpoint (e.g. the CloudWatch Logs subset,
/// hf_logs' LogOperations). The handler authenticates with the service's signing name,
/// validates input against its model, tags model violations with its error type, and prunes
/// responses to the model's output shapes (a "document": true structure is kept whole).
class JsonService {
 public:
  virtual ~JsonService() = default;
  /// X-Amz-Target prefix before the '.', e.g. "Logs_20140328".
  virtual std::string_view targetPrefix() const = 0;
  /// SigV4 signing name (credential scope service), e.g. "logs".
  virtual std::string_view signingName() const = 0;
  /// The service model that requests are validated against.
  virtual const model::ServiceModel& model() const = 0;
  /// The AWS error type of model violations, e.g. "InvalidParameterException".
  virtual std::string_view validationErrorType() const = 0;
  /// Runs operation `op` (defined by the model) on a validated, pruned input. Thread-safe.
  virtual StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) = 0;
};

}  // namespace hf::api
