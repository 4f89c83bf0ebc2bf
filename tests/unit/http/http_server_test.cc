#include "hyperfleet/http/http_server.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "unit/http/test_util.h"

namespace hf::http {
namespace {

using ::hf::http::testing::BeastClient;
using ::hf::http::testing::ConnectRaw;
using ::hf::http::testing::Echo;
using ::hf::http::testing::ReadUntilEof;
using ::hf::http::testing::StartServer;
using Clock = std::chrono::steady_clock;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

// Records every request the server hands to the handler.
class Recorder {
 public:
  HttpHandler Handler() {
    return [this](HttpRequest&& request) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      return Echo(std::move(request));
    };
  }
  std::vector<HttpRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
};

std::vector<std::string> HeaderNames(const Headers& headers) {
  std::vector<std::string> names;
  for (const auto& header : headers) names.push_back(header.first);
  return names;
}

template <class Message>
std::vector<std::string> FieldNames(const Message& message) {
  std::vector<std::string> names;
  for (const auto& field : message) names.emplace_back(field.name_string());
  return names;
}

bhttp::request<bhttp::string_body> Request(bhttp::verb verb, std::string target,
                                           std::string body = "") {
  bhttp::request<bhttp::string_body> request(verb, target, 11);
  request.set(bhttp::field::host, "localhost");
  request.body() = std::move(body);
  return request;
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

TEST(HttpServerTest, EchoRoundTripPreservesMethodTargetHeadersAndBody) {
  Recorder recorder;
  auto server = StartServer({}, recorder.Handler());
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());

  const std::string body("binary\0body\r\n\xff", 15);
  auto request = Request(bhttp::verb::put, "/clusters/a%20b?x=1&y=two", body);
  request.insert("X-Amz-Target", "SageMaker.CreateCluster");
  request.insert("x-lower-case", "v");
  request.insert("X-Dup", "1");
  request.insert("X-Dup", "2");
  auto response = client.RoundTrip(std::move(request));

  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.body(), body);
  EXPECT_EQ(response["X-Method"], "PUT");
  EXPECT_EQ(response["X-Target"], "/clusters/a%20b?x=1&y=two");
  EXPECT_EQ(response[bhttp::field::server], "hyperfleet");
  EXPECT_EQ(response[bhttp::field::content_length], std::to_string(body.size()));
  EXPECT_TRUE(response.keep_alive());
  // The handler's header order survives (after the transport's Server header).
  EXPECT_EQ(FieldNames(response),
            (std::vector<std::string>{"Server", "X-Method", "X-Target", "X-Second", "X-First",
                                      "Content-Type", "Content-Length"}));

  const auto requests = recorder.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/clusters/a%20b?x=1&y=two");
  EXPECT_EQ(requests[0].path(), "/clusters/a%20b");
  EXPECT_EQ(requests[0].query(), "x=1&y=two");
  EXPECT_EQ(requests[0].body, body);
  EXPECT_EQ(HeaderNames(requests[0].headers),
            (std::vector<std::string>{"Host", "X-Amz-Target", "x-lower-case", "X-Dup", "X-Dup",
                                      "Content-Length"}));
  EXPECT_EQ(requests[0].headers[3].second, "1");
  EXPECT_EQ(requests[0].headers[4].second, "2");
  EXPECT_EQ(requests[0].header("x-amz-target"), "SageMaker.CreateCluster");
}

TEST(HttpServerTest, KeepAliveServesHundredRequestsOnOneConnection) {
  Recorder recorder;
  auto server = StartServer({}, recorder.Handler());
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  const auto local = client.socket().local_endpoint();
  for (int i = 0; i < 100; ++i) {
    auto response = client.RoundTrip(
        Request(bhttp::verb::post, "/r/" + std::to_string(i), "body " + std::to_string(i)));
    ASSERT_EQ(response.result_int(), 200) << i;
    ASSERT_EQ(response.body(), "body " + std::to_string(i));
    ASSERT_TRUE(response.keep_alive()) << i;
  }
  EXPECT_EQ(client.socket().local_endpoint(), local);
  EXPECT_EQ(recorder.requests().size(), 100u);
}

TEST(HttpServerTest, ConnectionCloseIsHonoured) {
  auto server = StartServer({}, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto request = Request(bhttp::verb::get, "/");
  request.set(bhttp::field::connection, "close");
  auto response = client.RoundTrip(std::move(request));
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_FALSE(response.keep_alive());
  EXPECT_TRUE(client.WaitForEof(5s));
}

TEST(HttpServerTest, Http10WithoutKeepAliveIsClosed) {
  auto server = StartServer({}, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto request = Request(bhttp::verb::get, "/");
  request.version(10);
  auto response = client.RoundTrip(std::move(request));
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.version(), 10);
  EXPECT_TRUE(client.WaitForEof(5s));
}

TEST(HttpServerTest, OversizeBodyGets413AndClose) {
  Recorder recorder;
  HttpServerOptions options;
  options.max_body_bytes = 64 * 1024;
  auto server = StartServer(options, recorder.Handler());
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  // Much larger than socket buffers: the server must drain it for the client to finish.
  auto response = client.RoundTrip(Request(bhttp::verb::post, "/", std::string(4 << 20, 'x')));
  EXPECT_EQ(response.result_int(), 413);
  EXPECT_EQ(response[bhttp::field::content_type], "application/x-amz-json-1.1");
  EXPECT_EQ(response.body(),
            R"({"__type":"RequestEntityTooLargeException","message":"Request body of 4194304 )"
            R"(bytes exceeds the limit of 65536 bytes"})");
  EXPECT_FALSE(response.keep_alive());
  EXPECT_TRUE(client.WaitForEof(5s));
  EXPECT_TRUE(recorder.requests().empty());

  // A body exactly at the limit is fine.
  BeastClient second(server->port());
  auto ok = second.RoundTrip(Request(bhttp::verb::post, "/", std::string(64 * 1024, 'y')));
  EXPECT_EQ(ok.result_int(), 200);
  EXPECT_EQ(ok.body().size(), 64u * 1024);
}

TEST(HttpServerTest, OversizeChunkedBodyGets413WithoutLength) {
  HttpServerOptions options;
  options.max_body_bytes = 1024;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto request = Request(bhttp::verb::post, "/", std::string(5000, 'z'));
  request.chunked(true);
  bhttp::write(client.socket(), request);
  bhttp::response<bhttp::string_body> response;
  bhttp::read(client.socket(), client.buffer(), response);
  EXPECT_EQ(response.result_int(), 413);
  EXPECT_EQ(response.body(), R"({"__type":"RequestEntityTooLargeException",)"
                             R"("message":"Request body exceeds the limit of 1024 bytes"})");
  EXPECT_TRUE(client.WaitForEof(5s));
}

TEST(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  Recorder recorder;
  auto server = StartServer({}, recorder.Handler());
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  const std::string body(300000, 'b');
  auto request = Request(bhttp::verb::post, "/upload", body);
  request.set(bhttp::field::expect, "100-continue");
  request.prepare_payload();
  bhttp::request_serializer<bhttp::string_body> serializer(request);
  bhttp::write_header(client.socket(), serializer);

  // The server must say "go ahead" without having seen any of the body.
  bhttp::response_parser<bhttp::empty_body> interim;
  bhttp::read(client.socket(), client.buffer(), interim);
  EXPECT_EQ(interim.get().result(), bhttp::status::continue_);
  EXPECT_TRUE(recorder.requests().empty());

  bhttp::write(client.socket(), serializer);
  bhttp::response<bhttp::string_body> response;
  bhttp::read(client.socket(), client.buffer(), response);
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.body(), body);
  EXPECT_TRUE(response.keep_alive());
}

TEST(HttpServerTest, ExpectContinueWithOversizeBodyGets413Immediately) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto request = Request(bhttp::verb::post, "/", std::string(5000, 'b'));
  request.set(bhttp::field::expect, "100-continue");
  request.prepare_payload();
  bhttp::request_serializer<bhttp::string_body> serializer(request);
  bhttp::write_header(client.socket(), serializer);
  bhttp::response<bhttp::string_body> response;
  bhttp::read(client.socket(), client.buffer(), response);
  EXPECT_EQ(response.result_int(), 413);
  EXPECT_TRUE(absl::StrContains(response.body(), "Request body of 5000 bytes"));
  EXPECT_TRUE(client.WaitForEof(5s));
}

TEST(HttpServerTest, GarbageGets400AndTheServerKeepsServing) {
  auto server = StartServer({}, Echo);
  ASSERT_NE(server, nullptr);
  {
    const int fd = ConnectRaw(server->port());
    ASSERT_GE(fd, 0);
    SendAll(fd, std::string("\x01\x02 GARBAGE \xff\r\n\r\n", 17));
    bool eof = false;
    const std::string reply = ReadUntilEof(fd, 5s, &eof);
    ::close(fd);
    EXPECT_TRUE(eof);
    EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 400 ")) << reply;
    EXPECT_TRUE(absl::StrContains(reply, "Content-Type: application/x-amz-json-1.1\r\n"));
    EXPECT_TRUE(absl::EndsWith(
        reply, R"({"__type":"SerializationException","message":"Malformed HTTP request"})"));
  }
  // Random bytes must never crash the server; whatever comes back is a 4xx or nothing.
  std::mt19937 random(1234);
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + random() % 300, '\0');
    for (char& c : junk) c = static_cast<char>(random());
    if (i % 2 == 0) junk += "\r\n\r\n";
    const int fd = ConnectRaw(server->port());
    ASSERT_GE(fd, 0);
    SendAll(fd, junk);
    ::shutdown(fd, SHUT_WR);
    bool eof = false;
    const std::string reply = ReadUntilEof(fd, 5s, &eof);
    ::close(fd);
    EXPECT_TRUE(eof) << i;
    EXPECT_TRUE(reply.empty() || absl::StartsWith(reply, "HTTP/1.1 4")) << i << ": " << reply;
  }
  BeastClient client(server->port());
  EXPECT_EQ(client.RoundTrip(Request(bhttp::verb::get, "/still-alive")).result_int(), 200);
}

TEST(HttpServerTest, OversizeHeaderGets431) {
  HttpServerOptions options;
  options.max_header_bytes = 4096;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto request = Request(bhttp::verb::get, "/");
  request.set("X-Big", std::string(8000, 'h'));
  auto response = client.RoundTrip(std::move(request));
  EXPECT_EQ(response.result_int(), 431);
  EXPECT_TRUE(absl::StrContains(response.body(), "SerializationException"));
  EXPECT_TRUE(client.WaitForEof(5s));
}

TEST(HttpServerTest, ThrowingHandlerGets500) {
  auto server = StartServer(
      {}, [](HttpRequest&&) -> HttpResponse { throw std::runtime_error("boom \"quoted\""); });
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto response = client.RoundTrip(Request(bhttp::verb::get, "/"));
  EXPECT_EQ(response.result_int(), 500);
  EXPECT_EQ(response[bhttp::field::content_type], "application/x-amz-json-1.1");
  EXPECT_EQ(response.body(), R"({"__type":"InternalFailure","message":"boom \"quoted\""})");
  // The connection stays usable.
  EXPECT_EQ(client.RoundTrip(Request(bhttp::verb::get, "/")).result_int(), 500);
}

TEST(HttpServerTest, HeadGetsContentLengthButNoBody) {
  auto server = StartServer({}, [](HttpRequest&&) {
    return HttpResponse{200, {{"Content-Type", "text/plain"}}, "twelve bytes"};
  });
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto head = client.RoundTrip(Request(bhttp::verb::head, "/"));
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_EQ(head[bhttp::field::content_length], "12");
  EXPECT_TRUE(head.body().empty());
  // The next response on the connection parses correctly, so no stray body was sent.
  auto get = client.RoundTrip(Request(bhttp::verb::get, "/"));
  EXPECT_EQ(get.body(), "twelve bytes");
}

TEST(HttpServerTest, FramingHeadersFromTheHandlerAreReplaced) {
  auto server = StartServer({}, [](HttpRequest&&) {
    return HttpResponse{201,
                        {{"Content-Length", "999"},
                         {"Connection", "close"},
                         {"Server", "custom"},
                         {"X-Evil", "a\r\nInjected: yes"}},
                        "abc"};
  });
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  auto response = client.RoundTrip(Request(bhttp::verb::get, "/"));
  EXPECT_EQ(response.result_int(), 201);
  EXPECT_EQ(response[bhttp::field::content_length], "3");
  EXPECT_EQ(response[bhttp::field::server], "custom");
  EXPECT_TRUE(response.keep_alive());
  EXPECT_EQ(response.find("Injected"), response.end());
  EXPECT_EQ(response.find("X-Evil"), response.end());
}

// A keep-alive connection idle past request_timeout after a response is closed, silently.
TEST(HttpServerTest, IdleKeepAliveConnectionIsClosedAfterTheRequestTimeout) {
  HttpServerOptions options;
  options.request_timeout = 200ms;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  EXPECT_EQ(client.RoundTrip(Request(bhttp::verb::get, "/")).result_int(), 200);
  const auto start = Clock::now();
  bool eof = false;
  const std::string rest = ReadUntilEof(client.socket().native_handle(), 10s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_EQ(rest, "");  // no 408 for a connection that had not begun a request
  EXPECT_GE(Clock::now() - start, 150ms);
}

// A new connection that never sends a byte is closed too.
TEST(HttpServerTest, SilentNewConnectionIsClosedAfterTheRequestTimeout) {
  HttpServerOptions options;
  options.request_timeout = 200ms;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  bool eof = false;
  EXPECT_EQ(ReadUntilEof(fd, 10s, &eof), "");
  EXPECT_TRUE(eof);
  ::close(fd);
}

// Slowloris: part of a header and then nothing. The connection gets 408 + close once the
// deadline passes, instead of holding a file descriptor forever.
TEST(HttpServerTest, PartialHeaderGets408AndCloseAfterTheRequestTimeout) {
  HttpServerOptions options;
  options.request_timeout = 200ms;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  SendAll(fd, "POST / HTTP/1.1\r\nHost: x\r\n");
  bool eof = false;
  const std::string response = ReadUntilEof(fd, 10s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_GE(Clock::now() - start, 150ms);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 408 ")) << response;
  EXPECT_TRUE(absl::StrContains(response, "Connection: close")) << response;
  EXPECT_TRUE(absl::StrContains(response, "RequestTimeoutException")) << response;
  ::close(fd);
}

// The deadline covers the body too: a complete header with a stalled body gets 408.
TEST(HttpServerTest, StalledBodyGets408AfterTheRequestTimeout) {
  std::atomic<int> calls{0};
  HttpServerOptions options;
  options.request_timeout = 200ms;
  auto server = StartServer(options, [&](HttpRequest&& request) {
    ++calls;
    return Echo(std::move(request));
  });
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  bool eof = false;
  const std::string response = ReadUntilEof(fd, 10s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 408 ")) << response;
  EXPECT_EQ(calls.load(), 0);
  ::close(fd);
}

// A request sent slowly (in pieces, pauses between them) that completes within the deadline
// is served normally.
TEST(HttpServerTest, SlowButCompleteRequestWithinTheDeadlineIsServed) {
  HttpServerOptions options;
  options.request_timeout = 3s;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  // The pauses make the client slow; they synchronize nothing.
  for (const char* piece : {"POST /slow HTTP/1.1\r\n", "Host: x\r\nContent-Length: 4\r\n",
                            "Connection: close\r\n\r\n", "bo", "dy"}) {
    SendAll(fd, piece);
    std::this_thread::sleep_for(50ms);
  }
  bool eof = false;
  const std::string response = ReadUntilEof(fd, 10s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 200 ")) << response;
  EXPECT_TRUE(absl::EndsWith(response, "\r\n\r\nbody")) << response;
  ::close(fd);
}

// The deadline restarts at the end of each response: a keep-alive client whose requests
// together take longer than request_timeout, each sent well within it, is served throughout,
// whether the next request follows at once or after a pause.
TEST(HttpServerTest, KeepAliveRequestsEachGetAFreshDeadline) {
  HttpServerOptions options;
  options.request_timeout = 1s;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  BeastClient client(server->port());
  const auto start = Clock::now();
  for (int i = 0; i < 8; ++i) {
    auto response = client.RoundTrip(Request(bhttp::verb::get, "/" + std::to_string(i)));
    ASSERT_EQ(response.result_int(), 200) << i;
    EXPECT_EQ(response["X-Target"], "/" + std::to_string(i));
    EXPECT_TRUE(response.keep_alive());
    // Pauses pace the client (no synchronization): every other request follows at once.
    if (i % 2 == 1) std::this_thread::sleep_for(400ms);
  }
  EXPECT_GT(Clock::now() - start, 1s);  // longer than one deadline in all
}

TEST(HttpServerTest, StopWithConnectedClientsReturnsPromptly) {
  auto server = StartServer({}, Echo);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<BeastClient>> idle;
  for (int i = 0; i < 5; ++i) {
    idle.push_back(std::make_unique<BeastClient>(server->port()));
    ASSERT_EQ(idle.back()->RoundTrip(Request(bhttp::verb::get, "/")).result_int(), 200);
  }
  const int silent = ConnectRaw(server->port());
  const int half = ConnectRaw(server->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  SendAll(half, "POST / HTTP/1.1\r\nHost: x\r\nContent-Le");

  const auto start = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - start, 2s);
  for (auto& client : idle) EXPECT_TRUE(client->WaitForEof(2s));
  bool eof = false;
  ReadUntilEof(silent, 2s, &eof);
  EXPECT_TRUE(eof);
  ReadUntilEof(half, 2s, &eof);
  EXPECT_TRUE(eof);
  ::close(silent);
  ::close(half);
  EXPECT_LT(ConnectRaw(server->port()), 0);  // no longer listening
  server->stop();                            // idempotent
}

TEST(HttpServerTest, StopLetsARunningHandlerFinishItsResponse) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  HttpServerOptions options;
  options.io_threads = 2;  // one runs the blocked handler, the other processes stop()
  auto server = StartServer(options, [&](HttpRequest&& request) {
    entered.set_value();
    released.wait_for(10s);
    return Echo(std::move(request));
  });
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();

  std::promise<bhttp::response<bhttp::string_body>> result;
  std::thread client_thread([&] {
    BeastClient client(port);
    result.set_value(client.RoundTrip(Request(bhttp::verb::post, "/slow", "payload")));
  });
  ASSERT_EQ(entered.get_future().wait_for(5s), std::future_status::ready);
  std::thread stopper([&] { server->stop(); });

  // Once the listener is closed, stop() is under way.
  const auto deadline = Clock::now() + 5s;
  bool refused = false;
  while (!refused && Clock::now() < deadline) {
    const int fd = ConnectRaw(port);
    refused = fd < 0;
    if (fd >= 0) ::close(fd);
    if (!refused) std::this_thread::yield();
  }
  EXPECT_TRUE(refused);
  release.set_value();
  auto future = result.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  auto response = future.get();
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.body(), "payload");
  EXPECT_FALSE(response.keep_alive());  // the server is going away
  client_thread.join();
  stopper.join();
}

TEST(HttpServerTest, BindErrorsAreUnavailableAndNameTheAddress) {
  auto first = StartServer({}, Echo);
  ASSERT_NE(first, nullptr);
  HttpServerOptions options;
  options.port = first->port();
  auto second = HttpServer::Start(options, Echo);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::StrContains(second.status().message(), "127.0.0.1:" + std::to_string(first->port())))
      << second.status();

  options.host = "no-such-host.invalid";
  options.port = 0;
  auto third = HttpServer::Start(options, Echo);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(third.status().message(), "no-such-host.invalid"));
}

TEST(HttpServerTest, RejectsNonsensicalOptions) {
  HttpServerOptions options;
  options.port = 0;
  options.io_threads = 0;
  EXPECT_EQ(HttpServer::Start(options, Echo).status().code(), absl::StatusCode::kInvalidArgument);
  options.io_threads = 1;
  EXPECT_EQ(HttpServer::Start(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.request_timeout = 0ms;
  EXPECT_EQ(HttpServer::Start(options, Echo).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, ConcurrentClientsOnSeveralThreads) {
  Recorder recorder;
  HttpServerOptions options;
  options.io_threads = 4;
  auto server = StartServer(options, recorder.Handler());
  ASSERT_NE(server, nullptr);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      BeastClient client(server->port());
      for (int i = 0; i < 50; ++i) {
        const std::string body = std::to_string(t) + "/" + std::to_string(i);
        auto response = client.RoundTrip(Request(bhttp::verb::post, "/", body));
        if (response.result_int() == 200 && response.body() == body) ++ok;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(ok.load(), 400);
  EXPECT_EQ(recorder.requests().size(), 400u);
}

// Thousands of idle keep-alive connections must cost memory only (no thread each), and a new
// request must still be served promptly. Reports the server's memory per idle connection.
TEST(HttpServerTest, TwoThousandIdleConnectionsStayCheap) {
  constexpr int kConnections = 2000;
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  const rlim_t needed = 2 * kConnections + 256;  // client and server ends live in this process
  if (limit.rlim_cur < needed) {
    if (limit.rlim_max < needed) GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low";
    limit.rlim_cur = needed;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  }

  HttpServerOptions options;
  options.io_threads = 2;
  auto server = StartServer(options, Echo);
  ASSERT_NE(server, nullptr);
  {  // warm up threads and allocator pools so they do not count as per-connection cost
    BeastClient warm(server->port());
    ASSERT_EQ(warm.RoundTrip(Request(bhttp::verb::get, "/")).result_int(), 200);
  }
  const long rss_before = testing::ResidentBytes();
  const long heap_before = testing::HeapBytesInUse();

  // Raw sockets for the idle clients, so the client side adds (almost) no user memory.
  std::vector<int> fds;
  fds.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    const int fd = ConnectRaw(server->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  // Half of them have already completed a request, as keep-alive clients would have.
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < kConnections; i += 2) SendAll(fds[i], get);
  for (int i = 0; i < kConnections; i += 2) {
    char buffer[4096];
    ASSERT_GT(::recv(fds[i], buffer, sizeof(buffer), 0), 0) << "connection " << i;
  }

  // Connections are accepted in order, so once this one is served all the others are idle
  // sessions too.
  const auto start = Clock::now();
  BeastClient probe(server->port());
  auto response = probe.RoundTrip(Request(bhttp::verb::get, "/probe"));
  const auto latency = Clock::now() - start;
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_LT(latency, 1s);

  const long rss_growth = testing::ResidentBytes() - rss_before;
  const long heap_growth = testing::HeapBytesInUse() - heap_before;
  std::printf(
      "[ MEMORY   ] %d idle keep-alive connections: RSS +%ld KiB (%ld B/conn), heap +%ld KiB "
      "(%ld B/conn); probe latency %.2f ms\n",
      kConnections, rss_growth / 1024, rss_growth / kConnections, heap_growth / 1024,
      heap_growth / kConnections, std::chrono::duration<double, std::milli>(latency).count());
  ::testing::Test::RecordProperty("rss_bytes_per_idle_connection",
                                  static_cast<int>(rss_growth / kConnections));
  ::testing::Test::RecordProperty("heap_bytes_per_idle_connection",
                                  static_cast<int>(heap_growth / kConnections));
  // Generous bound: catches a thread or a large buffer per connection, not small changes.
  EXPECT_LT(heap_growth / kConnections, 16 * 1024);

  for (int fd : fds) ::close(fd);
  const auto stop_start = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - stop_start, 5s);
}

}  // namespace
}  // namespace hf::http
