#include "request_time.h"

#include <string>

#include "absl/time/time.h"

namespace hf::api {

std::optional<SystemTime> RequestTimestamp(const nlohmann::json& in, const char* key) {
  auto it = in.find(key);
  if (it == in.end()) return std::nullopt;
  if (it->is_number()) return FromEpochSeconds(it->get<double>());
  if (it->is_string()) {
    absl::Time t;
    std::string err;
    const std::string s = it->get<std::string>();
    if (absl::ParseTime(absl::RFC3339_full, absl::string_view(s.data(), s.size()), &t, &err)) {
      return absl::ToChronoTime(t);
    }
  }
  return std::nullopt;
}

}  // namespace hf::api
