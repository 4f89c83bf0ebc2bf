#pragma once
// Reading one JSON value into a typed C++ member, for the codecs at the JSON boundaries (the
// agent protocol, agentapi/protocol.cc; the store's node bodies, store/node_json.cc). Each
// overload assigns only when the JSON type fits exactly: no conversion between strings,
// numbers and booleans, integers range-checked; otherwise it returns false and leaves `out`
// as it was, so that the caller decides whether that is an error or an absent member.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace hf {

bool JsonFits(const nlohmann::json& v, std::string& out);
bool JsonFits(const nlohmann::json& v, bool& out);
/// Integers only (not 1.5); within the target type's range.
bool JsonFits(const nlohmann::json& v, int& out);
bool JsonFits(const nlohmann::json& v, int64_t& out);
bool JsonFits(const nlohmann::json& v, unsigned& out);
bool JsonFits(const nlohmann::json& v, uint64_t& out);
/// Any number.
bool JsonFits(const nlohmann::json& v, double& out);
/// An array, keeping its string entries (others are skipped).
bool JsonFits(const nlohmann::json& v, std::vector<std::string>& out);

/// What JsonFits wants for T, for messages: "a string", "an integer", ...
template <typename T>
constexpr const char* JsonTypeName() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  if constexpr (std::is_same_v<T, double>) return "a number";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "an array";
  if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  return "an integer";
}

}  // namespace hf
