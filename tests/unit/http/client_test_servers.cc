#include "unit/http/client_test_servers.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>

namespace hf::http::testing {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  ASSERT_NE(ext, nullptr) << value;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Copies bytes both ways between a and b until either side closes.
void Relay(int a, int b) {
  char buf[16384];
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (::poll(fds, 2, 10000) > 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), 0);
      if (n <= 0 || !WriteAll(fds[1 - i].fd, std::string(buf, static_cast<size_t>(n)))) return;
    }
  }
}

}  // namespace

Pem MakeCertificate(const std::string& common_name, const std::vector<std::string>& sans,
                    const Pem* issuer, bool ca) {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  EXPECT_NE(key, nullptr);
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509Ptr issuer_cert;
  PkeyPtr issuer_key;
  if (issuer != nullptr) {
    BioPtr cb(BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size())));
    issuer_cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    BioPtr kb(BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size())));
    issuer_key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    EXPECT_TRUE(issuer_cert && issuer_key);
    X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer_cert.get()));
  } else {
    X509_set_issuer_name(cert.get(), name);
  }
  X509* signer = issuer_cert ? issuer_cert.get() : cert.get();
  AddExtension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (!sans.empty()) {
    std::string list;
    for (const auto& san : sans) list += (list.empty() ? "" : ",") + san;
    AddExtension(cert.get(), signer, NID_subject_alt_name, list);
  }
  EXPECT_GT(X509_sign(cert.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()), 0);
  Pem pem;
  BioPtr out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert.get());
  pem.cert = BioText(out.get());
  BioPtr kout(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(kout.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  pem.key = BioText(kout.get());
  return pem;
}

std::string WriteTempFile(const std::string& text) {
  char path[] = "/tmp/hf-http-client-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

ScopedEnv::ScopedEnv(
    std::initializer_list<std::pair<std::string, std::optional<std::string>>> values) {
  for (const auto& [name, value] : values) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
}

ScopedEnv::~ScopedEnv() {
  for (auto& [name, value] : saved_) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
}

std::string ReadHead(int fd) {
  std::string head;
  char c;
  while (head.size() < 65536) {
    if (::recv(fd, &c, 1, 0) != 1) return "";
    head += c;
    if (head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0) return head;
  }
  return "";
}

RawServer::RawServer(std::function<void(int fd)> on_connection)
    : on_connection_(std::move(on_connection)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(listen_fd_, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { Loop(); });
}

void RawServer::Loop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (stopping_) {
      ::close(fd);
      return;
    }
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] {
      on_connection_(fd);
      ::shutdown(fd, SHUT_RDWR);
    });
  }
}

RawServer::~RawServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  for (auto& t : threads_) t.join();
  for (int fd : open_fds_) ::close(fd);
}

ForwardProxy::ForwardProxy(int connect_status)
    : connect_status_(connect_status), server_([this](int fd) { Serve(fd); }) {}

std::vector<std::string> ForwardProxy::heads() {
  std::lock_guard<std::mutex> lock(mu_);
  return heads_;
}

void ForwardProxy::Serve(int fd) {
  const std::string head = ReadHead(fd);
  if (head.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    heads_.push_back(head);
  }
  if (head.rfind("CONNECT ", 0) != 0) {
    const std::string body = "from the proxy";
    WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n" + body);
    return;
  }
  if (connect_status_ != 200) {
    WriteAll(fd, "HTTP/1.1 " + std::to_string(connect_status_) +
                     " Forbidden\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  // "CONNECT 127.0.0.1:PORT HTTP/1.1": only loopback targets in these tests.
  const size_t colon = head.find(':');
  const int port = std::atoi(head.c_str() + colon + 1);
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    WriteAll(fd, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
    ::close(upstream);
    return;
  }
  WriteAll(fd, "HTTP/1.1 200 Connection established\r\n\r\n");
  Relay(fd, upstream);
  ::close(upstream);
}

}  // namespace hf::http::testing
