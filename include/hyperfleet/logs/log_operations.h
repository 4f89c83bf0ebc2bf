#pragma once
// The CloudWatch Logs subset served next to the SageMaker API: DescribeLogGroups,
// DescribeLogStreams, GetLogEvents and FilterLogEvents (AWS JSON 1.1, X-Amz-Target
// "Logs_20140328.<Op>", SigV4 signing name "logs"), over a LogStore. Request and response
// members, limits and error types are the model's (data/aws-models/logs/2014-03-28,
// generated from botocore by tools/gen_model_subset.py --logs); semantics follow the
// CloudWatch Logs API reference.
//
// Wiring (RunServer): open the store with OpenLogStoreInDataDir(data_dir, clock), build
// LogOperations(store, {region, account_id}) and pass it to ApiHandler::addService() before
// serving; the agent endpoint appends with store.append(group, stream, events).
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/json_service.h"
#include "hyperfleet/logs/log_store.h"
#include "hyperfleet/model/service_model.h"

namespace hf::logs {

/// The embedded CloudWatch Logs model subset (parsed once, on first use).
std::shared_ptr<const model::ServiceModel> LogsServiceModel();

/// Where ARNs point.
struct LogsConfig {
  std::string region = "us-west-2";
  std::string account_id = "123456789012";
};

/// The four operations, as an api::JsonService. Thread-safe (the store is).
///
/// Tokens (opaque to clients): GetLogEvents' nextForwardToken "f/<ts>/<id>" and
/// nextBackwardToken "b/<ts>/<id>" name a position between events; at the end of the stream
/// the forward token that was passed in comes back unchanged, as AWS does, so a poller can
/// loop on it. FilterLogEvents' nextToken "e/<ts>/<id>" is present only while more events
/// match. Describe tokens resume after the last name (or last event time and name) listed.
///
/// Errors, as CloudWatch Logs answers: ResourceNotFoundException "The specified log group
/// does not exist." / "The specified log stream does not exist."; InvalidParameterException
/// for model violations and for bad combinations (neither or both of logGroupName and
/// logGroupIdentifier; orderBy LastEventTime with logStreamNamePrefix; logStreamNames with
/// logStreamNamePrefix; a malformed nextToken; a filter pattern that is not made of terms,
/// "quoted phrases", ?alternatives and -exclusions).
class LogOperations final : public api::JsonService {
 public:
  /// `store` must outlive this object.
  LogOperations(LogStore& store, LogsConfig config);

  std::string_view targetPrefix() const override { return "Logs_20140328"; }
  std::string_view signingName() const override { return "logs"; }
  const model::ServiceModel& model() const override { return *model_; }
  std::string_view validationErrorType() const override { return "InvalidParameterException"; }
  /// Runs `op` on validated input. Unknown `op`: UnknownOperationException.
  StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) override;

 private:
  StatusOr<nlohmann::json> describeLogGroups(const nlohmann::json& in);
  StatusOr<nlohmann::json> describeLogStreams(const nlohmann::json& in);
  StatusOr<nlohmann::json> getLogEvents(const nlohmann::json& in);
  StatusOr<nlohmann::json> filterLogEvents(const nlohmann::json& in);

  LogStore& store_;
  LogsConfig config_;
  std::shared_ptr<const model::ServiceModel> model_;
};

/// A parsed filter pattern (see FilterQuery's term lists).
struct FilterTerms {
  std::vector<std::string> all, any, none;
};
/// Parses a CloudWatch Logs term pattern: whitespace-separated terms that must all occur,
/// "double-quoted phrases" (\" and \\ escapes), ?term (at least one of those), -term (none
/// of those). Empty or "" matches everything. Errors: InvalidParameterException for JSON
/// ({...}), space-delimited ([...]) or regular-expression (%...%) patterns and unclosed quotes.
StatusOr<FilterTerms> ParseFilterPattern(std::string_view pattern);

}  // namespace hf::logs
