// The HTTP client against scripted peers: chunked bodies, bodies ended by the close, a
// kept-alive connection the server closed, a server that stops mid-body, and forward
// proxies from the environment (absolute-form for http, CONNECT tunnels for https).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "hyperfleet/http/http_client.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/http/tls_identity.h"
#include "unit/http/client_test_servers.h"
#include "unit/http/test_util.h"

namespace hf::http {
namespace {

using ::hf::http::testing::Echo;
using ::hf::http::testing::ForwardProxy;
using ::hf::http::testing::MakeCertificate;
using ::hf::http::testing::Pem;
using ::hf::http::testing::RawServer;
using ::hf::http::testing::ReadHead;
using ::hf::http::testing::ScopedEnv;
using ::hf::http::testing::StartServer;
using namespace std::chrono_literals;

void Write(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(text.size()));
}

std::string Url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

class HttpClientWireTest : public ::testing::Test {
 protected:
  // No proxy from the caller's environment may take part in these tests.
  ScopedEnv env_{{"http_proxy", std::nullopt}, {"https_proxy", std::nullopt},
                 {"HTTPS_PROXY", std::nullopt}, {"all_proxy", std::nullopt},
                 {"ALL_PROXY", std::nullopt},  {"no_proxy", std::nullopt},
                 {"NO_PROXY", std::nullopt}};
};

TEST_F(HttpClientWireTest, ChunkedBodyWithInterimResponseAndTrailer) {
  RawServer server([](int fd) {
    if (ReadHead(fd).empty()) return;
    Write(fd,
          "HTTP/1.1 100 Continue\r\n\r\n"
          "HTTP/1.1 201 Created\r\nX-One: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n");
  });
  HttpClient client;
  auto response = client.Send(Url(server.port()), HttpRequest{"GET", "/c", {}, ""}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, "hello, world");
  ASSERT_FALSE(response->headers.empty());
  EXPECT_EQ(response->headers[0], (std::pair<std::string, std::string>{"X-One", "1"}));
}

TEST_F(HttpClientWireTest, BodyWithoutLengthEndsWithTheConnection) {
  RawServer server([](int fd) {
    if (ReadHead(fd).empty()) return;
    Write(fd, "HTTP/1.1 200 OK\r\n\r\nuntil the end");
  });
  HttpClient client;
  auto response = client.Send(Url(server.port()), HttpRequest{"GET", "/", {}, ""}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "until the end");
  auto again = client.Send(Url(server.port()), HttpRequest{"GET", "/", {}, ""}, 10);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST_F(HttpClientWireTest, KeptAliveConnectionClosedByTheServerIsReopened) {
  // Each connection answers one request, then closes without saying so (an idle timeout).
  RawServer server([](int fd) {
    if (ReadHead(fd).empty()) return;
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  HttpClient client;
  for (int i = 0; i < 3; ++i) {
    auto response = client.Send(Url(server.port()), HttpRequest{"GET", "/", {}, ""}, 10);
    ASSERT_TRUE(response.ok()) << i << ": " << response.status();
    EXPECT_EQ(response->body, "ok");
  }
  EXPECT_EQ(client.connections_opened(), 3);
}

TEST_F(HttpClientWireTest, ServerThatStopsMidBodyTimesOut) {
  RawServer server([](int fd) {
    if (ReadHead(fd).empty()) return;
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart");
    char c;
    while (::recv(fd, &c, 1, 0) > 0) {
    }
  });
  HttpClient client;
  const auto start = std::chrono::steady_clock::now();
  auto response = client.Send(Url(server.port()), HttpRequest{"GET", "/stall", {}, ""}, 1);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "timed out")) << response.status();
  EXPECT_LT(elapsed, 5s);
}

TEST_F(HttpClientWireTest, TruncatedBodyIsAnError) {
  RawServer server([](int fd) {
    if (ReadHead(fd).empty()) return;
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart");
  });
  HttpClient client;
  auto response = client.Send(Url(server.port()), HttpRequest{"GET", "/cut", {}, ""}, 10);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(HttpClientWireTest, HttpGoesThroughHttpProxyInAbsoluteFormWithCredentials) {
  ForwardProxy proxy;
  ScopedEnv env({{"http_proxy", "http://agent:s%3Acret@127.0.0.1:" + std::to_string(proxy.port())}});
  HttpClient client;
  auto response = client.Send("http://origin.invalid:8080/base", HttpRequest{"GET", "/x?y=1", {}, ""}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "from the proxy");
  ASSERT_EQ(proxy.heads().size(), 1u);
  const std::string head = proxy.heads()[0];
  EXPECT_EQ(head.rfind("GET http://origin.invalid:8080/base/x?y=1 HTTP/1.1\r\n", 0), 0u) << head;
  EXPECT_TRUE(absl::StrContains(head, "Host: origin.invalid:8080\r\n")) << head;
  // base64("agent:s:cret")
  EXPECT_TRUE(absl::StrContains(head, "Proxy-Authorization: Basic YWdlbnQ6czpjcmV0\r\n")) << head;
}

TEST_F(HttpClientWireTest, NoProxyHostsAndUpperCaseHttpProxyGoDirect) {
  ForwardProxy proxy;
  auto origin = StartServer({}, [](HttpRequest&& r) { return Echo(std::move(r)); });
  ASSERT_NE(origin, nullptr);
  const std::string proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  {
    ScopedEnv env({{"http_proxy", proxy_url}, {"no_proxy", "localhost, 127.0.0.0/8"}});
    HttpClient client;
    auto response = client.Send(Url(origin->port()), HttpRequest{"POST", "/", {}, "direct"}, 10);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->body, "direct");
  }
  {
    ScopedEnv env({{"HTTP_PROXY", proxy_url}});
    HttpClient client;
    auto response = client.Send(Url(origin->port()), HttpRequest{"POST", "/", {}, "direct"}, 10);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->body, "direct");
  }
  EXPECT_TRUE(proxy.heads().empty());
}

TEST_F(HttpClientWireTest, HttpsIsTunnelledThroughTheProxyWithConnect) {
  const Pem pem = MakeCertificate("agent endpoint", {"IP:127.0.0.1"}, nullptr);
  HttpServerOptions options;
  options.tls_certificate_pem = pem.cert;
  options.tls_private_key_pem = pem.key;
  auto origin = StartServer(options, [](HttpRequest&& r) { return Echo(std::move(r)); });
  ASSERT_NE(origin, nullptr);
  ForwardProxy proxy;
  ScopedEnv env({{"HTTPS_PROXY", "127.0.0.1:" + std::to_string(proxy.port())}});
  HttpClient client(HttpClientOptions{*CertificateSha256(pem.cert)});
  const std::string url = "https://127.0.0.1:" + std::to_string(origin->port());
  for (const std::string body : {"one", "two"}) {
    auto response = client.Send(url, HttpRequest{"POST", "/t", {}, body}, 10);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->body, body);
  }
  ASSERT_EQ(proxy.heads().size(), 1u) << "one tunnel, kept alive";
  EXPECT_EQ(proxy.heads()[0].rfind("CONNECT 127.0.0.1:" + std::to_string(origin->port()) +
                                       " HTTP/1.1\r\n",
                                   0),
            0u)
      << proxy.heads()[0];
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST_F(HttpClientWireTest, ProxyRefusingConnectIsUnavailableNamingTheProxy) {
  ForwardProxy proxy(403);
  ScopedEnv env({{"https_proxy", "http://127.0.0.1:" + std::to_string(proxy.port())}});
  HttpClient client(HttpClientOptions{std::string(64, 'a')});
  auto response = client.Send("https://10.255.255.1:8443", HttpRequest{"GET", "/", {}, ""}, 10);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "https_proxy")) << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), "403")) << response.status();
}

TEST_F(HttpClientWireTest, MalformedProxyVariableIsInvalidArgument) {
  ScopedEnv env({{"http_proxy", "socks5://127.0.0.1:1080"}});
  HttpClient client;
  auto response = client.Send("http://10.255.255.1", HttpRequest{"GET", "/", {}, ""}, 10);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "http_proxy")) << response.status();
}

}  // namespace
}  // namespace hf::http
