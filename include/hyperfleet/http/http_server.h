#pragma once
// The control plane's HTTP/1.1 transport: asynchronous (Boost.Beast on Boost.Asio), so that
// thousands of idle keep-alive connections cost memory, not threads.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hyperfleet/http/http.h"
#include "hyperfleet/common/status.h"

namespace hf::http {

/// Handles one request; runs on an I/O thread, must be thread-safe and must not block long.
using HttpHandler = std::function<HttpResponse(HttpRequest&&)>;

/// Server options.
struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 9080;                    ///< 0 = pick a free port (see HttpServer::port())
  int io_threads = 2;                      ///< threads running the event loop
  std::size_t max_body_bytes = 8u << 20;   ///< larger bodies get 413 + an AWS-style error
  int idle_timeout_seconds = 300;          ///< keep-alive connections idle longer are closed
};

/// A running HTTP server. Destroying it stops it (in-flight requests finish first).
class HttpServer {
 public:
  virtual ~HttpServer() = default;
  /// The bound port (useful with port 0).
  virtual uint16_t port() const = 0;
  /// Stops accepting, closes connections, joins the I/O threads. Idempotent.
  virtual void stop() = 0;

  /// Binds and starts serving. Errors: Unavailable when the address cannot be bound.
  /// Malformed HTTP gets 400; bodies over max_body_bytes get 413 with body
  /// {"__type":"RequestEntityTooLargeException","message":...}.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                     HttpHandler handler);
};

}  // namespace hf::http
