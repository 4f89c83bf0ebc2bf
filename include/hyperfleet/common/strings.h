#pragma once
// Bridges std::string_view and Abseil's string functions. Debian's Abseil is built with
// ABSL_OPTION_USE_STD_STRING_VIEW 0, so absl::string_view is a type of its own and neither
// converts to the other implicitly; these views convert without copying.
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace hf {

/// `s` as an absl::string_view (same bytes, no copy).
inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

/// `s` as a std::string_view (same bytes, no copy).
inline std::string_view StdView(absl::string_view s) { return {s.data(), s.size()}; }

/// `s` without leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r):
/// absl::StripAsciiWhitespace for std::string_view.
inline std::string_view StripAsciiWhitespace(std::string_view s) {
  return StdView(absl::StripAsciiWhitespace(AbslView(s)));
}

}  // namespace hf
