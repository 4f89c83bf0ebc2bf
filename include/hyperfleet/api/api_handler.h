#pragma once
// The AWS JSON 1.1 front door: every request passes, in order, the method check, SigV4
// authentication, the X-Amz-Target and Content-Type checks, JSON decoding, validation against
// the service model, and then the operation. A request rejected at any step changes nothing.
#include <memory>
#include <string>

#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// Decodes and routes SageMaker API requests. Thread-safe.
class ApiHandler {
 public:
  ApiHandler(const model::ServiceModel& model, ClusterOperations& clusters,
             auth::SecretLookup secrets, const Clock& clock, IdSource& ids,
             const ApiConfig& config);

  /// Handles one HTTP request (the server's handler). Never throws.
  http::HttpResponse handle(http::HttpRequest&& request);

  /// The steps after authentication, for the fuzzer and unit tests: target, content type,
  /// JSON, validation, operation. Returns the response body or the error.
  StatusOr<nlohmann::json> dispatch(const http::HttpRequest& request);

 private:
  const model::ServiceModel& model_;
  ClusterOperations& clusters_;
  auth::SecretLookup secrets_;
  const Clock& clock_;
  IdSource& ids_;
  auth::SigV4Policy policy_;
};

}  // namespace hf::api
