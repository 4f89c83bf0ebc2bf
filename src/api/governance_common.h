#pragma once
// Helpers shared by the governance operations (governance_operations.cc, the machinery of
// both kinds; scheduler_configs.cc; compute_quotas.cc): request members, validation
// messages, how objects are named and described, update checks and list-page tokens.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/governance.h"

namespace hf::api::governance_ops {

using Json = nlohmann::json;

/// A ValidationException for a rule the model cannot express; `path` is the member path in
/// the model's validation wording (lowerCamelCase, lists 1-based).
Status Invalid(const std::string& path, const std::string& value, const std::string& rule);

/// String member `key` of `in`, "" when missing or not a string.
std::string Str(const Json& in, const char* key);

/// The JSON text of a value as a validation message shows it (strings without quotes).
std::string Shown(const Json& v);

/// The display word of a kind in messages and events.
std::string Noun(const std::string& k);

/// "<noun> <name> (<Kind> <id>)": how messages and events name an object.
std::string Named(const model::SchedulerResource& r);

/// ValidationException at `path` when `name` (a TeamName or priority class Name) is longer
/// than HyperPod's documented ~40 characters.
Status CheckNameLength(const std::string& path, const std::string& name);

/// The members every Describe and List summary of `r` carries (Arn, Id, Name, Version,
/// Status, times, ClusterArn).
Json Common(const model::SchedulerResource& r);

/// DescribeClusterSchedulerConfig's or DescribeComputeQuota's response for `r`.
Json DescribeOf(const model::SchedulerResource& r);

/// The common checks of an update of `r` on cluster `c`: the version the client read
/// (TargetVersion), no change in flight, and the cluster not being deleted. Errors:
/// FailedPrecondition (ConflictException).
Status CheckUpdatable(const model::SchedulerResource& r, const model::Cluster& c,
                      const Json& in);

/// An Update's response: {"<Kind>Arn", "<Kind>Version"}.
Json UpdateResult(const model::SchedulerResource& r);

}  // namespace hf::api::governance_ops
