#include "model/value_text.h"

#include <cstdint>

namespace hf::model {

using nlohmann::json;

std::string LowerCamel(std::string_view name) {
  std::string out(name);
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z')
    out[0] = static_cast<char>(out[0] - 'A' + 'a');
  return out;
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `limit` code points of `s`.
std::string_view PrefixCodePoints(std::string_view s, size_t limit) {
  size_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (seen == limit) return s.substr(0, i);
      ++seen;
    }
  }
  return s;
}

namespace {

// Appends a short, Java-collection-like rendering of `v` ("[a, b]", "{K=V}"), as AWS prints
// values. Stops once `out` exceeds `budget` bytes, so depth and size stay bounded.
void Render(const json& v, std::string& out, size_t budget, int depth, int max_depth) {
  if (out.size() > budget || depth > max_depth) {
    out += "...";
    return;
  }
  switch (v.type()) {
    case json::value_t::string:
      out += v.get_ref<const std::string&>();
      return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& item : v) {
        if (!first) out += ", ";
        first = false;
        Render(item, out, budget, depth + 1, max_depth);
        if (out.size() > budget) return;
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += it.key();
        out += '=';
        Render(it.value(), out, budget, depth + 1, max_depth);
        if (out.size() > budget) return;
      }
      out += '}';
      return;
    }
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
      out += std::to_string(v.get<std::int64_t>());
      return;
    case json::value_t::number_unsigned:
      out += std::to_string(v.get<std::uint64_t>());
      return;
    case json::value_t::number_float:
      // Scalar dump: no recursion, and the replace handler keeps it exception-free.
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    default:
      out += "?";
      return;
  }
}

}  // namespace

std::string RenderValue(const json& v, size_t max_chars, int max_depth) {
  std::string out;
  Render(v, out, 4 * max_chars, 0, max_depth);
  std::string_view head = PrefixCodePoints(out, max_chars);
  if (head.size() < out.size()) return std::string(head) + "...";
  return out;
}

}  // namespace hf::model
