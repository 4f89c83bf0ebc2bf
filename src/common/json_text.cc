#include "hyperfleet/common/json_text.h"

#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

namespace hf::json_text {
namespace {

std::string Dump(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// kPlain[c]: dump() writes byte c of a string as it is, whatever surrounds it (printable
/// ASCII but '"' and '\').
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c <= 0x7e; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

/// True when dump() copies `s` between its quotes unchanged. The common case (names, ids,
/// times) takes no allocation.
bool Plain(std::string_view s) {
  for (const char c : s) {
    if (!kPlain[static_cast<unsigned char>(c)]) return false;
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

void AppendNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += Dump(nlohmann::json(v));  // null
    return;
  }
  // The formatter dump() itself calls for a finite double (serializer::dump_float), into a
  // buffer of its size; dump() would add a serializer, a locale lookup and two allocations.
  std::array<char, 64> buf;
  const char* end = nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), static_cast<size_t>(end - buf.data()));
}

}  // namespace hf::json_text
