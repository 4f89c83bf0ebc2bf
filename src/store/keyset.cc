#include "store/keyset.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"

namespace hf::store {

using nlohmann::json;

std::string EncodePageToken(const json& key, const std::string& tie) {
  return absl::BytesToHexString(AbslView(json{{"k", key}, {"i", tie}}.dump()));
}

StatusOr<PageToken> DecodePageToken(const std::string& token, bool numeric_key) {
  auto bad = [] { return absl::InvalidArgumentError("Invalid pagination token (NextToken)."); };
  // Only what EncodePageToken writes: an even number of lowercase hex digits.
  if (token.size() % 2 != 0 || token.size() > 8192 ||
      token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return bad();
  }
  json j = json::parse(absl::HexStringToBytes(AbslView(token)), nullptr,
                       /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("k") || !j.contains("i") || !j["i"].is_string()) {
    return bad();
  }
  if (numeric_key ? !j["k"].is_number() : !j["k"].is_string()) return bad();
  return PageToken{j["k"], j["i"].get<std::string>()};
}

std::string ContainsPattern(const std::string& needle) {
  std::string p = "%";
  for (char c : needle) {
    if (c == '%' || c == '_' || c == '\\') p.push_back('\\');
    p.push_back(c);
  }
  p.push_back('%');
  return p;
}

std::string CreatedFilter::sql() const {
  return absl::StrCat(
      after ? absl::StrCat(" AND ", time_col, " > ?", first) : "",
      before ? absl::StrCat(" AND ", time_col, " < ?", first + 1) : "",
      contains.empty() ? ""
                       : absl::StrCat(" AND ", name_col, " LIKE ?", first + 2, " ESCAPE '\\'"));
}

void CreatedFilter::bind(sqlite::Statement& s) const {
  if (after) s.bind(first, ToEpochSeconds(*after));
  if (before) s.bind(first + 1, ToEpochSeconds(*before));
  if (!contains.empty()) s.bind(first + 2, ContainsPattern(contains));
}

Status Keyset::start(const std::string& page_token) {
  if (page_token.empty()) return absl::OkStatus();
  HF_ASSIGN_OR_RETURN(after, DecodePageToken(page_token, numeric_key));
  return absl::OkStatus();
}

std::string Keyset::sql(int key_param, int limit_param) const {
  const char* dir = descending ? "DESC" : "ASC";
  return absl::StrCat(
      after ? absl::StrCat(" AND (", key_col, ", ", tie_col, ") ", descending ? "<" : ">",
                           " (?", key_param, ", ?", key_param + 1, ")")
            : "",
      " ORDER BY ", key_col, " ", dir, ", ", tie_col, " ", dir, " LIMIT ?", limit_param);
}

void Keyset::bind(sqlite::Statement& s, int key_param, int limit_param, int limit) const {
  if (after) {
    if (numeric_key) {
      s.bind(key_param, after->key.get<double>());
    } else {
      s.bind(key_param, after->key.get<std::string>());
    }
    s.bind(key_param + 1, after->tie);
  }
  s.bind(limit_param, static_cast<int64_t>(limit) + 1);
}

}  // namespace hf::store
