#include "hyperfleet/http/http_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "hyperfleet/http/http_server.h"
#include "unit/http/test_util.h"

namespace hf::http {
namespace {

using ::hf::http::testing::Echo;
using ::hf::http::testing::StartServer;
using namespace std::chrono_literals;

class HttpClientTest : public ::testing::Test {
 protected:
  void StartEcho(HttpServerOptions options = {}) {
    server_ = StartServer(options, [this](HttpRequest&& request) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      return Echo(std::move(request));
    });
    ASSERT_NE(server_, nullptr);
    base_url_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }

  HttpRequest LastRequest() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.empty() ? HttpRequest{} : requests_.back();
  }

  std::unique_ptr<HttpServer> server_;
  std::string base_url_;
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
};

TEST_F(HttpClientTest, RoundTripSendsHeadersInOrderAndReturnsTheResponse) {
  StartEcho();
  HttpClient client;
  HttpRequest request{"POST",
                      "/clusters?x=1",
                      {{"Content-Type", "application/x-amz-json-1.1"},
                       {"X-Amz-Target", "SageMaker.ListClusters"},
                       {"x-lower", "v"}},
                      R"({"MaxResults":5})"};
  auto response = client.Send(base_url_ + "/", request, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, request.body);
  std::vector<std::string> names;
  for (const auto& header : response->headers) names.push_back(header.first);
  EXPECT_EQ(names, (std::vector<std::string>{"Server", "X-Method", "X-Target", "X-Second",
                                             "X-First", "Content-Type", "Content-Length"}));
  EXPECT_EQ(response->headers[0].second, "hyperfleet");
  EXPECT_EQ(response->headers[1].second, "POST");
  EXPECT_EQ(response->headers[2].second, "/clusters?x=1");

  const HttpRequest seen = LastRequest();
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/clusters?x=1");
  EXPECT_EQ(seen.header("X-Amz-Target"), "SageMaker.ListClusters");
  EXPECT_EQ(seen.header("Content-Type"), "application/x-amz-json-1.1");
  // The caller's headers arrive in order and spelled as given.
  std::vector<std::string> sent;
  for (const auto& header : seen.headers) {
    if (header.first == "Content-Type" || header.first == "X-Amz-Target" ||
        header.first == "x-lower") {
      sent.push_back(header.first);
    }
  }
  EXPECT_EQ(sent, (std::vector<std::string>{"Content-Type", "X-Amz-Target", "x-lower"}));
}

TEST_F(HttpClientTest, MethodsWithAndWithoutBodies) {
  StartEcho();
  HttpClient client;
  for (const std::string method : {"GET", "DELETE", "PUT", "PATCH"}) {
    const std::string body = method == "PUT" || method == "PATCH" ? "data" : "";
    auto response = client.Send(base_url_, HttpRequest{method, "/m", {}, body}, 10);
    ASSERT_TRUE(response.ok()) << method << ": " << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(LastRequest().method, method);
    EXPECT_EQ(LastRequest().body, body);
    EXPECT_FALSE(LastRequest().header("Content-Type").has_value()) << method;
  }
  auto head = client.Send(base_url_, HttpRequest{"HEAD", "/h", {}, ""}, 10);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(LastRequest().method, "HEAD");
}

TEST_F(HttpClientTest, ReusesOneKeepAliveConnection) {
  StartEcho();
  HttpClient client;
  for (int i = 0; i < 20; ++i) {
    auto response = client.Send(base_url_, HttpRequest{"POST", "/", {}, std::to_string(i)}, 10);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->body, std::to_string(i));
  }
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST_F(HttpClientTest, LargeBodyRoundTripsWithItsLengthAndNoExpect) {
  StartEcho();
  HttpClient client;
  const std::string body(3 << 20, 'L');
  auto response = client.Send(base_url_, HttpRequest{"POST", "/big", {}, body}, 30);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body.size(), body.size());
  EXPECT_EQ(response->body, body);
  EXPECT_EQ(LastRequest().header("Content-Length"), std::to_string(body.size()));
  EXPECT_FALSE(LastRequest().header("Expect").has_value());
}

TEST_F(HttpClientTest, HostAndContentLengthAsTheCallerSetsThem) {
  StartEcho();
  HttpClient client;
  auto response = client.Send(base_url_, HttpRequest{"POST", "/", {{"Host", "api.example"}}, ""}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(LastRequest().header("Host"), "api.example");
  EXPECT_EQ(LastRequest().header("Content-Length"), "0") << "a POST says its empty body";
  response = client.Send(base_url_ + "/prefix/", HttpRequest{"GET", "/x", {}, ""}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(LastRequest().target, "/prefix/x");
  EXPECT_EQ(LastRequest().header("Host"), base_url_.substr(7));
  EXPECT_FALSE(LastRequest().header("Content-Length").has_value());
}

TEST_F(HttpClientTest, OversizeBodyReturnsThe413Response) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartEcho(options);
  HttpClient client;
  auto response = client.Send(base_url_, HttpRequest{"POST", "/", {}, std::string(5000, 'x')}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(response->body,
            R"({"__type":"RequestEntityTooLargeException","message":"Request body of 5000 )"
            R"(bytes exceeds the limit of 1000 bytes"})");
  // The server closed that connection; the client reconnects transparently.
  auto next = client.Send(base_url_, HttpRequest{"POST", "/", {}, "small"}, 10);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST_F(HttpClientTest, ConnectionRefusedIsUnavailableNamingTheUrl) {
  StartEcho();
  const std::string url = base_url_;
  server_->stop();
  HttpClient client;
  auto response = client.Send(url, HttpRequest{"GET", "/x", {}, ""}, 5);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), url + "/x")) << response.status();
}

TEST_F(HttpClientTest, TimeoutIsUnavailable) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  HttpServerOptions options;
  options.io_threads = 2;
  auto server = StartServer(options, [&](HttpRequest&& request) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 20s, [&] { return released; });
    return Echo(std::move(request));
  });
  ASSERT_NE(server, nullptr);
  HttpClient client;
  const auto start = std::chrono::steady_clock::now();
  auto response = client.Send("http://127.0.0.1:" + std::to_string(server->port()),
                              HttpRequest{"GET", "/slow", {}, ""}, 1);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "/slow")) << response.status();
  EXPECT_LT(elapsed, 10s);
}

}  // namespace
}  // namespace hf::http
