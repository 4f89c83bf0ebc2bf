#pragma once
// NextTokens of keyset pagination, the one codec for every list page (the store's list
// queries and the governance List operations): a token is the lowercase hex of a small JSON
// document {"k": <sort key>, "i": <tie-breaker>}, and the next page starts strictly after
// that position in the requested order, so pages stay stable under concurrent inserts.
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"

namespace hf::store {

/// The position a NextToken names: sort key (a number or a string) and tie-breaker.
struct PageToken {
  nlohmann::json key;
  std::string tie;
};

/// The NextToken of the page after the row with sort key `key` and tie-breaker `tie`.
std::string EncodePageToken(const nlohmann::json& key, const std::string& tie);

/// The position in `token`. Errors: InvalidArgument "Invalid pagination token (NextToken)."
/// for a token that is not ours, or whose key is not a number (`numeric_key`) or a string.
StatusOr<PageToken> DecodePageToken(const std::string& token, bool numeric_key);

}  // namespace hf::store
