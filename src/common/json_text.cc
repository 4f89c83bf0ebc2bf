#include "hyperfleet/common/json_text.h"

#include <nlohmann/json.hpp>

namespace hf::json_text {
namespace {

std::string Dump(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// True when dump() copies `s` between its quotes unchanged: printable ASCII without '"'
/// and '\'. The common case (names, ids, times) takes no allocation.
bool Plain(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

}  // namespace

void AppendString(std::string& out, std::string_view s) {
  if (!Plain(s)) {
    out += Dump(nlohmann::json(s));
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

void AppendNumber(std::string& out, double v) { out += Dump(nlohmann::json(v)); }

}  // namespace hf::json_text
