// HTTP/1.1 server on Boost.Beast. One io_context is run by `io_threads` threads; every
// connection is a Session whose operations run on its own strand, so a session never runs on
// two threads at once and needs no locks. A session only occupies a thread while its handler
// runs: between requests it is an outstanding async read (a socket, a ~512-byte buffer, a
// parser and the request deadline's timer), which is what keeps thousands of idle keep-alive
// connections cheap. With a TLS certificate (HttpServerOptions::tls_certificate_pem) a
// session first completes a TLS handshake; its reads and writes then go through an
// asio::ssl::stream layered over the same tcp_stream, whose timeouts still apply.
#include "hyperfleet/http/http_server.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <exception>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace hf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kAwsJsonContentType = "application/x-amz-json-1.1";
// Interim response for "Expect: 100-continue"; Beast's parser does not send it by itself.
constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";
// After an error response we close only once the client has stopped sending (or these
// limits pass): closing a socket with unread input makes the kernel send RST, which can
// destroy the error response before the client reads it.
constexpr auto kLingerReadTimeout = std::chrono::seconds(2);
constexpr auto kLingerTotal = std::chrono::seconds(5);
constexpr std::size_t kLingerChunk = 16 * 1024;
// Accept failures such as EMFILE repeat immediately; wait before retrying instead of spinning.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

std::string AwsErrorBody(std::string_view type, std::string_view message) {
  nlohmann::ordered_json body;
  body["__type"] = type;
  body["message"] = message;
  // Exception texts may hold arbitrary bytes; never let them make dump() throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse AwsError(int status, std::string_view type, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.headers.emplace_back("Content-Type", std::string(kAwsJsonContentType));
  response.headers.emplace_back("x-amzn-ErrorType", std::string(type));
  response.body = AwsErrorBody(type, message);
  return response;
}

bool IsFramingHeader(std::string_view name) {
  return HeaderNameEquals(name, "Content-Length") || HeaderNameEquals(name, "Transfer-Encoding") ||
         HeaderNameEquals(name, "Connection");
}

// A header that would let handler-supplied text inject lines into the response.
bool IsUnsafeHeader(std::string_view name, std::string_view value) {
  auto has_line_break = [](std::string_view s) {
    return s.find_first_of("\r\n") != std::string_view::npos;
  };
  return name.empty() || name.find(':') != std::string_view::npos || has_line_break(name) ||
         has_line_break(value);
}

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  const std::string address = endpoint.address().to_string();
  return endpoint.address().is_v6() ? absl::StrCat("[", address, "]:", endpoint.port())
                                    : absl::StrCat(address, ":", endpoint.port());
}

class Session;

// What the acceptor and all sessions share. It outlives every session: the server joins its
// threads only once every session has ended, and destroys the io_context before this.
struct ServerCore {
  HttpServerOptions options;
  HttpHandler handler;
  std::unique_ptr<asio::ssl::context> tls;  // set: every connection is TLS

  std::mutex mu;
  bool stopping_locked = false;                // guarded by mu; mirrors `stopping`
  std::list<std::weak_ptr<Session>> sessions;  // guarded by mu; live sessions for stop()
  std::atomic<bool> stopping{false};           // lock-free read on the hot path

  std::chrono::milliseconds request_timeout() const { return options.request_timeout; }
  std::chrono::seconds io_timeout() const {
    return std::chrono::seconds(options.io_timeout_seconds);
  }
  std::chrono::seconds stop_grace() const {
    return std::chrono::seconds(options.stop_grace_seconds);
  }
};

// One connection: read a request, run the handler, write the response, repeat while the
// connection is kept alive. All member functions run on the connection's strand.
//
// Streaming responses (log follow, terminal sessions) can later be added without changing
// this loop's shape: Dispatch() would receive a response that asks to take over the
// connection, write its header, and hand `stream_` (moved out) plus `buffer_` to the
// streaming code instead of calling ReadHeader() again; this session then simply ends.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerCore& core, tcp::socket socket)
      : core_(core), stream_(std::move(socket)), request_timer_(stream_.get_executor()) {
    if (core_.tls) tls_ = std::make_unique<TlsStream>(stream_, *core_.tls);
  }

  ~Session() {
    if (registered_) {
      std::lock_guard<std::mutex> lock(core_.mu);
      core_.sessions.erase(registry_pos_);
    }
  }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Registers the session for stop() and starts reading; called from the acceptor's strand.
  void Start() {
    {
      std::lock_guard<std::mutex> lock(core_.mu);
      if (core_.stopping_locked) return;  // dropping the last reference closes the socket
      registry_pos_ = core_.sessions.insert(core_.sessions.end(), weak_from_this());
      registered_ = true;
    }
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(tls_ ? &Session::Handshake : &Session::ReadHeader,
                                             shared_from_this()));
  }

  // Posted by HttpServer::stop(). Idle or half-read connections close now; a response being
  // written gets stop_grace_seconds to finish.
  void OnServerStop() {
    switch (state_) {
      case State::kReading:
      case State::kLingering:
        Close();
        break;
      case State::kWriting:
        grace_timer_ = std::make_unique<asio::steady_timer>(stream_.get_executor());
        grace_timer_->expires_after(core_.stop_grace());
        grace_timer_->async_wait([self = shared_from_this()](beast::error_code ec) {
          if (!ec) self->Close();
        });
        break;
      case State::kClosed:
        break;
    }
  }

  auto executor() { return stream_.get_executor(); }

 private:
  enum class State { kReading, kWriting, kLingering, kClosed };
  using TlsStream = asio::ssl::stream<beast::tcp_stream&>;

  // Runs `op` on what carries HTTP: the TLS layer when there is one, else the TCP stream.
  template <class Op>
  void WithStream(Op&& op) {
    if (tls_) {
      op(*tls_);
    } else {
      op(stream_);
    }
  }

  // TLS first, within the request deadline; a failed handshake (plain HTTP, a client that
  // refuses our certificate) closes the connection without a word.
  void Handshake() {
    if (core_.stopping) return Close();
    state_ = State::kReading;
    stream_.expires_after(core_.request_timeout());
    tls_->async_handshake(asio::ssl::stream_base::server,
                          beast::bind_front_handler(&Session::OnHandshake, shared_from_this()));
  }

  void OnHandshake(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec) {
      spdlog::debug("TLS handshake failed: {}", ec.message());
      return Close();
    }
    ReadHeader();
  }

  void ReadHeader() {
    if (core_.stopping) return Close();
    state_ = State::kReading;
    // An idle connection should hold no large buffer left over from its last request.
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<std::size_t>(core_.options.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(core_.options.max_body_bytes);
    // One deadline covers waiting for the next request and receiving all of it (see
    // HttpServerOptions::request_timeout). It is our own timer, not the stream's expiry,
    // because that closes the socket and a partial request is owed a 408.
    stream_.expires_never();
    reading_request_ = true;
    request_timed_out_ = false;
    ++request_number_;
    request_timer_.expires_after(core_.request_timeout());
    request_timer_.async_wait(beast::bind_front_handler(&Session::OnRequestDeadline,
                                                        shared_from_this(), request_number_));
    WithStream([&](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_,
                               beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
    });
  }

  // The request that began `request_number` is still being read: abort its read (it
  // completes with operation_aborted and OnReadError answers 408 or closes).
  void OnRequestDeadline(std::uint64_t request_number, beast::error_code ec) {
    if (ec || state_ == State::kClosed || !reading_request_ || request_number != request_number_) {
      return;
    }
    request_timed_out_ = true;
    stream_.cancel();
  }

  void OnHeader(beast::error_code ec, std::size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    if (ec || request_timed_out_) return OnReadError(ec);
    if (core_.stopping) return Close();
    if (parser_->is_done()) return Dispatch();
    const auto& request = parser_->get();
    if (request.version() >= 11 && beast::iequals(request[bhttp::field::expect], "100-continue")) {
      // The client waits for this before sending the body (curl does so for large bodies).
      state_ = State::kWriting;
      stream_.expires_after(core_.io_timeout());
      WithStream([&](auto& stream) {
        asio::async_write(
            stream, asio::buffer(kContinueResponse.data(), kContinueResponse.size()),
            beast::bind_front_handler(&Session::OnContinueWritten, shared_from_this()));
      });
      return;
    }
    ReadBody();
  }

  void OnContinueWritten(beast::error_code ec, std::size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    if (ec) return Close();
    ReadBody();
  }

  void ReadBody() {
    if (core_.stopping) return Close();
    if (request_timed_out_) return OnReadError(beast::error::timeout);
    state_ = State::kReading;
    stream_.expires_after(core_.io_timeout());
    WithStream([&](auto& stream) {
      bhttp::async_read(stream, buffer_, *parser_,
                        beast::bind_front_handler(&Session::OnBody, shared_from_this()));
    });
  }

  void OnBody(beast::error_code ec, std::size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    if (ec || request_timed_out_) return OnReadError(ec);
    if (core_.stopping) return Close();
    Dispatch();
  }

  void OnReadError(beast::error_code ec) {
    EndRequestRead();
    version_ = 11;
    request_is_head_ = false;
    if (request_timed_out_) {
      // Nothing of a request yet: an idle keep-alive connection, closed without a word.
      const bool partial = buffer_.size() > 0 || (parser_ && parser_->got_some());
      if (!partial) return Close();
      return Write(AwsError(408, "RequestTimeoutException",
                            absl::StrCat("The request did not arrive within ",
                                         core_.request_timeout().count(), " ms")),
                   /*keep_alive=*/false, /*linger=*/true);
    }
    const std::size_t limit = core_.options.max_body_bytes;
    if (ec == bhttp::error::body_limit) {
      // The length is known only when it came from Content-Length (not for chunked). The
      // parser stopped inside the header, so read the field rather than content_length().
      const auto field = parser_->get()[bhttp::field::content_length];
      std::uint64_t length = 0;
      const auto [end, parse_error] =
          std::from_chars(field.data(), field.data() + field.size(), length);
      const bool known =
          !field.empty() && parse_error == std::errc() && end == field.data() + field.size();
      const std::string message =
          known ? absl::StrCat("Request body of ", length, " bytes exceeds the limit of ", limit,
                               " bytes")
                : absl::StrCat("Request body exceeds the limit of ", limit, " bytes");
      return Write(AwsError(413, "RequestEntityTooLargeException", message),
                   /*keep_alive=*/false, /*linger=*/true);
    }
    if (ec == bhttp::error::header_limit) {
      return Write(AwsError(431, "SerializationException",
                            absl::StrCat("Request header exceeds the limit of ",
                                         core_.options.max_header_bytes, " bytes")),
                   /*keep_alive=*/false, /*linger=*/true);
    }
    // end_of_stream: the client closed between requests; partial_message: it closed
    // mid-request. Neither can be answered. Socket errors and timeouts just close too.
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      return Write(AwsError(400, "SerializationException", "Malformed HTTP request"),
                   /*keep_alive=*/false, /*linger=*/true);
    }
    Close();
  }

  void EndRequestRead() {
    reading_request_ = false;
    request_timer_.cancel();
  }

  // Runs the handler synchronously on this I/O thread (see HttpHandler).
  void Dispatch() {
    state_ = State::kWriting;  // nothing else runs on this strand until the write starts
    EndRequestRead();  // also before a hand-over: an upgraded session has no request deadline
    bhttp::request<bhttp::string_body> message = parser_->release();
    parser_.reset();
    const bool keep_alive = message.keep_alive();
    request_is_head_ = message.method() == bhttp::verb::head;
    version_ = message.version();

    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    {
      beast::error_code peer_ec;
      const tcp::endpoint peer = stream_.socket().remote_endpoint(peer_ec);
      if (!peer_ec) request.remote_address = peer.address().to_string();
    }
    for (const auto& field : message) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(message.body());
    if (core_.options.wants_upgrade && core_.options.on_upgrade &&
        core_.options.wants_upgrade(request)) {
      return HandOver(std::move(request));
    }

    HttpResponse response;
    try {
      response = core_.handler(std::move(request));
    } catch (const std::exception& e) {
      spdlog::error("HTTP handler threw: {}", e.what());
      response = AwsError(500, "InternalFailure", e.what());
    } catch (...) {
      spdlog::error("HTTP handler threw a non-standard exception");
      response = AwsError(500, "InternalFailure", "Internal server error");
    }
    Write(std::move(response), keep_alive, /*linger=*/false);
  }

  // Gives the connection to options.on_upgrade: the socket leaves Asio (release(), so no
  // shutdown reaches the peer) and this session ends without touching it again.
  void HandOver(HttpRequest request) {
    std::string buffered(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(buffer_.size());
    stream_.expires_never();
    beast::error_code ec;
    const int fd = stream_.socket().release(ec);
    state_ = State::kClosed;
    if (ec) {
      spdlog::warn("HTTP upgrade: cannot release the socket: {}", ec.message());
      stream_.close();
      return;
    }
    try {
      core_.options.on_upgrade(std::move(request), fd, std::move(buffered));
    } catch (const std::exception& e) {
      spdlog::error("HTTP upgrade handler threw: {}", e.what());
    }
  }

  // Sends `response`; then reads the next request, closes, or (linger) drains and closes.
  void Write(HttpResponse response, bool keep_alive, bool linger) {
    if (response.status < 100 || response.status > 999) {
      spdlog::error("HTTP handler returned invalid status {}", response.status);
      response = AwsError(500, "InternalFailure",
                          absl::StrCat("Handler returned invalid HTTP status ", response.status));
    }
    keep_alive = keep_alive && !core_.stopping;

    response_ = std::make_unique<bhttp::response<bhttp::string_body>>();
    auto& out = *response_;
    out.version(version_);
    out.result(static_cast<unsigned>(response.status));
    const bool has_server =
        std::any_of(response.headers.begin(), response.headers.end(),
                    [](const auto& header) { return HeaderNameEquals(header.first, "Server"); });
    if (!has_server) out.insert(bhttp::field::server, "hyperfleet");
    for (const auto& [name, value] : response.headers) {
      if (IsFramingHeader(name)) continue;
      if (IsUnsafeHeader(name, value)) {
        spdlog::warn("HTTP handler returned an unsafe header; dropped");
        continue;
      }
      out.insert(name, value);
    }
    const int status = response.status;
    if (status >= 200 && status != 204 && status != 304) {
      out.content_length(response.body.size());
      out.body() = std::move(response.body);
    }
    out.keep_alive(keep_alive);

    state_ = State::kWriting;
    stream_.expires_after(core_.stopping ? core_.stop_grace() : core_.io_timeout());
    auto on_write =
        beast::bind_front_handler(&Session::OnWrite, shared_from_this(), keep_alive, linger);
    if (request_is_head_) {
      head_serializer_ = std::make_unique<bhttp::response_serializer<bhttp::string_body>>(out);
      WithStream([&](auto& stream) {
        bhttp::async_write_header(stream, *head_serializer_, std::move(on_write));
      });
    } else {
      WithStream([&](auto& stream) { bhttp::async_write(stream, out, std::move(on_write)); });
    }
  }

  void OnWrite(bool keep_alive, bool linger, beast::error_code ec, std::size_t /*bytes*/) {
    head_serializer_.reset();
    response_.reset();
    if (grace_timer_) grace_timer_->cancel();
    if (state_ == State::kClosed) return;
    if (ec) return Close();
    if (linger) return Linger();
    if (!keep_alive) return Close();
    ReadHeader();
  }

  void Linger() {
    state_ = State::kLingering;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    linger_deadline_ = Clock::now() + kLingerTotal;
    LingerRead();
  }

  void LingerRead() {
    const auto now = Clock::now();
    if (core_.stopping || now >= linger_deadline_) return Close();
    stream_.expires_after(std::min<Clock::duration>(kLingerReadTimeout, linger_deadline_ - now));
    // Raw bytes even under TLS: they are discarded, so there is nothing to decrypt.
    stream_.async_read_some(buffer_.prepare(kLingerChunk),
                            beast::bind_front_handler(&Session::OnLinger, shared_from_this()));
  }

  void OnLinger(beast::error_code ec, std::size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    if (ec) return Close();  // includes EOF: the client is done
    LingerRead();            // discard what was read; prepare() reuses the same storage
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    request_timer_.cancel();
    if (grace_timer_) grace_timer_->cancel();
    // Pending operations complete with operation_aborted; the last one frees the session.
  }

  ServerCore& core_;
  beast::tcp_stream stream_;
  std::unique_ptr<TlsStream> tls_;  // over stream_ when the server is TLS
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  // Allocated only while a response is being written (~0.5 KiB an idle connection need not
  // carry).
  std::unique_ptr<bhttp::response<bhttp::string_body>> response_;
  std::unique_ptr<bhttp::response_serializer<bhttp::string_body>> head_serializer_;
  std::unique_ptr<asio::steady_timer> grace_timer_;  // only while stopping
  asio::steady_timer request_timer_;                 // the request_timeout deadline
  std::uint64_t request_number_ = 0;  // counts requests read; tells a stale deadline apart
  bool reading_request_ = false;      // between ReadHeader and Dispatch/OnReadError
  bool request_timed_out_ = false;    // the deadline aborted the current request's read
  State state_ = State::kReading;
  unsigned version_ = 11;
  bool request_is_head_ = false;
  Clock::time_point linger_deadline_;
  bool registered_ = false;
  std::list<std::weak_ptr<Session>>::iterator registry_pos_;  // valid when registered_
};

class BeastHttpServer final : public HttpServer {
 public:
  BeastHttpServer(const HttpServerOptions& options, HttpHandler handler,
                  std::unique_ptr<asio::ssl::context> tls)
      : ioc_(options.io_threads),
        accept_strand_(asio::make_strand(ioc_)),
        acceptor_(accept_strand_),
        accept_timer_(accept_strand_) {
    core_.options = options;
    core_.handler = std::move(handler);
    core_.tls = std::move(tls);
  }

  ~BeastHttpServer() override { stop(); }

  uint16_t port() const override { return port_; }

  Status Listen() {
    const HttpServerOptions& options = core_.options;
    beast::error_code ec;
    if (options.listen_fd >= 0) {  // a socket bound elsewhere, e.g. in another netns
      const int fd = ::dup(options.listen_fd);
      if (fd < 0) return absl::UnavailableError("cannot adopt HTTP listen_fd: dup failed");
      const bool v6 = [&] {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        return ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
               ss.ss_family == AF_INET6;
      }();
      if (acceptor_.assign(v6 ? tcp::v6() : tcp::v4(), fd, ec); ec) {
        ::close(fd);
        return absl::UnavailableError(absl::StrCat("cannot adopt HTTP listen_fd: ", ec.message()));
      }
      port_ = acceptor_.local_endpoint(ec).port();
      return absl::OkStatus();
    }
    tcp::endpoint endpoint;
    const asio::ip::address address = asio::ip::make_address(options.host, ec);
    if (!ec) {
      endpoint = tcp::endpoint(address, options.port);
    } else {
      tcp::resolver resolver(ioc_);
      auto results =
          resolver.resolve(options.host, std::to_string(options.port), tcp::resolver::passive, ec);
      if (ec || results.empty()) {
        return absl::UnavailableError(absl::StrCat("cannot resolve HTTP listen address ",
                                                   options.host, ":", options.port, ": ",
                                                   ec ? ec.message() : "no addresses"));
      }
      endpoint = results.begin()->endpoint();
    }
    auto fail = [&](const char* step) {
      return absl::UnavailableError(absl::StrCat("cannot ", step, " HTTP server on ",
                                                 FormatEndpoint(endpoint), ": ", ec.message()));
    };
    if (acceptor_.open(endpoint.protocol(), ec); ec) return fail("open socket for");
    if (acceptor_.set_option(asio::socket_base::reuse_address(true), ec); ec) {
      return fail("set SO_REUSEADDR for");
    }
    if (acceptor_.bind(endpoint, ec); ec) return fail("bind");
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) {
      return fail("listen");
    }
    const tcp::endpoint bound = acceptor_.local_endpoint(ec);
    if (ec) return fail("query the bound port of");
    port_ = bound.port();
    return absl::OkStatus();
  }

  void Run() {
    DoAccept();  // queued before the threads start, so they always have work
    threads_.reserve(static_cast<std::size_t>(core_.options.io_threads));
    for (int i = 0; i < core_.options.io_threads; ++i) {
      threads_.emplace_back([this] { RunLoop(); });
    }
  }

  void stop() override {
    std::lock_guard<std::mutex> stop_lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;

    std::vector<std::weak_ptr<Session>> sessions;
    {
      std::lock_guard<std::mutex> lock(core_.mu);
      core_.stopping_locked = true;
      core_.stopping = true;
      sessions.assign(core_.sessions.begin(), core_.sessions.end());
    }
    asio::post(accept_strand_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      accept_timer_.cancel();
    });
    for (const auto& weak : sessions) {
      if (auto session = weak.lock()) {
        asio::post(session->executor(), [session] { session->OnServerStop(); });
      }
    }
    // The threads return from run() once the acceptor and every session are gone.
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  void DoAccept() {
    // Each connection gets its own strand: its handlers never run concurrently.
    acceptor_.async_accept(asio::make_strand(ioc_),
                           beast::bind_front_handler(&BeastHttpServer::OnAccept, this));
  }

  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (core_.stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      spdlog::warn("HTTP accept failed: {}; retrying", ec.message());
      accept_timer_.expires_after(kAcceptBackoff);
      accept_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && !core_.stopping) DoAccept();
      });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // responses are single writes
    std::make_shared<Session>(core_, std::move(socket))->Start();
    DoAccept();
  }

  void RunLoop() {
    pthread_setname_np(pthread_self(), "hf-http-io");
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("HTTP I/O thread caught exception: {}", e.what());
      }
    }
  }

  // Declaration order is destruction order in reverse: the io_context (which may still own
  // sessions' handlers) goes before core_, which sessions reference.
  ServerCore core_;
  asio::io_context ioc_;
  asio::strand<asio::io_context::executor_type> accept_strand_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_
};

// The TLS context of options.tls_*, or null for plain HTTP. InvalidArgument when the
// certificate or key is missing, unreadable or unmatched, or upgrades are asked for too.
StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const HttpServerOptions& options) {
  if (options.tls_certificate_pem.empty() && options.tls_private_key_pem.empty()) {
    return std::unique_ptr<asio::ssl::context>();
  }
  if (options.tls_certificate_pem.empty() || options.tls_private_key_pem.empty()) {
    return absl::InvalidArgumentError("HttpServerOptions: a TLS certificate needs its key");
  }
  if (options.wants_upgrade || options.on_upgrade) {
    return absl::InvalidArgumentError("HttpServerOptions: TLS does not support upgrades");
  }
  auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::single_dh_use);
  beast::error_code ec;
  tls->use_certificate_chain(
      asio::buffer(options.tls_certificate_pem.data(), options.tls_certificate_pem.size()), ec);
  if (!ec) {
    tls->use_private_key(
        asio::buffer(options.tls_private_key_pem.data(), options.tls_private_key_pem.size()),
        asio::ssl::context::pem, ec);
  }
  if (!ec && SSL_CTX_check_private_key(tls->native_handle()) != 1) {
    return absl::InvalidArgumentError("HttpServerOptions: the TLS key is not the certificate's");
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HttpServerOptions: TLS certificate or key refused: ", ec.message()));
  }
  return tls;
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                        HttpHandler handler) {
  if (options.io_threads < 1 || options.request_timeout.count() < 1 ||
      options.io_timeout_seconds < 1 || options.stop_grace_seconds < 0) {
    return absl::InvalidArgumentError(
        "HttpServerOptions: io_threads, request_timeout (ms) and io_timeout_seconds must be "
        ">= 1 and stop_grace_seconds >= 0");
  }
  if (!handler) return absl::InvalidArgumentError("HttpServer::Start: no handler");
  HF_ASSIGN_OR_RETURN(auto tls, MakeTlsContext(options));
  auto server = std::make_unique<BeastHttpServer>(options, std::move(handler), std::move(tls));
  HF_RETURN_IF_ERROR(server->Listen());
  server->Run();
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace hf::http
