// The session client: one io_context thread (this one) runs the WebSocket, signals and the
// write queue; a helper thread reads stdin (which may be a file or /dev/null, which cannot be
// polled by epoll) and posts what it reads.
#include "hyperfleet/session/session_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/session/protocol.h"
#include "nlohmann/json.hpp"

namespace hf::session {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;

constexpr std::size_t kStdinChunk = 16 * 1024;
constexpr std::size_t kMaxQueuedStdin = 1u << 20;

struct Endpoint {
  std::string host;
  std::string port;
};

StatusOr<Endpoint> ParseEndpoint(std::string_view url) {
  if (url.starts_with("https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sessions need an http:// endpoint (the control plane serves plain HTTP); got ", std::string(url)));
  }
  if (!url.starts_with("http://")) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint URL must be http://..., got ", std::string(url)));
  }
  std::string_view rest = url.substr(7);
  rest = rest.substr(0, rest.find('/'));
  Endpoint e;
  if (rest.starts_with("[")) {  // [v6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad endpoint URL ", std::string(url)));
    }
    e.host = std::string(rest.substr(1, close - 1));
    if (close + 1 < rest.size() && rest[close + 1] == ':') e.port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) e.port = rest.substr(colon + 1);
  }
  if (e.port.empty()) e.port = "80";
  if (e.host.empty()) return absl::InvalidArgumentError(absl::StrCat("bad endpoint URL ", std::string(url)));
  return e;
}

// The refusal of an upgrade as a Status carrying the server's AWS error type.
Status RefusalStatus(const websocket::response_type& response) {
  std::string type = std::string(response["x-amzn-ErrorType"]);
  std::string message = response.body();
  auto body = nlohmann::json::parse(response.body(), nullptr, false);
  if (body.is_object()) {
    if (body.contains("__type") && body["__type"].is_string()) {
      type = body["__type"].get<std::string>();
      type = type.substr(type.find('#') + 1);
    }
    if (body.contains("message") && body["message"].is_string()) {
      message = body["message"].get<std::string>();
    }
  }
  const unsigned code = response.result_int();
  if (message.empty()) message = absl::StrCat("HTTP ", code, " ", std::string(response.reason()));
  Status status;
  if (code == 403) {
    status = absl::UnauthenticatedError(message);
  } else if (type == "TargetNotConnected") {
    status = absl::FailedPreconditionError(message);
  } else if (code >= 500) {
    status = absl::InternalError(message);
  } else {
    status = absl::InvalidArgumentError(message);
  }
  return type.empty() ? status : WithAwsErrorType(status, type);
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, -1);
        continue;
      }
      return;  // the reader went away; nothing sensible to do with the output
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Puts a terminal into raw mode for its lifetime.
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(fd_, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

std::optional<std::pair<uint16_t, uint16_t>> WindowSize(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) return std::nullopt;
  return std::make_pair(static_cast<uint16_t>(ws.ws_col), static_cast<uint16_t>(ws.ws_row));
}

class Client {
 public:
  Client(const SessionClientOptions& options, Endpoint endpoint)
      : options_(options), endpoint_(std::move(endpoint)), ws_(ioc_), signals_(ioc_) {}

  StatusOr<int> Run() {
    HF_RETURN_IF_ERROR(Connect());
    std::optional<RawTerminal> raw;
    if (options_.pty) raw.emplace(options_.stdin_fd);

    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.add(SIGHUP);
    if (options_.pty) signals_.add(SIGWINCH);
    WaitSignal();
    ReadFrame();
    if (pipe2(wake_, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    std::thread stdin_thread([this] { ReadStdin(); });
    ioc_.run();
    // Stop the stdin reader (it may be blocked in poll) and join it.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    stdin_cv_.notify_all();
    [[maybe_unused]] auto n = ::write(wake_[1], "x", 1);
    stdin_thread.join();
    close(wake_[0]);
    close(wake_[1]);
    raw.reset();
    if (signal_) return 128 + signal_;
    if (!error_.empty()) return absl::InternalError(error_);
    if (!exit_status_) {
      return absl::UnavailableError(absl::StrCat("the session ended without an exit status (",
                                                 read_error_, ")"));
    }
    return *exit_status_;
  }

 private:
  std::string RequestTarget() const {
    std::string target =
        absl::StrCat(std::string(kSessionPath), "?target=", UriEncode(options_.target));
    if (options_.command) absl::StrAppend(&target, "&command=", UriEncode(*options_.command));
    if (options_.pty) {
      std::string term = options_.term;
      if (term.empty()) {
        const char* env = std::getenv("TERM");
        term = env && *env ? env : "xterm-256color";
      }
      absl::StrAppend(&target, "&pty=1&term=", UriEncode(term));
      if (auto size = WindowSize(options_.stdin_fd)) {
        absl::StrAppend(&target, "&cols=", size->first, "&rows=", size->second);
      }
    }
    return target;
  }

  Status Connect() {
    http::HttpRequest request;
    request.method = "GET";
    request.target = RequestTarget();
    if (options_.sign) options_.sign(request);
    std::string host = absl::StrCat(endpoint_.host, ":", endpoint_.port);
    if (auto h = request.header("Host")) host = std::string(*h);

    const std::string where = absl::StrCat("http://", endpoint_.host, ":", endpoint_.port);
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", ec.message()));
    }
    auto& stream = beast::get_lowest_layer(ws_);
    stream.expires_after(std::chrono::seconds(options_.connect_timeout_seconds));
    stream.connect(results, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot connect to the control plane at ", where,
                                                 ": ", ec.message()));
    }
    stream.socket().set_option(tcp::no_delay(true), ec);
    ws_.set_option(websocket::stream_base::decorator([request](websocket::request_type& r) {
      for (const auto& [name, value] : request.headers) {
        if (!http::HeaderNameEquals(name, "Host")) r.set(name, value);
      }
      r.set(bhttp::field::user_agent, "hyperfleet-ssm");
    }));
    websocket::response_type response;
    ws_.handshake(response, host, request.target, ec);
    if (ec == websocket::error::upgrade_declined) return WhyDeclined(where);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("WebSocket handshake with ", where, " failed: ", ec.message()));
    }
    stream.expires_never();
    // Answer the server's keep-alive pings; no idle limit of our own (a shell may sit idle).
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = std::chrono::seconds(30);
    timeouts.idle_timeout = websocket::stream_base::none();
    timeouts.keep_alive_pings = false;
    ws_.set_option(timeouts);
    ws_.read_message_max(64u << 20);
    ws_.binary(true);
    return absl::OkStatus();
  }

  // Boost 1.74's handshake keeps neither the status nor the body of a refused upgrade, so
  // ask again with a plain signed GET: the server runs the same checks and answers with the
  // refusal (or says it wants an upgrade, when the refusal no longer applies).
  Status WhyDeclined(const std::string& where) {
    http::HttpRequest request;
    request.method = "GET";
    request.target = RequestTarget();
    if (options_.sign) options_.sign(request);
    beast::tcp_stream stream(ioc_);
    stream.expires_after(std::chrono::seconds(options_.connect_timeout_seconds));
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (!ec) stream.connect(results, ec);
    bhttp::request<bhttp::empty_body> out{bhttp::verb::get, request.target, 11};
    for (const auto& [name, value] : request.headers) out.set(name, value);
    out.set(bhttp::field::user_agent, "hyperfleet-ssm");
    if (!ec) bhttp::write(stream, out, ec);
    beast::flat_buffer buffer;
    websocket::response_type response;
    if (!ec) bhttp::read(stream, buffer, response, ec);
    if (ec || response.result_int() == 101 ||
        (response.result_int() == 400 && response.body().find("takes a WebSocket upgrade") !=
                                             std::string::npos)) {
      return absl::UnavailableError(
          absl::StrCat("the control plane at ", where, " declined the WebSocket upgrade"));
    }
    return RefusalStatus(response);
  }

  void WaitSignal() {
    signals_.async_wait([this](beast::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGWINCH) {
        if (auto size = WindowSize(options_.stdin_fd)) {
          Send(EncodeResize(size->first, size->second));
        }
        return WaitSignal();
      }
      signal_ = sig;  // the user ends the session; the server hangs it up
      Shutdown();
    });
  }

  void ReadFrame() {
    ws_.async_read(in_, [this](beast::error_code ec, std::size_t) {
      if (ec) {
        if (ec != websocket::error::closed) read_error_ = ec.message();
        else read_error_ = "the server closed the connection";
        return Shutdown();
      }
      const std::string message = beast::buffers_to_string(in_.data());
      in_.consume(in_.size());
      auto frame = DecodeFrame(message);
      if (frame.ok()) {
        switch (frame->type) {
          case FrameType::kStdout:
            WriteAll(options_.stdout_fd, frame->data);
            break;
          case FrameType::kStderr:
            WriteAll(options_.stderr_fd, frame->data);
            break;
          case FrameType::kExit:
            exit_status_ = frame->exit_status;
            break;
          case FrameType::kError:
            error_ = frame->data;
            break;
          default:
            break;
        }
      }
      ReadFrame();
    });
  }

  // Sends a control frame (resize).
  void Send(std::string frame) {
    if (shutting_down_) return;
    PushControl(std::move(frame));
    WriteNext();
  }

  void WriteNext() {
    if (writing_ || queue_.empty() || shutting_down_) return;
    writing_ = true;
    ws_.async_write(asio::buffer(queue_.front()), [this](beast::error_code ec, std::size_t) {
      writing_ = false;
      const std::size_t size = queue_.front().size();
      queue_.pop_front();
      if (is_stdin_.front()) {
        std::lock_guard<std::mutex> lock(mu_);
        queued_stdin_ -= size - 1;  // the reader counted the data, not the type byte
        stdin_cv_.notify_all();
      }
      is_stdin_.pop_front();
      if (ec) return Shutdown();
      WriteNext();
    });
  }

  // Called on the io_context thread for stdin data (or EOF when `eof`).
  void OnStdin(std::string data, bool eof) {
    if (shutting_down_) return;
    if (eof) {
      if (!options_.pty) PushControl(EncodeData(FrameType::kStdinEof, ""));
    } else {
      queue_.push_back(EncodeData(FrameType::kStdin, data));
      is_stdin_.push_back(true);
    }
    WriteNext();
  }

  // Queues a frame whose size is not counted against the stdin reader's credit.
  void PushControl(std::string frame) {
    queue_.push_back(std::move(frame));
    is_stdin_.push_back(false);
  }

  void Shutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    beast::error_code ignored;
    signals_.cancel(ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  void ReadStdin() {
    std::string buffer(kStdinChunk, '\0');
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        stdin_cv_.wait(lock, [&] { return stopping_ || queued_stdin_ < kMaxQueuedStdin; });
        if (stopping_) return;
      }
      pollfd fds[2] = {{options_.stdin_fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      const ssize_t n = ::read(options_.stdin_fd, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        asio::post(ioc_, [this] { OnStdin("", true); });
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        queued_stdin_ += static_cast<std::size_t>(n);
      }
      asio::post(ioc_, [this, data = buffer.substr(0, static_cast<std::size_t>(n))]() mutable {
        OnStdin(std::move(data), false);
      });
    }
  }

  const SessionClientOptions& options_;
  Endpoint endpoint_;
  asio::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  asio::signal_set signals_;
  beast::flat_buffer in_;
  std::deque<std::string> queue_;
  std::deque<bool> is_stdin_;
  bool writing_ = false, shutting_down_ = false;
  std::optional<int> exit_status_;
  std::string error_, read_error_;
  int signal_ = 0;
  int wake_[2] = {-1, -1};
  std::mutex mu_;
  std::condition_variable stdin_cv_;
  std::size_t queued_stdin_ = 0;  // guarded by mu_
  bool stopping_ = false;         // guarded by mu_
};

}  // namespace

StatusOr<int> RunSession(const SessionClientOptions& options) {
  HF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(options.endpoint_url));
  Client client(options, std::move(endpoint));
  return client.Run();
}

}  // namespace hf::session
