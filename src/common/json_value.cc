#include "hyperfleet/common/json_value.h"

#include <limits>

namespace hf {

using nlohmann::json;

bool JsonFits(const json& v, std::string& out) {
  if (!v.is_string()) return false;
  out = v.get_ref<const std::string&>();
  return true;
}

bool JsonFits(const json& v, bool& out) {
  if (!v.is_boolean()) return false;
  out = v.get<bool>();
  return true;
}

bool JsonFits(const json& v, int64_t& out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return false;
  }
  out = v.get<int64_t>();
  return true;
}

bool JsonFits(const json& v, int& out) {
  int64_t x = 0;
  if (!JsonFits(v, x) || x < std::numeric_limits<int>::min() ||
      x > std::numeric_limits<int>::max()) {
    return false;
  }
  out = static_cast<int>(x);
  return true;
}

bool JsonFits(const json& v, uint64_t& out) {
  // A value built in C++ from a signed integer is "integer", one parsed from text "unsigned".
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return false;
  out = static_cast<uint64_t>(v.get<int64_t>());
  return true;
}

bool JsonFits(const json& v, unsigned& out) {
  uint64_t x = 0;
  if (!JsonFits(v, x) || x > std::numeric_limits<unsigned>::max()) return false;
  out = static_cast<unsigned>(x);
  return true;
}

bool JsonFits(const json& v, double& out) {
  if (!v.is_number()) return false;
  out = v.get<double>();
  return true;
}

bool JsonFits(const json& v, std::vector<std::string>& out) {
  if (!v.is_array()) return false;
  out.clear();
  for (const auto& s : v) {
    if (s.is_string()) out.push_back(s.get_ref<const std::string&>());
  }
  return true;
}

}  // namespace hf
