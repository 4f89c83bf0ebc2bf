#pragma once
// The API's front door. A request without X-Amz-Target whose signature is scoped to a
// REST-JSON service (EKS) goes that service's way (handleRest). Every AWS JSON 1.1 request
// passes, in order, the method check, SigV4 authentication, the X-Amz-Target and
// Content-Type checks, JSON decoding, validation against the service model, and then the
// operation. A request rejected at any step changes nothing.
// Every response is pruned to the operation's output shape in the model, here and only here,
// so no operation can return a member the model does not define; the one exception, a reply a
// service serializes itself (JsonService::callSerialized), is tested against the pruned tree.
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hyperfleet/api/cluster_operations.h"  // ApiConfig
#include "hyperfleet/api/json_service.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// Decodes and routes the requests of the added services (SageMaker's operation sets, the
/// CloudWatch Logs subset, ...). The endpoint is SageMaker's: a target that no added service
/// claims is refused naming "SageMaker.<Operation>", after a signature scoped to "sagemaker".
/// Thread-safe.
class ApiHandler {
 public:
  /// `config.region` is the region signatures must be scoped to.
  ApiHandler(auth::SecretLookup secrets, const Clock& clock, IdSource& ids,
             const ApiConfig& config);

  /// Serves `service` (which must outlive the handler) for targets "<prefix>.<Op>"; services
  /// sharing a prefix are asked in the order added (see JsonService). Call before the first
  /// request is handled: it is not synchronised with handle().
  void addService(JsonService& service);

  /// Handles one HTTP request (the server's handler). Never throws.
  http::HttpResponse handle(http::HttpRequest&& request);

  /// The steps after authentication, for the fuzzer and unit tests: target, content type,
  /// JSON, validation, operation, output pruning. Returns the response body or the error
  /// (a serialized reply parsed back).
  StatusOr<nlohmann::json> dispatch(const http::HttpRequest& request);

 private:
  auth::SecretLookup secrets_;
  const Clock& clock_;
  IdSource& ids_;
  auth::SigV4Policy policy_;
  std::vector<JsonService*> services_;

  /// A response body: the pruned tree, or the text of JsonService::callSerialized.
  using Reply = std::variant<nlohmann::json, std::string>;
  /// dispatch()'s steps, without parsing a serialized reply back.
  StatusOr<Reply> reply(const http::HttpRequest& request);

  /// The first added REST-JSON service signed as `signing_name`, or null.
  JsonService* restServiceFor(std::string_view signing_name) const;
  /// handle() for a request of REST-JSON service `service`: SigV4, route, binding,
  /// validation, operation, output pruning; errors as api/rest_json.h's RestErrorResponse.
  http::HttpResponse handleRest(const http::HttpRequest& request, JsonService& service,
                                const std::string& request_id);
  /// The first added service whose prefix `target` has (it speaks for the prefix), or null.
  JsonService* serviceFor(std::string_view target) const;
  /// The first added service of `prefix` that implements `op`, or null.
  JsonService* implementerOf(std::string_view prefix, std::string_view op) const;
};

}  // namespace hf::api
