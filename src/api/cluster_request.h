#pragma once
// Small readers and writers of the cluster operations' request and response bodies (private
// to src/api). Requests have passed the model's validation, so a member is absent or of its
// modeled type.
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/store/store.h"
#include "request_time.h"

namespace hf::api::cluster_request {

/// A ValidationException for a HyperPod rule that the model cannot express.
inline Status RuleViolation(std::string message) {
  return absl::InvalidArgumentError(message);
}

/// The string member `key` of `in`, or "" when absent.
inline std::string Str(const nlohmann::json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// The integer member `key` of `in` (e.g. MaxResults), or `fallback` when absent.
inline int Limit(const nlohmann::json& in, const char* key, int fallback) {
  auto it = in.find(key);
  return it != in.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

/// SortBy: NAME, else CREATION_TIME (the default).
inline store::SortBy SortByFrom(const nlohmann::json& in) {
  return Str(in, "SortBy") == "NAME" ? store::SortBy::kName : store::SortBy::kCreationTime;
}

/// SortOrder: Descending, else Ascending (the default).
inline bool Descending(const nlohmann::json& in) {
  return Str(in, "SortOrder") == "Descending";
}

/// The page members every List request shares: SortOrder, MaxResults (default 10) and
/// NextToken, into `q` (a store::ClusterQuery, NodeQuery or EventQuery).
template <class Query>
void ReadPage(const nlohmann::json& in, Query& q) {
  q.descending = Descending(in);
  q.limit = Limit(in, "MaxResults", 10);
  q.page_token = Str(in, "NextToken");
}

/// A ListClusters or ListClusterNodes query from the members both share: CreationTimeAfter,
/// CreationTimeBefore, SortBy and the page (ReadPage); the caller adds its name filter.
template <class Query>
Query CreatedQuery(const nlohmann::json& in) {
  Query q;
  q.created_after = RequestTimestamp(in, "CreationTimeAfter");
  q.created_before = RequestTimestamp(in, "CreationTimeBefore");
  q.sort_by = SortByFrom(in);
  ReadPage(in, q);
  return q;
}

/// `out` with NextToken set when there is a next page (left out on the last one).
inline nlohmann::json WithNextToken(nlohmann::json out, const std::string& next_token) {
  if (!next_token.empty()) out["NextToken"] = next_token;
  return out;
}

/// A Batch*ClusterNodes response: each list only when non-empty (Successful, Failed,
/// SuccessfulNodeLogicalIds, FailedNodeLogicalIds).
inline nlohmann::json BatchNodesResult(const nlohmann::json& ok_ids,
                                       const nlohmann::json& failed,
                                       const nlohmann::json& ok_logical,
                                       const nlohmann::json& failed_logical) {
  nlohmann::json out = nlohmann::json::object();
  if (!ok_ids.empty()) out["Successful"] = ok_ids;
  if (!failed.empty()) out["Failed"] = failed;
  if (!ok_logical.empty()) out["SuccessfulNodeLogicalIds"] = ok_logical;
  if (!failed_logical.empty()) out["FailedNodeLogicalIds"] = failed_logical;
  return out;
}

}  // namespace hf::api::cluster_request
