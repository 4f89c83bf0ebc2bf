#pragma once
// Synchronous HTTP/1.1 client used by the CLI to talk to the control plane (libcurl).
#include <memory>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::http {

/// A small synchronous HTTP/1.1 client. It owns one libcurl easy handle, so consecutive
/// requests to the same host reuse one keep-alive connection. Not thread-safe: use one
/// client per thread. Proxy environment variables (http_proxy, no_proxy) are honoured as
/// libcurl does by default; redirects are not followed.
class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(HttpClient&& other) noexcept;
  HttpClient& operator=(HttpClient&& other) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends `request` to `base_url` (scheme, host, port and optional path prefix, e.g.
  /// "http://127.0.0.1:9080") joined with `request.target`, and waits for the whole response.
  /// `request.headers` are sent in order and as spelled; libcurl adds Host and Content-Length
  /// (and "Expect: 100-continue" for bodies over 1 MiB) unless the request sets them, and no
  /// Content-Type unless the request has one. `timeout_seconds` bounds the whole exchange
  /// (<= 0: no limit). Returns the final response (status, headers in arrival order, body)
  /// whatever its status code. Errors: Unavailable, naming the method and URL, when the
  /// request could not be completed (connection refused, timeout, malformed response, ...).
  StatusOr<HttpResponse> Send(const std::string& base_url, const HttpRequest& request,
                              int timeout_seconds);

  /// Number of TCP connections this client has opened so far (keep-alive diagnostics:
  /// requests over a reused connection add nothing).
  long connections_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hf::http
