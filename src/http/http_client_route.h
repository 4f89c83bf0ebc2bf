#pragma once
// The HTTP client's pure part: where a request goes. A URL split into what a connection
// needs, and the proxy the environment names for it, by the rules libcurl 7.88 (Debian 12's,
// which the client replaced) applies: http_proxy (lower case only), https_proxy or
// HTTPS_PROXY, all_proxy or ALL_PROXY, and no_proxy or NO_PROXY.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::http::client {

/// An absolute http(s) URL taken apart.
struct Url {
  std::string scheme;  ///< "http" or "https" (lower case)
  std::string host;    ///< a name, or an IP literal (IPv6 without brackets)
  uint16_t port = 0;   ///< given, or 80 / 443
  std::string target;  ///< path and query, "/" when the URL has none
  bool host_is_ip = false;

  /// "host:port" as the Host header and a CONNECT request spell it (IPv6 in brackets; the
  /// port omitted when it is the scheme's default and `always_port` is false).
  std::string Authority(bool always_port) const;
  /// scheme://authority/target (the absolute form a proxy is sent).
  std::string Absolute() const;
};

/// Parses "scheme://host[:port][/path][?query]". Errors: InvalidArgument naming the URL
/// when the scheme is not http or https, the host is empty, the port is not 1-65535, or the
/// URL has user info or a fragment.
StatusOr<Url> ParseUrl(std::string_view url);

/// An HTTP forward proxy taken from the environment.
struct Proxy {
  std::string variable;       ///< the environment variable it came from, e.g. "https_proxy"
  std::string host;           ///< name or IP literal (IPv6 without brackets)
  uint16_t port = 1080;       ///< libcurl's default when the variable names none
  std::string authorization;  ///< "Basic <base64>" from user:password@, else empty
};

/// Reads one environment variable; nullopt when unset.
using Getenv = std::function<std::optional<std::string>(const char* name)>;

/// True when `host` (a name or an IP literal) matches the no_proxy list: "*" matches every
/// host; a name matches an entry equal to it or a parent domain (a leading '.' is optional,
/// case-insensitive); an IP literal matches an equal address or a CIDR block ("10.0.0.0/8").
/// Entries are separated by commas; spaces around them are ignored; ports are not compared.
bool NoProxyMatches(std::string_view no_proxy, std::string_view host);

/// The proxy for `url` per the environment (see the file comment; an empty variable is
/// unset), or nullopt for a direct connection. Errors: InvalidArgument naming the variable
/// when its value is not an http:// proxy URL (libcurl's https:// and socks proxies are not
/// supported here).
StatusOr<std::optional<Proxy>> ProxyFor(const Url& url, const Getenv& getenv);

}  // namespace hf::http::client
