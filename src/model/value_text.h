#pragma once
// How the service model's validation messages print names and values (private to hf_model):
// AWS's wording, bounded in size whatever the input.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hf::model {

/// `name` with its first letter lowercased ("InstanceGroups" -> "instanceGroups"), as AWS
/// names members in validation messages.
std::string LowerCamel(std::string_view name);

/// The number of UTF-8 code points in `s` (continuation bytes not counted).
size_t CodePoints(std::string_view s);

/// The first `limit` code points of `s`.
std::string_view PrefixCodePoints(std::string_view s, size_t limit);

/// A short, Java-collection-like rendering of `v` ("[a, b]", "{K=V}"), as AWS prints values,
/// cut to `max_chars` code points (then "..." is appended); nesting beyond `max_depth` prints
/// as "...".
std::string RenderValue(const nlohmann::json& v, size_t max_chars, int max_depth);

}  // namespace hf::model
