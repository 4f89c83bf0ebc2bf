#pragma once
// Peers for the HTTP client's tests (http_client_*_test.cc): certificates made here with
// OpenSSL, a raw TCP server answering with scripted bytes, a forward proxy (absolute-form
// requests answered itself, CONNECT tunnelled to the target), and a scoped environment.
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hf::http::testing {

/// A PEM certificate and its PEM private key.
struct Pem {
  std::string cert;
  std::string key;
};

/// An EC P-256 certificate for `common_name` with subjectAltName entries `sans` (each
/// "DNS:name" or "IP:addr"), valid from an hour ago for a day; signed by `issuer`, or
/// self-signed when null. `ca`: basicConstraints CA:TRUE (an issuer).
Pem MakeCertificate(const std::string& common_name, const std::vector<std::string>& sans,
                    const Pem* issuer, bool ca = false);

/// Writes `text` to a new file under /tmp and returns its path (removed by the caller).
std::string WriteTempFile(const std::string& text);

/// Sets (or with nullopt unsets) environment variables; restores the old values at the end.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<std::string, std::optional<std::string>>> values);
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv();

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// Reads a request head (through the blank line) from `fd`; empty on EOF or error.
std::string ReadHead(int fd);

/// Listens on 127.0.0.1 (port 0) and runs `on_connection(fd)` for each accepted connection
/// on a thread of its own; the fd is closed after it returns. Stops and joins in the
/// destructor (connections' handlers must return by then: they see shutdown on their fd).
class RawServer {
 public:
  explicit RawServer(std::function<void(int fd)> on_connection);
  ~RawServer();
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Loop();
  std::function<void(int)> on_connection_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

/// A forward proxy: CONNECT host:port is answered `connect_status` and, when 200,
/// tunnelled to that address; any other request is answered by the proxy itself (200,
/// body "from the proxy", connection closed). Records each request head it got.
class ForwardProxy {
 public:
  explicit ForwardProxy(int connect_status = 200);
  uint16_t port() const { return server_.port(); }
  std::vector<std::string> heads();

 private:
  void Serve(int fd);
  int connect_status_;
  std::mutex mu_;
  std::vector<std::string> heads_;
  RawServer server_;
};

}  // namespace hf::http::testing
