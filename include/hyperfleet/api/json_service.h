#pragma once
// The one interface of what api::ApiHandler serves: an AWS JSON 1.1 or REST-JSON service,
// or some of the operations of one (SageMaker's are spread over several OperationSets).
// Header-only, so that a service (hf_logs, hf_jobsapi) implements it without linking hf_api.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// Operations of an AWS JSON 1.1 service, served by ApiHandler for targets
/// "<targetPrefix()>.<Op>" once added with ApiHandler::addService (e.g. the CloudWatch Logs
/// subset, hf_logs' LogOperations). For every service the handler authenticates with its
/// signing name, refuses operations its model does not define, validates input against the
/// model (tagging violations with validationErrorType()), prunes the input, calls the first
/// added service of that prefix that implements() the operation, and prunes the response to
/// the model's output shape (a "document": true structure is kept whole; a callSerialized()
/// reply is written to that shape already and sent as it is). Services that share
/// a prefix share its signing name, model and wording: the first one added supplies them.
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
  /// How the UnknownOperationException for a wrong Content-Type ends.
  virtual std::string_view contentTypeHint() const {
    return "expected application/x-amz-json-1.1.";
  }
  /// True for the operations call() runs; by default every operation of the model. When no
  /// service of the prefix implements a modeled operation, the handler answers
  /// UnknownOperationException "Hyperfleet does not implement <target> yet.".
  virtual bool implements(std::string_view op) const { return model().hasOperation(op); }
  /// Runs operation `op` (one it implements) on a validated, pruned input. Thread-safe.
  virtual StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) = 0;
  /// Runs `op` as call() does, for the caller whose verified SigV4 access key id is
  /// `access_key_id` (operations that record who asked, e.g. EKS's CreateCluster make the
  /// caller an admin). By default call(). Thread-safe.
  virtual StatusOr<nlohmann::json> callAs(std::string_view op, const nlohmann::json& input,
                                          std::string_view /*access_key_id*/) {
    return call(op, input);
  }
  /// True for a REST-JSON service (e.g. EKS): requests without X-Amz-Target signed for its
  /// signingName() are routed by method and path against its model's `http` bindings
  /// (api/rest_json.h), and targetPrefix() is not used. False: AWS JSON 1.1.
  virtual bool restJson() const { return false; }
  /// For operations whose responses are large (list pages): the response body of `op`
  /// already serialized, byte for byte what call() pruned to the output shape and dumped
  /// would give (hyperfleet/common/json_text.h), without building the tree; the handler then
  /// neither prunes nor dumps. nullopt for an operation without one (call() runs). A test
  /// compares both paths (tests/unit/api/serialized_reply_test.cc). Thread-safe.
  virtual std::optional<StatusOr<std::string>> callSerialized(std::string_view /*op*/,
                                                              const nlohmann::json& /*input*/) {
    return std::nullopt;
  }
};

/// Some of the SageMaker API's operations (ClusterOperations, GovernanceOperations): target
/// prefix "SageMaker", signed for "sagemaker", the embedded SageMaker model, model violations
/// as ValidationException. Subclasses say which operations they implement.
class OperationSet : public JsonService {
 public:
  std::string_view targetPrefix() const override { return "SageMaker"; }
  std::string_view signingName() const override { return "sagemaker"; }
  const model::ServiceModel& model() const override { return *model::ServiceModel::Embedded(); }
  std::string_view validationErrorType() const override { return "ValidationException"; }
  std::string_view contentTypeHint() const override {
    return "the SageMaker API takes application/x-amz-json-1.1.";
  }
  /// True for the operations this set implements (e.g. "CreateComputeQuota").
  bool implements(std::string_view operation) const override = 0;
};

}  // namespace hf::api
