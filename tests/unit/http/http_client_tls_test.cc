// The HTTP client over TLS (http_client.h HttpClientOptions) against the project's TLS
// server with certificates made here: a pinned fingerprint, the CA store (SSL_CERT_FILE
// standing in for the system's), host names and addresses, and a handshake that never ends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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
using ::hf::http::testing::MakeCertificate;
using ::hf::http::testing::Pem;
using ::hf::http::testing::RawServer;
using ::hf::http::testing::ScopedEnv;
using ::hf::http::testing::StartServer;
using ::hf::http::testing::WriteTempFile;
using namespace std::chrono_literals;

class HttpClientTlsTest : public ::testing::Test {
 protected:
  // An https server on 127.0.0.1 serving `pem`; returns its base URL with `host`.
  std::string Serve(const Pem& pem, const std::string& host = "127.0.0.1") {
    HttpServerOptions options;
    options.tls_certificate_pem = pem.cert;
    options.tls_private_key_pem = pem.key;
    server_ = StartServer(options, [](HttpRequest&& r) { return Echo(std::move(r)); });
    EXPECT_NE(server_, nullptr);
    return "https://" + host + ":" + std::to_string(server_ ? server_->port() : 0);
  }

  static std::string Sha256(const Pem& pem) {
    auto sha = CertificateSha256(pem.cert);
    EXPECT_TRUE(sha.ok()) << sha.status();
    return sha.ok() ? *sha : "";
  }

  // No proxy from the caller's environment may take part in these tests.
  ScopedEnv env_{{"http_proxy", std::nullopt}, {"https_proxy", std::nullopt},
                 {"HTTPS_PROXY", std::nullopt}, {"all_proxy", std::nullopt},
                 {"ALL_PROXY", std::nullopt},  {"no_proxy", std::nullopt},
                 {"NO_PROXY", std::nullopt}};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpClientTlsTest, PinnedSelfSignedCertificateIsServed) {
  const Pem pem = MakeCertificate("agent endpoint", {"IP:10.9.9.9"}, nullptr);
  const std::string url = Serve(pem);
  // The pin in the spellings people copy: colons and upper case.
  std::string spelled;
  for (size_t i = 0; i < 64; i += 2) {
    spelled += (i ? ":" : "") + Sha256(pem).substr(i, 2);
  }
  for (const std::string& pin : {Sha256(pem), spelled}) {
    HttpClient client(HttpClientOptions{pin});
    // Not the certificate's address nor a CA's: the pin alone decides.
    auto response = client.Send(url, HttpRequest{"POST", "/tls", {}, "over tls"}, 10);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "over tls");
    auto again = client.Send(url, HttpRequest{"POST", "/tls", {}, "again"}, 10);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(client.connections_opened(), 1) << "keep-alive over TLS";
  }
}

TEST_F(HttpClientTlsTest, PinMismatchIsRefusedNamingBothFingerprints) {
  const Pem served = MakeCertificate("impostor", {"IP:127.0.0.1"}, nullptr);
  const Pem expected = MakeCertificate("agent endpoint", {"IP:127.0.0.1"}, nullptr);
  const std::string url = Serve(served);
  HttpClient client(HttpClientOptions{Sha256(expected)});
  auto response = client.Send(url, HttpRequest{"POST", "/secret", {}, "token"}, 10);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), Sha256(served))) << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), Sha256(expected)))
      << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), url + "/secret"));
}

TEST_F(HttpClientTlsTest, DirectClientIgnoresTheProxyVariables) {
  const Pem pem = MakeCertificate("apiserver", {"IP:127.0.0.1"}, nullptr);
  const std::string url = Serve(pem);
  // A proxy that refuses connections: whoever uses it fails.
  ScopedEnv proxied({{"https_proxy", "http://127.0.0.1:1"}, {"all_proxy", "http://127.0.0.1:1"}});
  HttpClient via_proxy(HttpClientOptions{Sha256(pem)});
  EXPECT_FALSE(via_proxy.Send(url, HttpRequest{"GET", "/", {}, ""}, 10).ok());
  HttpClient direct(HttpClientOptions{Sha256(pem), /*direct=*/true});
  auto response = direct.Send(url, HttpRequest{"POST", "/readyz", {}, "ok"}, 10);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "ok");
}

TEST_F(HttpClientTlsTest, MalformedPinIsInvalidArgument) {
  HttpClient client(HttpClientOptions{"abc123"});
  auto response = client.Send("https://127.0.0.1:1", HttpRequest{"GET", "/", {}, ""}, 5);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "abc123")) << response.status();
}

TEST_F(HttpClientTlsTest, UnpinnedSelfSignedCertificateFailsTheCaCheck) {
  const Pem pem = MakeCertificate("self", {"IP:127.0.0.1", "DNS:localhost"}, nullptr);
  const std::string url = Serve(pem);
  HttpClient client;
  auto response = client.Send(url, HttpRequest{"GET", "/", {}, ""}, 10);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "certificate verify failed"))
      << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), "self-signed")) << response.status();
}

TEST_F(HttpClientTlsTest, CaSignedCertificateIsVerifiedWithTheHostName) {
  const Pem ca = MakeCertificate("Test CA", {}, nullptr, /*ca=*/true);
  const Pem leaf = MakeCertificate("localhost", {"DNS:localhost", "IP:127.0.0.1"}, &ca);
  const std::string ca_file = WriteTempFile(ca.cert);
  const std::string empty_dir = "/nonexistent-hf-test-ca-dir";
  ScopedEnv trust({{"SSL_CERT_FILE", ca_file}, {"SSL_CERT_DIR", empty_dir}});
  Serve(leaf);
  const std::string port = std::to_string(server_->port());
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    HttpClient client;
    auto response = client.Send("https://" + host + ":" + port,
                                HttpRequest{"POST", "/ca", {}, host}, 10);
    ASSERT_TRUE(response.ok()) << host << ": " << response.status();
    EXPECT_EQ(response->body, host);
  }
  ::unlink(ca_file.c_str());
}

TEST_F(HttpClientTlsTest, CaSignedCertificateForAnotherHostIsRefused) {
  const Pem ca = MakeCertificate("Test CA", {}, nullptr, /*ca=*/true);
  const Pem leaf = MakeCertificate("other", {"DNS:other.example", "IP:10.1.1.1"}, &ca);
  const std::string ca_file = WriteTempFile(ca.cert);
  ScopedEnv trust({{"SSL_CERT_FILE", ca_file}, {"SSL_CERT_DIR", "/nonexistent-hf-test"}});
  Serve(leaf);
  const std::string port = std::to_string(server_->port());
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    HttpClient client;
    auto response = client.Send("https://" + host + ":" + port, HttpRequest{"GET", "/", {}, ""}, 10);
    ASSERT_FALSE(response.ok()) << host;
    EXPECT_TRUE(absl::StrContains(response.status().message(), "mismatch")) << response.status();
  }
  // The same CA is not trusted without SSL_CERT_FILE: the system store does not have it.
  ::unlink(ca_file.c_str());
}

TEST_F(HttpClientTlsTest, HandshakeThatNeverCompletesTimesOut) {
  // Accepts and reads, never answers: a TLS server that hangs mid-handshake.
  RawServer silent([](int fd) {
    char buf[4096];
    while (::read(fd, buf, sizeof(buf)) > 0) {
    }
  });
  const Pem pem = MakeCertificate("x", {}, nullptr);
  HttpClient client(HttpClientOptions{Sha256(pem)});
  const auto start = std::chrono::steady_clock::now();
  auto response = client.Send("https://127.0.0.1:" + std::to_string(silent.port()),
                              HttpRequest{"GET", "/hang", {}, ""}, 1);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "timed out")) << response.status();
  EXPECT_GE(elapsed, 900ms);
  EXPECT_LT(elapsed, 5s);
}

}  // namespace
}  // namespace hf::http
