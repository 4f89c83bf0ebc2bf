#pragma once
// The AWS JSON 1.1 front door: every request passes, in order, the method check, SigV4
// authentication, the X-Amz-Target and Content-Type checks, JSON decoding, validation against
// the service model, and then the operation. A request rejected at any step changes nothing.
// Every response is pruned to the operation's output shape in the model, here and only here,
// so no operation can return a member the model does not define.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/api/json_service.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// More SageMaker operations served beside ClusterOperations (e.g. GovernanceOperations).
/// Requests reach them validated against the SageMaker model and pruned to it.
class OperationSet {
 public:
  virtual ~OperationSet() = default;
  /// True for the operations this set implements (e.g. "CreateComputeQuota").
  virtual bool implements(std::string_view operation) const = 0;
  /// Runs `operation` on a validated, pruned request body. Thread-safe.
  virtual StatusOr<nlohmann::json> call(std::string_view operation,
                                        const nlohmann::json& request) = 0;
};

/// Decodes and routes SageMaker API requests (and those of added JsonServices). Thread-safe.
class ApiHandler {
 public:
  ApiHandler(const model::ServiceModel& model, ClusterOperations& clusters,
             auth::SecretLookup secrets, const Clock& clock, IdSource& ids,
             const ApiConfig& config);

  /// Also serves `service` (which must outlive the handler) for targets "<prefix>.<Op>".
  /// Call before the first request is handled: it is not synchronised with handle().
  void addService(JsonService& service);
  /// Also serves the SageMaker operations of `operations` (which must outlive the handler).
  /// Call before the first request is handled.
  void addOperations(OperationSet& operations);

  /// Handles one HTTP request (the server's handler). Never throws.
  http::HttpResponse handle(http::HttpRequest&& request);

  /// The steps after authentication, for the fuzzer and unit tests: target, content type,
  /// JSON, validation, operation, output pruning. Returns the response body or the error.
  StatusOr<nlohmann::json> dispatch(const http::HttpRequest& request);

 private:
  const model::ServiceModel& model_;
  ClusterOperations& clusters_;
  auth::SecretLookup secrets_;
  const Clock& clock_;
  IdSource& ids_;
  auth::SigV4Policy policy_;
  std::vector<JsonService*> services_;
  std::vector<OperationSet*> operation_sets_;

  /// The added service whose prefix `target` has, or null (then it is SageMaker's).
  JsonService* serviceFor(std::string_view target) const;
  StatusOr<nlohmann::json> dispatchTo(JsonService& service, const http::HttpRequest& request);
};

}  // namespace hf::api
