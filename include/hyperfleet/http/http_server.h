#pragma once
// The control plane's HTTP/1.1 transport: asynchronous (Boost.Beast on Boost.Asio), so that
// thousands of idle keep-alive connections cost memory, not threads.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::http {

/// Handles one request. It is called synchronously on one of the server's I/O threads, so
/// it must be thread-safe (several connections call it at once) and must not block long:
/// while it runs, that thread serves no other connection. It should not throw; if it does,
/// the client gets 500 {"__type":"InternalFailure",...}. It must not call HttpServer::stop().
using HttpHandler = std::function<HttpResponse(HttpRequest&&)>;

/// Server options.
struct HttpServerOptions {
  std::string host = "127.0.0.1";         ///< IP address or resolvable name to bind
  uint16_t port = 9080;                   ///< 0 = pick a free port (see HttpServer::port())
  int io_threads = 2;                     ///< threads running the event loop (>= 1)
  std::size_t max_body_bytes = 8u << 20;  ///< larger bodies get 413 + an AWS-style error
  /// Deadline for one whole request (start line, header fields and body), counted from the
  /// moment the connection starts waiting for it: its accept, or the end of the previous
  /// response on a keep-alive connection. So it is also the keep-alive idle timeout. A
  /// connection idle past it is closed without a response; one with part of a request gets
  /// 408 {"__type":"RequestTimeoutException",...} and is closed (botocore retries that).
  /// Bounds slow clients holding connections (and file descriptors) open, like nginx's
  /// client_header_timeout/client_body_timeout (60 s defaults) and Envoy's
  /// request_headers_timeout/idle_timeout.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(60);
  /// Limit on a request's start line plus header fields, in bytes; larger headers get 431.
  std::size_t max_header_bytes = 64u << 10;
  /// Limit, in seconds, on writing one response, and on reading a request body once its
  /// header has arrived (within request_timeout too); a connection that exceeds it is closed
  /// (guards against clients that stall mid-message).
  int io_timeout_seconds = 60;
  /// How long stop() lets responses already being written finish, in seconds, before their
  /// connections are cut.
  int stop_grace_seconds = 5;
  /// An already bound and listening socket to serve instead of binding host:port (-1 =
  /// none). The server adopts a duplicate, so the caller keeps and closes its own fd. Used
  /// for sockets created inside another network namespace (the local provider's IMDS).
  int listen_fd = -1;
  /// HTTPS: when the certificate is set, every connection first completes a TLS handshake
  /// (TLS 1.2 or later, within request_timeout) with this PEM certificate (chain) and PEM
  /// private key; a connection that does not (plain HTTP included) is closed without a
  /// byte of HTTP, so nothing it sent reaches the handler. Empty: plain HTTP. Not combinable
  /// with upgrades (wants_upgrade/on_upgrade).
  std::string tls_certificate_pem;
  std::string tls_private_key_pem;
  /// Connection takeover for protocol upgrades (WebSocket sessions). When both are set and
  /// `wants_upgrade` returns true for a complete request (called on an I/O thread: keep it
  /// cheap, e.g. a path check), the server calls `on_upgrade` instead of the handler and
  /// forgets the connection: `on_upgrade` receives the request, the connected socket's file
  /// descriptor (it then owns it and must close it) and the bytes already read past the
  /// request (usually none: WebSocket clients wait for the 101 before sending). It also runs
  /// on an I/O thread, so it must hand the connection to its own thread and return at once;
  /// it must not throw. Taken-over connections are not stopped by stop(): their owner is.
  std::function<bool(const HttpRequest&)> wants_upgrade;
  std::function<void(HttpRequest&& request, int fd, std::string buffered)> on_upgrade;
};

/// A running HTTP server. Destroying it stops it (in-flight requests finish first).
///
/// Each response carries `Server: hyperfleet` (unless the handler sets one) and a
/// Content-Length computed from its body; the handler's Content-Length, Transfer-Encoding
/// and Connection headers are ignored because the transport owns message framing. Responses
/// to HEAD carry the Content-Length of the body but not the body. Bodies of 1xx, 204 and 304
/// responses are dropped.
class HttpServer {
 public:
  virtual ~HttpServer() = default;
  /// The bound port (useful with port 0).
  virtual uint16_t port() const = 0;
  /// Stops accepting, closes idle connections, lets running handlers finish and their
  /// responses be written (for up to stop_grace_seconds), then joins the I/O threads.
  /// Idempotent. Must not be called from the handler (it would join its own thread).
  virtual void stop() = 0;

  /// Binds and starts serving. Errors: InvalidArgument for nonsensical options (io_threads
  /// or I/O timeout below 1, request timeout below 1 ms, negative stop grace, no handler;
  /// a TLS certificate without its key or with upgrades, or one OpenSSL refuses);
  /// Unavailable, naming the address, when it cannot be resolved or bound.
  /// Malformed HTTP gets 400 {"__type":"SerializationException",...}; bodies over
  /// max_body_bytes get 413 with body {"__type":"RequestEntityTooLargeException",
  /// "message":...}; both close the connection.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                     HttpHandler handler);
};

}  // namespace hf::http
