#pragma once
// Transport-neutral HTTP messages. Operations and SigV4 see only these; the socket
// transports live in src/http/ (server: http_server.cc on Boost.Beast, client:
// http_client.cc, Beast and OpenSSL too).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hf::http {

/// Header fields in arrival order, names as sent (lookups are case-insensitive).
using Headers = std::vector<std::pair<std::string, std::string>>;

/// One HTTP request as received.
struct HttpRequest {
  std::string method;  ///< "POST", "GET", ...
  std::string target;  ///< request-target exactly as received: path plus optional "?query"
  Headers headers;
  std::string body;
  /// The peer's IP address as text (e.g. "10.224.4.2"), set by the server; empty if unknown.
  std::string remote_address{};

  /// First header named `name` (case-insensitive), if present.
  std::optional<std::string_view> header(std::string_view name) const;
  /// The path part of `target` (before '?').
  std::string_view path() const;
  /// The query part of `target` (after '?'; empty when none).
  std::string_view query() const;
};

/// One HTTP response to send.
struct HttpResponse {
  int status = 200;
  Headers headers;
  std::string body;
};

/// Case-insensitive ASCII comparison of header names.
bool HeaderNameEquals(std::string_view a, std::string_view b);

}  // namespace hf::http
