#include "hyperfleet/common/uri.h"

#include "absl/strings/str_cat.h"

namespace hf {
namespace {

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte an escape at s[i] (a '%') stands for, or -1 when it is not '%' + two hex digits.
int EscapedByte(std::string_view s, size_t i) {
  if (i + 2 >= s.size()) return -1;
  const int hi = HexValue(s[i + 1]);
  const int lo = HexValue(s[i + 2]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

enum class Plus { kLiteral, kSpace };
enum class BadEscape { kError, kLiteral };

StatusOr<std::string> Decode(std::string_view s, Plus plus, BadEscape bad) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '+' && plus == Plus::kSpace) {
      out.push_back(' ');
    } else if (c == '%') {
      const int byte = EscapedByte(s, i);
      if (byte >= 0) {
        out.push_back(static_cast<char>(byte));
        i += 2;
      } else if (bad == BadEscape::kLiteral) {
        out.push_back(c);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("malformed percent-escape at offset ", i));
      }
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Calls `pair(name, value)` for each non-empty '&'-separated pair of `query`, undecoded.
template <class F>
void ForEachPair(std::string_view query, F pair) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view p = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (p.empty()) continue;
    const size_t eq = p.find('=');
    pair(p.substr(0, eq), eq == std::string_view::npos ? std::string_view() : p.substr(eq + 1));
  }
}

}  // namespace

void AppendUriEncoded(std::string_view s, bool keep_slash, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out->push_back(ch);
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
    }
  }
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  AppendUriEncoded(s, keep_slash, &out);
  return out;
}

StatusOr<std::string> UriDecode(std::string_view s) {
  return Decode(s, Plus::kLiteral, BadEscape::kError);
}

StatusOr<std::string> FormDecode(std::string_view s) {
  return Decode(s, Plus::kSpace, BadEscape::kError);
}

std::string FormDecodeLenient(std::string_view s) {
  return *Decode(s, Plus::kSpace, BadEscape::kLiteral);  // cannot fail
}

StatusOr<std::vector<QueryParam>> ParseQuery(std::string_view query) {
  std::vector<QueryParam> out;
  Status status;
  ForEachPair(query, [&](std::string_view name, std::string_view value) {
    if (!status.ok()) return;
    StatusOr<std::string> n = FormDecode(name);
    StatusOr<std::string> v = FormDecode(value);
    if (!n.ok() || !v.ok()) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "query parameter '", std::string(name), "': ",
          (n.ok() ? v.status() : n.status()).message()));
      return;
    }
    out.push_back({*std::move(n), *std::move(v)});
  });
  if (!status.ok()) return status;
  return out;
}

std::vector<QueryParam> ParseQueryLenient(std::string_view query) {
  std::vector<QueryParam> out;
  ForEachPair(query, [&](std::string_view name, std::string_view value) {
    out.push_back({FormDecodeLenient(name), FormDecodeLenient(value)});
  });
  return out;
}

}  // namespace hf
