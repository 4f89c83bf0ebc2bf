#pragma once
// Synchronous HTTP/1.1 client (Boost.Beast + OpenSSL): the CLI's, the node agent's and the S3
// bundle source's one client for http and https.
#include <memory>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::http {

/// How an HttpClient checks https servers.
struct HttpClientOptions {
  /// Lowercase hex SHA-256 of the server certificate's DER (64 digits, what
  /// http::CertificateSha256 and `openssl x509 -fingerprint -sha256` print; colons and upper
  /// case are accepted). Set: an https server must present exactly that certificate, and
  /// neither a CA nor the host name is checked (a self-signed certificate the caller was
  /// handed, e.g. the agent endpoint's). Empty: the certificate must chain to the system's CA
  /// store (OpenSSL's default paths, /etc/ssl/certs; SSL_CERT_FILE / SSL_CERT_DIR replace
  /// them) and name the URL's host (DNS name or IP address); SNI is sent for names.
  std::string pinned_sha256;
  /// True: never through a proxy, whatever the environment says (a server on this host,
  /// e.g. a local Kubernetes apiserver, must not be sent to the server's egress proxy).
  bool direct = false;
};

/// A small synchronous HTTP/1.1 client. It keeps one connection open between requests to
/// the same host, port and proxy (keep-alive; a reused connection the server had closed is
/// reopened and the request sent again). Not thread-safe: use one client per thread.
/// Proxies come from the environment at each request, by libcurl's rules: http_proxy (lower
/// case only) for http, https_proxy or HTTPS_PROXY for https (tunnelled with CONNECT),
/// all_proxy / ALL_PROXY otherwise, none for hosts matching no_proxy / NO_PROXY (names and
/// parent domains, IP addresses and CIDR blocks, "*"); http:// proxies only, default port
/// 1080, user:password@ sent as Basic Proxy-Authorization. Redirects are not followed.
class HttpClient {
 public:
  HttpClient();
  explicit HttpClient(HttpClientOptions options);
  ~HttpClient();
  HttpClient(HttpClient&& other) noexcept;
  HttpClient& operator=(HttpClient&& other) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends `request` to `base_url` (scheme, host, port and optional path prefix, e.g.
  /// "http://127.0.0.1:9080" or "https://10.0.0.1:8443") joined with `request.target`, and
  /// waits for the whole response (Content-Length, chunked, or until the server closes).
  /// `request.headers` are sent in order and as spelled, after Host (unless the request sets
  /// it); Content-Length is added for a body or a POST unless the request sets it; nothing
  /// else is added (no Content-Type, no Expect). `timeout_seconds` bounds the whole exchange,
  /// name resolution, connecting, TLS and proxy included (<= 0: no limit). Returns the final
  /// response (status, headers in arrival order, body; 1xx interim responses skipped)
  /// whatever its status code. Errors: InvalidArgument naming the URL for a malformed URL,
  /// a scheme other than http/https, a pin that is not 64 hex digits, or a malformed proxy
  /// variable (naming it); Unavailable, naming the method and URL, when the request could
  /// not be completed (name not resolved, connection refused, timeout, TLS handshake or
  /// certificate check failed (naming both fingerprints when a pin does not match), proxy
  /// refused, malformed response, ...).
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
