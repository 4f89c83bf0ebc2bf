#include "unit/http/test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <utility>

namespace hf::http::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::unique_ptr<HttpServer> StartServer(HttpServerOptions options, HttpHandler handler) {
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  EXPECT_NE((*server)->port(), 0);
  return std::move(server).value();
}

HttpResponse Echo(HttpRequest&& request) {
  HttpResponse response;
  response.status = 200;
  response.headers = {{"X-Method", request.method},
                      {"X-Target", request.target},
                      {"X-Second", "2"},
                      {"X-First", "1"},
                      {"Content-Type", "application/octet-stream"}};
  response.body = std::move(request.body);
  return response;
}

BeastClient::BeastClient(uint16_t port) : socket_(ioc_) {
  socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
}

bhttp::response<bhttp::string_body> BeastClient::RoundTrip(
    bhttp::request<bhttp::string_body> request) {
  request.prepare_payload();
  bhttp::write(socket_, request);
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64u << 20);
  if (request.method() == bhttp::verb::head) parser.skip(true);
  bhttp::read(socket_, buffer_, parser);
  return parser.release();
}

bool BeastClient::WaitForEof(std::chrono::milliseconds deadline) {
  bool eof = false;
  ReadUntilEof(socket_.native_handle(), deadline, &eof);
  return eof;
}

int ConnectRaw(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string ReadUntilEof(int fd, std::chrono::milliseconds deadline, bool* eof) {
  std::string data;
  *eof = false;
  const auto until = Clock::now() + deadline;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return data;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[16384];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      *eof = true;  // orderly close or reset: either way the server is done with us
      return data;
    }
    data.append(chunk, static_cast<size_t>(n));
  }
}

long ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

long HeapBytesInUse() { return static_cast<long>(mallinfo2().uordblks); }

}  // namespace hf::http::testing
