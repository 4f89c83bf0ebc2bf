#include "hyperfleet/http/http_client.h"

#include <netdb.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "http/http_client_route.h"
#include "hyperfleet/common/strings.h"

namespace hf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;
using ErrorCode = boost::system::error_code;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr std::uint32_t kHeaderLimit = 1 << 20;  // response header block, bytes

// Strings are assembled with std::string: Debian's Abseil has its own string_view type,
// which does not mix with std::string_view in absl::StrCat.
std::string JoinUrl(std::string_view base_url, std::string_view target) {
  while (!base_url.empty() && base_url.back() == '/') base_url.remove_suffix(1);
  std::string url(base_url);
  if (target.empty() || target.front() != '/') url += '/';
  url += target;
  return url;
}

// "ab:CD:..." -> "abcd..."; empty when it is not 32 bytes of hex.
std::string NormalizePin(std::string_view pin) {
  std::string out;
  for (char c : pin) {
    if (c == ':') continue;
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return "";
    out += absl::ascii_tolower(static_cast<unsigned char>(c));
  }
  return out.size() == 64 ? out : "";
}

std::string CertificateSha256(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert, EVP_sha256(), md, &n) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

// getaddrinfo on a thread of its own, waited for until `deadline`: it has no timeout of its
// own short of the resolver's, and cannot be cancelled. A late answer is dropped.
StatusOr<std::vector<tcp::endpoint>> Resolve(const std::string& host, uint16_t port,
                                             std::optional<SteadyTime> deadline) {
  ErrorCode ec;
  const asio::ip::address literal = asio::ip::make_address(host, ec);
  if (!ec) return std::vector<tcp::endpoint>{tcp::endpoint(literal, port)};
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
    std::vector<tcp::endpoint> endpoints;
  };
  auto state = std::make_shared<State>();
  std::thread([state, host, port] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    std::vector<tcp::endpoint> endpoints;
    for (addrinfo* p = rc == 0 ? found : nullptr; p != nullptr; p = p->ai_next) {
      tcp::endpoint endpoint;
      if (p->ai_addrlen > endpoint.capacity()) continue;
      std::memcpy(endpoint.data(), p->ai_addr, p->ai_addrlen);
      endpoint.resize(p->ai_addrlen);
      endpoint.port(port);
      endpoints.push_back(endpoint);
    }
    if (found != nullptr) freeaddrinfo(found);
    std::lock_guard<std::mutex> lock(state->mu);
    state->rc = rc;
    state->endpoints = std::move(endpoints);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mu);
  if (deadline) {
    if (!state->cv.wait_until(lock, *deadline, [&] { return state->done; })) {
      return absl::DeadlineExceededError("timed out resolving " + host);
    }
  } else {
    state->cv.wait(lock, [&] { return state->done; });
  }
  if (state->rc != 0) {
    return absl::UnavailableError("cannot resolve " + host + ": " + gai_strerror(state->rc));
  }
  if (state->endpoints.empty()) return absl::UnavailableError("no address for " + host);
  return std::move(state->endpoints);
}

// True when an idle kept-alive socket has something to read: the server closed it (EOF) or
// sent what nobody asked for (a TLS close_notify). Either way it must not be reused.
bool IdleSocketReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

}  // namespace

struct HttpClient::Impl {
  explicit Impl(HttpClientOptions o) : options(std::move(o)) {}

  // One open connection: plain or TLS over `tcp`; `key` says where it leads.
  struct Connection {
    std::string key;
    std::optional<beast::tcp_stream> plain;
    std::optional<TlsStream> tls;
    beast::flat_buffer buffer;

    beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  };

  HttpClientOptions options;
  asio::io_context ioc{1};
  std::optional<asio::ssl::context> tls_context;  // made at the first https request
  std::optional<Connection> conn;                 // declared after ioc: closed before it
  long connections_opened = 0;
  std::optional<SteadyTime> deadline;

  // Starts one asynchronous operation (`start(handler)`) and runs it to completion; the
  // tcp_stream's expiry (the exchange's deadline) cancels it with error::timeout.
  template <typename Start>
  ErrorCode Run(Start&& start) {
    ErrorCode result = asio::error::would_block;
    start([&result](ErrorCode ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  void Expire(beast::tcp_stream& s) {
    if (deadline) {
      s.expires_at(*deadline);
    } else {
      s.expires_never();
    }
  }

  Status TlsContext() {
    if (tls_context) return absl::OkStatus();
    tls_context.emplace(asio::ssl::context::tls_client);
    SSL_CTX* ctx = tls_context->native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (options.pinned_sha256.empty()) {
      ErrorCode ec;
      tls_context->set_default_verify_paths(ec);
      if (ec) return absl::UnavailableError("cannot load the system CA store: " + ec.message());
      tls_context->set_verify_mode(asio::ssl::verify_peer);
    } else {
      tls_context->set_verify_mode(asio::ssl::verify_none);  // the pin is checked instead
    }
    return absl::OkStatus();
  }

  // Opens a TCP connection to `host`:`port` as conn->plain.
  Status Connect(const std::string& host, uint16_t port) {
    HF_ASSIGN_OR_RETURN(std::vector<tcp::endpoint> endpoints, Resolve(host, port, deadline));
    conn->plain.emplace(ioc);
    Expire(*conn->plain);
    const ErrorCode ec = Run([&](auto handler) {
      conn->plain->async_connect(endpoints, std::move(handler));
    });
    if (ec == beast::error::timeout) return absl::DeadlineExceededError("timed out connecting");
    if (ec) {
      return absl::UnavailableError("cannot connect to " + endpoints.front().address().to_string() +
                                    " port " + std::to_string(port) + ": " + ec.message());
    }
    ++connections_opened;
    return absl::OkStatus();
  }

  // CONNECT host:port through the proxy conn->plain leads to (a tunnel for TLS).
  Status Tunnel(const client::Url& url, const client::Proxy& proxy) {
    bhttp::request<bhttp::empty_body> req{bhttp::verb::connect, url.Authority(true), 11};
    req.set(bhttp::field::host, url.Authority(true));
    if (!proxy.authorization.empty()) req.set(bhttp::field::proxy_authorization, proxy.authorization);
    const std::string who = "proxy " + proxy.host + ":" + std::to_string(proxy.port) + " (" +
                            proxy.variable + ")";
    ErrorCode ec = Run([&](auto handler) {
      bhttp::async_write(*conn->plain, req, std::move(handler));
    });
    bhttp::response_parser<bhttp::empty_body> parser;
    parser.skip(true);  // a CONNECT response has no body: the tunnel follows
    if (!ec) {
      ec = Run([&](auto handler) {
        bhttp::async_read(*conn->plain, conn->buffer, parser, std::move(handler));
      });
    }
    if (ec == beast::error::timeout) return absl::DeadlineExceededError("timed out at the " + who);
    if (ec) return absl::UnavailableError(who + ": " + ec.message());
    const unsigned status = parser.get().result_int();
    if (status / 100 != 2) {
      return absl::UnavailableError(who + " refused CONNECT " + url.Authority(true) + ": HTTP " +
                                    std::to_string(status));
    }
    return absl::OkStatus();
  }

  // TLS over conn->plain (moved into conn->tls), then the certificate check.
  Status Handshake(const client::Url& url, const std::string& pin) {
    HF_RETURN_IF_ERROR(TlsContext());
    conn->tls.emplace(std::move(*conn->plain), *tls_context);
    conn->plain.reset();
    SSL* ssl = conn->tls->native_handle();
    if (!url.host_is_ip) SSL_set_tlsext_host_name(ssl, url.host.c_str());
    if (pin.empty()) {
      const int ok = url.host_is_ip
                         ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str())
                         : SSL_set1_host(ssl, url.host.c_str());
      if (ok != 1) return absl::InternalError("cannot set the name to verify: " + url.host);
    }
    const ErrorCode ec = Run([&](auto handler) {
      conn->tls->async_handshake(asio::ssl::stream_base::client, std::move(handler));
    });
    if (ec == beast::error::timeout) {
      return absl::DeadlineExceededError("timed out in the TLS handshake");
    }
    if (ec) {
      std::string why = "TLS handshake failed: " + ec.message();
      if (const long verify = SSL_get_verify_result(ssl); pin.empty() && verify != X509_V_OK) {
        why += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
      }
      return absl::UnavailableError(why);
    }
    if (!pin.empty()) {
      X509* cert = SSL_get1_peer_certificate(ssl);
      const std::string got = cert != nullptr ? CertificateSha256(cert) : "";
      X509_free(cert);
      if (got != pin) {
        return absl::UnavailableError("the server's certificate SHA-256 " +
                                      (got.empty() ? std::string("(none)") : got) +
                                      " does not match the pinned " + pin);
      }
    }
    return absl::OkStatus();
  }

  // Makes conn lead to `url` (through `proxy`), reusing an idle one that leads there.
  Status Open(const client::Url& url, const std::optional<client::Proxy>& proxy,
              const std::string& pin, bool* reused) {
    std::string key = url.scheme + "://" + url.Authority(true);
    if (proxy) key += " via " + proxy->host + ":" + std::to_string(proxy->port) + proxy->authorization;
    *reused = false;
    if (conn && conn->key == key && conn->lowest().socket().is_open() &&
        !IdleSocketReadable(conn->lowest().socket().native_handle())) {
      *reused = true;
      return absl::OkStatus();
    }
    conn.emplace();
    conn->key = key;
    if (proxy) {
      HF_RETURN_IF_ERROR(Connect(proxy->host, proxy->port));
      if (url.scheme == "https") HF_RETURN_IF_ERROR(Tunnel(url, *proxy));
    } else {
      HF_RETURN_IF_ERROR(Connect(url.host, url.port));
    }
    if (url.scheme == "https") HF_RETURN_IF_ERROR(Handshake(url, pin));
    return absl::OkStatus();
  }

  // Writes `req` and reads the final response over conn. `started` tells whether any byte
  // of a response arrived (a request that failed before that may be sent again).
  template <typename Stream>
  Status Exchange(Stream& stream, bhttp::request<bhttp::string_body>& req, bool head,
                  HttpResponse* out, bool* started) {
    *started = false;
    ErrorCode ec = Run([&](auto handler) { bhttp::async_write(stream, req, std::move(handler)); });
    while (!ec) {
      bhttp::response_parser<bhttp::string_body> parser;
      parser.header_limit(kHeaderLimit);
      parser.body_limit(boost::none);
      if (head) parser.skip(true);
      ec = Run([&](auto handler) {
        bhttp::async_read(stream, conn->buffer, parser, std::move(handler));
      });
      *started = *started || parser.got_some();
      if (ec) break;
      auto& res = parser.get();
      const unsigned status = res.result_int();
      if (status / 100 == 1 && status != 101) continue;  // interim (100 Continue, 103)
      out->status = static_cast<int>(status);
      out->headers.clear();
      for (const auto& field : res) {
        out->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
      out->body = std::move(res.body());
      if (!res.keep_alive()) conn.reset();
      return absl::OkStatus();
    }
    if (ec == beast::error::timeout) return absl::DeadlineExceededError("timed out");
    return absl::UnavailableError(ec.message());
  }
};

HttpClient::HttpClient() : HttpClient(HttpClientOptions{}) {}
HttpClient::HttpClient(HttpClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&& other) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&& other) noexcept = default;

long HttpClient::connections_opened() const { return impl_ ? impl_->connections_opened : 0; }

StatusOr<HttpResponse> HttpClient::Send(const std::string& base_url, const HttpRequest& request,
                                        int timeout_seconds) {
  const std::string full_url = JoinUrl(base_url, request.target);
  const std::string method = request.method.empty() ? "GET" : request.method;
  auto fail = [&](const Status& why) {
    std::string message = method + " " + full_url + ": " + std::string(why.message());
    if (why.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(message);
    }
    if (why.code() == absl::StatusCode::kDeadlineExceeded) {
      message += " (timeout " + std::to_string(timeout_seconds) + " s)";
    }
    return absl::UnavailableError(message);
  };
  if (!impl_) return fail(absl::FailedPreconditionError("the client was moved from"));
  auto url = client::ParseUrl(full_url);
  if (!url.ok()) return fail(url.status());
  std::string pin;
  if (!impl_->options.pinned_sha256.empty()) {
    pin = NormalizePin(impl_->options.pinned_sha256);
    if (pin.empty()) {
      return fail(absl::InvalidArgumentError("the pinned certificate SHA-256 \"" +
                                             impl_->options.pinned_sha256 +
                                             "\" is not 64 hex digits"));
    }
  }
  const bool direct = impl_->options.direct;
  auto proxy = client::ProxyFor(*url, [direct](const char* name) -> std::optional<std::string> {
    if (direct) return std::nullopt;  // as if no proxy variable were set
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
  if (!proxy.ok()) return fail(proxy.status());

  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(*proxy && url->scheme == "http" ? url->Absolute() : url->target);
  req.version(11);
  if (!request.header("Host")) req.insert(bhttp::field::host, url->Authority(false));
  for (const auto& [name, value] : request.headers) req.insert(name, value);
  if (*proxy && url->scheme == "http" && !(*proxy)->authorization.empty()) {
    req.insert(bhttp::field::proxy_authorization, (*proxy)->authorization);
  }
  if ((!request.body.empty() || method == "POST") && !request.header("Content-Length") &&
      !request.header("Transfer-Encoding")) {
    req.insert(bhttp::field::content_length, std::to_string(request.body.size()));
  }
  req.body() = request.body;

  Impl& impl = *impl_;
  impl.deadline.reset();
  if (timeout_seconds > 0) {
    impl.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  }
  const bool head = method == "HEAD";
  // A kept-alive connection the server closed meanwhile fails before any response byte:
  // then the request goes once more over a new connection (as libcurl does).
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    if (Status s = impl.Open(*url, *proxy, pin, &reused); !s.ok()) {
      impl.conn.reset();
      return fail(s);
    }
    impl.Expire(impl.conn->lowest());
    HttpResponse response;
    bool started = false;
    Status s = impl.conn->tls ? impl.Exchange(*impl.conn->tls, req, head, &response, &started)
                              : impl.Exchange(*impl.conn->plain, req, head, &response, &started);
    if (s.ok()) return response;
    impl.conn.reset();
    if (!(reused && !started && attempt == 0 && s.code() != absl::StatusCode::kDeadlineExceeded)) {
      return fail(s);
    }
  }
}

}  // namespace hf::http
