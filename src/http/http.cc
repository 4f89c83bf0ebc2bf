#include "hyperfleet/http/http.h"

#include "absl/strings/match.h"

namespace hf::http {

bool HeaderNameEquals(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(a, b);
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
