#include "http/http_client_route.h"

#include <arpa/inet.h>

#include <array>
#include <charconv>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/uri.h"

namespace hf::http::client {
namespace {

// An IPv4 or IPv6 literal as 16 bytes (IPv4 in the first 4) and its family.
struct Ip {
  int family = 0;
  std::array<unsigned char, 16> bytes{};
};

std::optional<Ip> ParseIp(std::string_view text) {
  if (!text.empty() && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  const std::string s(text);
  Ip ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET6;
    return ip;
  }
  return std::nullopt;
}

// `ip` inside `entry` ("addr" or "addr/bits"); false for entries that are not IP literals.
bool IpMatches(const Ip& ip, std::string_view entry) {
  std::string_view addr = entry;
  int bits = -1;
  if (const auto slash = entry.find('/'); slash != std::string_view::npos) {
    addr = entry.substr(0, slash);
    const std::string_view digits = entry.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  }
  const std::optional<Ip> net = ParseIp(addr);
  if (!net || net->family != ip.family) return false;
  const int width = ip.family == AF_INET ? 32 : 128;
  if (bits < 0) bits = width;
  if (bits > width) return false;
  for (int i = 0; i < bits; ++i) {
    const int byte = i / 8, mask = 0x80 >> (i % 8);
    if ((ip.bytes[byte] & mask) != (net->bytes[byte] & mask)) return false;
  }
  return true;
}

std::optional<std::string> NonEmpty(const Getenv& getenv, const char* name) {
  std::optional<std::string> v = getenv(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

StatusOr<uint16_t> ParsePort(std::string_view digits, std::string_view what) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      value == 0 || value > 65535) {
    return absl::InvalidArgumentError(std::string(what) + ": port \"" + std::string(digits) +
                                      "\" is not 1-65535");
  }
  return static_cast<uint16_t>(value);
}

// Splits "host[:port]" / "[v6][:port]" into host (no brackets) and port text.
Status SplitHostPort(std::string_view authority, std::string_view what, std::string* host,
                     std::string_view* port) {
  *port = {};
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(std::string(what) + ": unterminated [IPv6] host");
    }
    *host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return absl::InvalidArgumentError(std::string(what) + ": junk after [IPv6] host");
      }
      *port = rest.substr(1);
    }
  } else {
    const auto colon = authority.rfind(':');
    *host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) *port = authority.substr(colon + 1);
  }
  if (host->empty()) return absl::InvalidArgumentError(std::string(what) + ": no host");
  return absl::OkStatus();
}

}  // namespace

std::string Url::Authority(bool always_port) const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const uint16_t default_port = scheme == "https" ? 443 : 80;
  if (always_port || port != default_port) out += ":" + std::to_string(port);
  return out;
}

std::string Url::Absolute() const { return scheme + "://" + Authority(false) + target; }

StatusOr<Url> ParseUrl(std::string_view text) {
  const std::string what = "URL \"" + std::string(text) + "\"";
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) {
    return absl::InvalidArgumentError(what + ": no scheme (http:// or https://)");
  }
  Url url;
  url.scheme = absl::AsciiStrToLower(AbslView(text.substr(0, sep)));
  if (url.scheme != "http" && url.scheme != "https") {
    return absl::InvalidArgumentError(what + ": scheme \"" + url.scheme +
                                      "\" is not http or https");
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find('#') != std::string_view::npos) {
    return absl::InvalidArgumentError(what + ": a fragment (#) is not sent");
  }
  const auto path = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, path);
  if (authority.find('@') != std::string_view::npos) {
    return absl::InvalidArgumentError(what + ": user info (user@) is not supported");
  }
  std::string_view port;
  HF_RETURN_IF_ERROR(SplitHostPort(authority, what, &url.host, &port));
  if (port.empty()) {
    url.port = url.scheme == "https" ? 443 : 80;
  } else {
    HF_ASSIGN_OR_RETURN(url.port, ParsePort(port, what));
  }
  url.host_is_ip = ParseIp(url.host).has_value();
  if (!url.host_is_ip) url.host = absl::AsciiStrToLower(AbslView(url.host));
  url.target = path == std::string_view::npos ? "/" : std::string(rest.substr(path));
  if (url.target.front() == '?') url.target.insert(0, "/");
  return url;
}

bool NoProxyMatches(std::string_view no_proxy, std::string_view host) {
  const std::optional<Ip> ip = ParseIp(host);
  const std::string name = absl::AsciiStrToLower(AbslView(host));
  for (absl::string_view raw : absl::StrSplit(AbslView(no_proxy), ',')) {
    std::string_view entry = StripAsciiWhitespace(StdView(raw));
    if (entry.empty()) continue;
    if (entry == "*") return true;
    if (ip) {
      if (IpMatches(*ip, entry)) return true;
      continue;
    }
    std::string domain = absl::AsciiStrToLower(AbslView(entry));
    if (!domain.empty() && domain.front() == '.') domain.erase(0, 1);
    if (!domain.empty() && domain.back() == '.') domain.pop_back();
    if (domain.empty()) continue;
    if (name == domain) return true;
    if (name.size() > domain.size() && absl::EndsWith(name, domain) &&
        name[name.size() - domain.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

StatusOr<std::optional<Proxy>> ProxyFor(const Url& url, const Getenv& getenv) {
  std::optional<std::string> no_proxy = NonEmpty(getenv, "no_proxy");
  if (!no_proxy) no_proxy = NonEmpty(getenv, "NO_PROXY");
  if (no_proxy && NoProxyMatches(*no_proxy, url.host)) return std::nullopt;

  // HTTP_PROXY (upper case) is ignored for http: a CGI program sees a request's "Proxy:"
  // header as HTTP_PROXY ("httpoxy"); libcurl ignores it for the same reason.
  std::string variable = url.scheme + "_proxy";
  std::optional<std::string> value = NonEmpty(getenv, variable.c_str());
  if (!value && url.scheme != "http") {
    variable = absl::AsciiStrToUpper(variable);
    value = NonEmpty(getenv, variable.c_str());
  }
  for (const char* fallback : {"all_proxy", "ALL_PROXY"}) {
    if (value) break;
    variable = fallback;
    value = NonEmpty(getenv, fallback);
  }
  if (!value) return std::nullopt;

  const std::string what = variable + "=\"" + *value + "\"";
  std::string_view rest = StripAsciiWhitespace(*value);
  if (const auto sep = rest.find("://"); sep != std::string_view::npos) {
    const std::string scheme = absl::AsciiStrToLower(AbslView(rest.substr(0, sep)));
    if (scheme != "http") {
      return absl::InvalidArgumentError(what + ": proxy scheme \"" + scheme +
                                        "\" is not supported (http:// only)");
    }
    rest = rest.substr(sep + 3);
  }
  rest = rest.substr(0, rest.find('/'));  // a trailing "/" or path is ignored, as libcurl does
  Proxy proxy;
  proxy.variable = variable;
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    auto userinfo = UriDecode(rest.substr(0, at));
    if (!userinfo.ok()) {
      return absl::InvalidArgumentError(what + ": malformed user:password");
    }
    proxy.authorization = "Basic " + absl::Base64Escape(AbslView(*userinfo));
    rest = rest.substr(at + 1);
  }
  std::string_view port;
  HF_RETURN_IF_ERROR(SplitHostPort(rest, what, &proxy.host, &port));
  if (!port.empty()) {
    HF_ASSIGN_OR_RETURN(proxy.port, ParsePort(port, what));
  }
  return proxy;
}

}  // namespace hf::http::client
