// The server's TLS mode and the self-signed identity it serves (http_server.h tls_*,
// tls_identity.h), against a real OpenSSL client over loopback and real files.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/http/tls_identity.h"
#include "unit/http/test_util.h"

namespace hf::http {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using ::hf::http::testing::ConnectRaw;
using ::hf::http::testing::ReadUntilEof;
using ::hf::http::testing::StartServer;
using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hf-tls-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A client that pins the server certificate's SHA-256 as the agent does: no CA, and the
// request is written only after the handshake showed the pinned certificate.
struct PinnedClient {
  enum class Outcome { kServed, kPinMismatch, kHandshakeFailed };
  Outcome outcome = Outcome::kHandshakeFailed;
  std::string seen_sha256;
  bhttp::response<bhttp::string_body> response;

  PinnedClient(uint16_t port, const std::string& pin, const std::string& body) {
    asio::io_context ioc;
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.set_verify_mode(asio::ssl::verify_none);  // the pin below is the whole check
    asio::ssl::stream<tcp::socket> stream(ioc, ctx);
    stream.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    boost::system::error_code ec;
    stream.handshake(asio::ssl::stream_base::client, ec);
    if (ec) return;
    X509* cert = SSL_get1_peer_certificate(stream.native_handle());
    if (cert) {
      BIO* bio = BIO_new(BIO_s_mem());
      PEM_write_bio_X509(bio, cert);
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);
      seen_sha256 = CertificateSha256(std::string(data, static_cast<std::size_t>(n))).value();
      BIO_free(bio);
      X509_free(cert);
    }
    if (seen_sha256 != pin) {
      outcome = Outcome::kPinMismatch;
      return;  // nothing of the request leaves
    }
    bhttp::request<bhttp::string_body> request(bhttp::verb::post, "/agent/v1/register", 11);
    request.set(bhttp::field::host, "127.0.0.1");
    request.set(bhttp::field::authorization, "HyperfleetNode i-1:secret-token");
    request.body() = body;
    request.prepare_payload();
    bhttp::write(stream, request);
    boost::beast::flat_buffer buffer;
    bhttp::read(stream, buffer, response);
    outcome = Outcome::kServed;
  }
};

// Counts the requests that reached the handler, remembering the last Authorization.
struct CountingHandler {
  std::atomic<int> requests{0};
  HttpHandler handler() {
    return [this](HttpRequest&& request) {
      ++requests;
      HttpResponse response;
      response.status = 200;
      response.body = "registered " + request.body;
      return response;
    };
  }
};

TEST(TlsIdentityTest, MadeOnceOwnerOnlyWhateverTheUmaskThenReused) {
  TempDir dir;
  const std::string tls_dir = dir.path() + "/agent-tls";
  const mode_t old_umask = ::umask(0);  // the loosest: files must still be owner-only
  auto first = LoadOrCreateTlsIdentity(tls_dir, "192.0.2.10");
  ::umask(old_umask);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ModeOf(tls_dir + "/key.pem"), 0600u);
  EXPECT_EQ(ModeOf(tls_dir), 0700u);
  EXPECT_EQ(first->sha256.size(), 64u);
  EXPECT_EQ(CertificateSha256(first->certificate_pem).value(), first->sha256);
  EXPECT_EQ(ReadFile(tls_dir + "/key.pem").value(), first->private_key_pem);

  // A restart, even with another address, gets the same certificate: pins stay valid.
  auto second = LoadOrCreateTlsIdentity(tls_dir, "198.51.100.7");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->sha256, first->sha256);
  EXPECT_EQ(second->private_key_pem, first->private_key_pem);

  // A key loosened by hand is owner-only again after loading.
  ASSERT_EQ(::chmod((tls_dir + "/key.pem").c_str(), 0644), 0);
  ASSERT_TRUE(LoadOrCreateTlsIdentity(tls_dir, "192.0.2.10").ok());
  EXPECT_EQ(ModeOf(tls_dir + "/key.pem"), 0600u);
}

TEST(TlsIdentityTest, CertificateNamesTheAddressAndIsAnEcServerCertificate) {
  TempDir dir;
  auto identity = LoadOrCreateTlsIdentity(dir.path() + "/ip", "192.0.2.10");
  ASSERT_TRUE(identity.ok()) << identity.status();
  BIO* bio = BIO_new_mem_buf(identity->certificate_pem.data(),
                             static_cast<int>(identity->certificate_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ip_asc(cert, "192.0.2.10", 0), 1);
  EXPECT_NE(X509_check_ip_asc(cert, "192.0.2.11", 0), 1);
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(cert)), EVP_PKEY_EC);
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(cert)), 0);
  EXPECT_GT(X509_cmp_current_time(X509_get0_notAfter(cert)), 0);
  X509_free(cert);

  auto named = LoadOrCreateTlsIdentity(dir.path() + "/dns", "control.example.net");
  ASSERT_TRUE(named.ok()) << named.status();
  bio = BIO_new_mem_buf(named->certificate_pem.data(),
                        static_cast<int>(named->certificate_pem.size()));
  cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_host(cert, "control.example.net", 0, 0, nullptr), 1);
  X509_free(cert);
  EXPECT_NE(named->sha256, identity->sha256);  // one identity per data dir, not shared
}

TEST(TlsIdentityTest, UnusableFilesAreRefusedNotReplaced) {
  TempDir dir;
  const std::string a = dir.path() + "/a", b = dir.path() + "/b";
  ASSERT_TRUE(LoadOrCreateTlsIdentity(a, "192.0.2.10").ok());
  ASSERT_TRUE(LoadOrCreateTlsIdentity(b, "192.0.2.10").ok());
  const std::string cert_a = ReadFile(a + "/cert.pem").value();

  // Another identity's key: not this certificate's.
  ASSERT_TRUE(WriteFileAtomically(a + "/key.pem", ReadFile(b + "/key.pem").value(), 0600).ok());
  auto mismatched = LoadOrCreateTlsIdentity(a, "192.0.2.10");
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(mismatched.status().message(), "key.pem"))
      << mismatched.status();
  EXPECT_EQ(ReadFile(a + "/cert.pem").value(), cert_a);  // nothing replaced

  ASSERT_TRUE(WriteFileAtomically(a + "/cert.pem", "not a certificate", 0644).ok());
  auto garbage = LoadOrCreateTlsIdentity(a, "192.0.2.10");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(garbage.status().message(), "cert.pem")) << garbage.status();

  EXPECT_EQ(LoadOrCreateTlsIdentity(dir.path() + "/c", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CertificateSha256("junk").status().code(), absl::StatusCode::kInvalidArgument);
}

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = LoadOrCreateTlsIdentity(dir_.path() + "/tls", "127.0.0.1");
    ASSERT_TRUE(made.ok()) << made.status();
    identity_ = *made;
    options_.tls_certificate_pem = identity_.certificate_pem;
    options_.tls_private_key_pem = identity_.private_key_pem;
  }

  TempDir dir_;
  TlsIdentity identity_;
  HttpServerOptions options_;
  CountingHandler counting_;
};

TEST_F(TlsServerTest, PinnedClientIsServedOverTls) {
  auto server = StartServer(options_, counting_.handler());
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 2; ++i) {  // a fresh connection and handshake each time
    PinnedClient client(server->port(), identity_.sha256, "boot-" + std::to_string(i));
    ASSERT_EQ(client.outcome, PinnedClient::Outcome::kServed);
    EXPECT_EQ(client.response.result_int(), 200);
    EXPECT_EQ(client.response.body(), "registered boot-" + std::to_string(i));
  }
  EXPECT_EQ(counting_.requests, 2);
}

TEST_F(TlsServerTest, AClientPinningAnotherCertificateSendsNothing) {
  auto server = StartServer(options_, counting_.handler());
  ASSERT_NE(server, nullptr);
  auto other = LoadOrCreateTlsIdentity(dir_.path() + "/other", "127.0.0.1");
  ASSERT_TRUE(other.ok());
  PinnedClient client(server->port(), other->sha256, "boot");
  EXPECT_EQ(client.outcome, PinnedClient::Outcome::kPinMismatch);
  EXPECT_EQ(client.seen_sha256, identity_.sha256);
  EXPECT_EQ(counting_.requests, 0);
}

TEST_F(TlsServerTest, PlainHttpGetsNoHttpAnswerAndNeverReachesTheHandler) {
  auto server = StartServer(options_, counting_.handler());
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  const std::string request =
      "POST /agent/v1/register HTTP/1.1\r\nHost: x\r\nAuthorization: HyperfleetNode "
      "i-1:secret-token\r\nContent-Length: 2\r\n\r\n{}";
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  bool eof = false;
  const std::string reply = ReadUntilEof(fd, 10s, &eof);
  ::close(fd);
  EXPECT_TRUE(eof);
  EXPECT_FALSE(absl::StrContains(reply, "HTTP/")) << reply;
  EXPECT_EQ(counting_.requests, 0);
}

TEST_F(TlsServerTest, SilentConnectionIsClosedAfterTheRequestTimeout) {
  options_.request_timeout = 300ms;
  auto server = StartServer(options_, counting_.handler());
  ASSERT_NE(server, nullptr);
  const int fd = ConnectRaw(server->port());
  ASSERT_GE(fd, 0);
  bool eof = false;
  const auto start = std::chrono::steady_clock::now();
  ReadUntilEof(fd, 10s, &eof);
  ::close(fd);
  EXPECT_TRUE(eof);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(TlsServerTest, BadTlsOptionsAreRefused) {
  HttpServerOptions no_key = options_;
  no_key.tls_private_key_pem.clear();
  EXPECT_EQ(HttpServer::Start(no_key, counting_.handler()).status().code(),
            absl::StatusCode::kInvalidArgument);
  HttpServerOptions upgrade = options_;
  upgrade.wants_upgrade = [](const HttpRequest&) { return true; };
  upgrade.on_upgrade = [](HttpRequest&&, int fd, std::string) { ::close(fd); };
  EXPECT_EQ(HttpServer::Start(upgrade, counting_.handler()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto other = LoadOrCreateTlsIdentity(dir_.path() + "/other", "127.0.0.1");
  ASSERT_TRUE(other.ok());
  HttpServerOptions mismatched = options_;
  mismatched.tls_private_key_pem = other->private_key_pem;
  EXPECT_EQ(HttpServer::Start(mismatched, counting_.handler()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::http
