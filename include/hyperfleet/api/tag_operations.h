#pragma once
// AddTags, ListTags and DeleteTags on every taggable HyperPod ARN: clusters
// (arn:aws:sagemaker:<region>:<account>:cluster/<id>), cluster scheduler configs
// (…:cluster-scheduler-config/<id>) and compute quotas (…:compute-quota/<id>). Tags are kept
// in the store by ARN and go in the same commit as their object. Requests arrive validated
// against the service model (key and value lengths and patterns, list sizes).
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/store/store.h"

namespace hf::api {

/// Most tags on one resource, as SageMaker documents ("up to 50 tags per resource").
inline constexpr size_t kMaxTagsPerResource = 50;

/// The Key/Value pairs of a validated Tags list (the model's Tag shape).
std::vector<model::Tag> TagsFrom(const nlohmann::json& tags);

/// The rules on a Tags list (of a create or of AddTags) that the model cannot express: keys
/// are unique, and keys starting "aws:" are reserved for AWS. Errors: InvalidArgument
/// (ValidationException) naming 'tags.N.member.key' in the model's validation wording.
Status CheckTagList(const nlohmann::json& tags);

/// The three tag operations. Thread-safe.
class TagOperations {
 public:
  explicit TagOperations(store::Store& store) : store_(store) {}

  using Json = nlohmann::json;
  /// Adds or overwrites tags; returns {"Tags": the tags given}. Errors: ValidationException
  /// for a CheckTagList violation or more than kMaxTagsPerResource tags in all;
  /// ResourceNotFound (naming the ARN) for an ARN that names no existing object of this
  /// control plane, including one of another resource type.
  StatusOr<Json> addTags(const Json& in);
  /// The resource's tags ordered by key, MaxResults (default 50) per page; NextToken
  /// resumes after the last key returned. Errors: ResourceNotFound as for addTags.
  StatusOr<Json> listTags(const Json& in);
  /// Removes the tags with the keys given (absent keys are ignored). Errors:
  /// ValidationException for an "aws:" key; ResourceNotFound as for addTags.
  StatusOr<Json> deleteTags(const Json& in);

 private:
  /// OK when `arn` names an existing cluster, cluster scheduler config or compute quota;
  /// NotFound naming the ARN otherwise.
  Status resolve(const std::string& arn);
  /// Commits `write`; an object deleted since resolve() gives NotFound.
  Status commit(store::TagWrite write);

  store::Store& store_;
  /// Serialises tag writers, so that AddTags' count check and its commit are one step.
  std::mutex write_mu_;
};

}  // namespace hf::api
