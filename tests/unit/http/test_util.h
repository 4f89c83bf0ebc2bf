#pragma once
// Helpers shared by the HTTP tests: servers on an ephemeral loopback port, a synchronous
// Beast client, raw sockets and deadline-bounded waits (no sleeps as synchronization).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "hyperfleet/http/http_server.h"

namespace hf::http::testing {

namespace bhttp = boost::beast::http;

/// Starts a server on 127.0.0.1, port 0, with `options` otherwise unchanged; fails the
/// test (returns null) when it cannot start.
std::unique_ptr<HttpServer> StartServer(HttpServerOptions options, HttpHandler handler);

/// 200 response echoing the request: body = request body, X-Method / X-Target headers, and
/// two headers in non-alphabetical order (X-Second, X-First) to check order is preserved.
HttpResponse Echo(HttpRequest&& request);

/// A synchronous Beast client connection to 127.0.0.1:port.
class BeastClient {
 public:
  explicit BeastClient(uint16_t port);
  /// Writes `request` (after prepare_payload()) and reads one response.
  bhttp::response<bhttp::string_body> RoundTrip(bhttp::request<bhttp::string_body> request);
  boost::asio::ip::tcp::socket& socket() { return socket_; }
  boost::beast::flat_buffer& buffer() { return buffer_; }
  /// True when the server closed the connection within `deadline` (bytes read are dropped).
  bool WaitForEof(std::chrono::milliseconds deadline);

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

/// A blocking POSIX socket connected to 127.0.0.1:port, or -1.
int ConnectRaw(uint16_t port);
/// Reads from `fd` until EOF/error or `deadline`; returns what was read. `eof` tells
/// whether the peer closed.
std::string ReadUntilEof(int fd, std::chrono::milliseconds deadline, bool* eof);

/// Resident set size of this process, in bytes (from /proc/self/status).
long ResidentBytes();
/// Bytes of heap in use (glibc mallinfo2).
long HeapBytesInUse();

}  // namespace hf::http::testing
