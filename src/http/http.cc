#include "hyperfleet/http/http.h"

namespace hf::http {

// Hand-written because Debian's Abseil is built with its own string_view, not std's.
bool HeaderNameEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (HeaderNameEquals(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::query() const {
  std::string_view t = target;
  auto q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

}  // namespace hf::http
