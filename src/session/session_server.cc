// Each session is one detached thread with a private io_context: the WebSocket, the process's
// pty (or pipes) and its pidfd are Asio objects on it, so a session needs no locks. The
// service only counts threads and keeps a way to cancel each (stop()).
#include "hyperfleet/session/session_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/subprocess.h"
#include "node_process.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace hf::session {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;

constexpr std::size_t kReadChunk = 16 * 1024;
// After the process exits, output still in flight (pty buffers, pipes held by its children)
// gets this long to arrive before the exit frame.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(2000);
// Keep-alive: a ping after half of this without traffic; no answer for the rest closes.
constexpr auto kWebSocketIdle = std::chrono::seconds(60);

// An HTTP status and AWS error for a failure before the upgrade.
struct Refusal {
  int status;
  std::string type;
  std::string message;
};

Refusal RefusalFor(const Status& status, int http_status, std::string default_type) {
  return {http_status, AwsErrorTypeOf(status).value_or(std::move(default_type)),
          std::string(status.message())};
}

void WriteRefusal(tcp::socket& socket, const Refusal& refusal) {
  nlohmann::ordered_json body;
  body["__type"] = refusal.type;
  body["message"] = refusal.message;
  bhttp::response<bhttp::string_body> response;
  response.version(11);
  response.result(static_cast<unsigned>(refusal.status));
  response.set(bhttp::field::server, "hyperfleet");
  response.set(bhttp::field::content_type, "application/x-amz-json-1.1");
  response.set("x-amzn-ErrorType", refusal.type);
  response.keep_alive(false);
  response.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  response.prepare_payload();
  beast::error_code ec;
  bhttp::write(socket, response, ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  // Read what the client still sends (it should close now), so that closing with unread
  // input does not turn into a reset that destroys the response.
  std::array<char, 4096> sink;
  for (int i = 0; i < 16; ++i) {
    struct timeval tv = {2, 0};
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    socket.non_blocking(false, ec);
    const auto n = ::read(socket.native_handle(), sink.data(), sink.size());
    if (n <= 0) break;
  }
  socket.close(ec);
}

bool ValidTerm(std::string_view term) {
  if (term.empty() || term.size() > 64) return false;
  for (char c : term) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status BadParameter(std::string message) {
  return WithAwsErrorType(absl::InvalidArgumentError(std::move(message)),
                          "InvalidParameterException");
}

StatusOr<uint16_t> Dimension(std::string_view query, std::string_view name, uint16_t fallback) {
  HF_ASSIGN_OR_RETURN(auto value, QueryParam(query, name));
  if (!value) return fallback;
  uint32_t n = 0;
  if (!absl::SimpleAtoi(*value, &n) || n < 1 || n > 65535) {
    return BadParameter(absl::StrCat("'", std::string(name), "' must be 1..65535, got '", *value, "'"));
  }
  return static_cast<uint16_t>(n);
}

// Parses the query of an (authenticated) session request into a spec, minus the node pid.
StatusOr<std::pair<SessionTarget, NodeProcessSpec>> ParseRequest(std::string_view query) {
  auto param = [&](std::string_view name) -> StatusOr<std::optional<std::string>> {
    auto value = QueryParam(query, name);
    if (!value.ok()) return BadParameter(std::string(value.status().message()));
    return value;
  };
  HF_ASSIGN_OR_RETURN(auto target_text, param("target"));
  if (!target_text) {
    return BadParameter(absl::StrCat("Missing query parameter 'target' (", std::string(kTargetForm), ")"));
  }
  HF_ASSIGN_OR_RETURN(SessionTarget target, ParseTarget(*target_text));
  NodeProcessSpec spec;
  HF_ASSIGN_OR_RETURN(spec.command, param("command"));
  HF_ASSIGN_OR_RETURN(auto pty, param("pty"));
  if (pty && *pty != "0" && *pty != "1") {
    return BadParameter(absl::StrCat("'pty' must be 0 or 1, got '", *pty, "'"));
  }
  spec.pty = pty && *pty == "1";
  HF_ASSIGN_OR_RETURN(auto term, param("term"));
  if (term) {
    if (!ValidTerm(*term)) return BadParameter(absl::StrCat("Invalid 'term' '", *term, "'"));
    spec.term = *term;
  }
  auto cols = Dimension(query, "cols", 80);
  if (!cols.ok()) return BadParameter(std::string(cols.status().message()));
  auto rows = Dimension(query, "rows", 24);
  if (!rows.ok()) return BadParameter(std::string(rows.status().message()));
  spec.cols = *cols;
  spec.rows = *rows;
  return std::make_pair(std::move(target), std::move(spec));
}

bhttp::request<bhttp::string_body> ToBeast(const http::HttpRequest& request) {
  bhttp::request<bhttp::string_body> out;
  out.version(11);
  out.method_string(request.method);
  out.target(request.target);
  for (const auto& [name, value] : request.headers) out.insert(name, value);
  return out;
}

// One upgraded session: pumps frames between the WebSocket and the process. Runs on one
// thread (its io_context), so members need no locks.
class Pump : public std::enable_shared_from_this<Pump> {
 public:
  Pump(asio::io_context& ioc, websocket::stream<beast::tcp_stream> ws, NodeProcess proc,
       const SessionServiceOptions& options, std::string label)
      : ioc_(ioc), ws_(std::move(ws)), proc_(proc), options_(options),
        label_(std::move(label)), pidfd_(ioc, proc.pidfd), grace_(ioc), drain_(ioc) {
    proc_.pidfd = -1;  // owned by pidfd_ now
    if (proc.pty_master >= 0) {
      pty_ = std::make_unique<asio::posix::stream_descriptor>(ioc, proc.pty_master);
      outputs_.push_back({pty_.get(), FrameType::kStdout});
    } else {
      stdin_ = std::make_unique<asio::posix::stream_descriptor>(ioc, proc.stdin_fd);
      stdout_ = std::make_unique<asio::posix::stream_descriptor>(ioc, proc.stdout_fd);
      stderr_ = std::make_unique<asio::posix::stream_descriptor>(ioc, proc.stderr_fd);
      outputs_.push_back({stdout_.get(), FrameType::kStdout});
      outputs_.push_back({stderr_.get(), FrameType::kStderr});
    }
    proc_.pty_master = proc_.stdin_fd = proc_.stdout_fd = proc_.stderr_fd = -1;
  }

  void Start() {
    auto self = shared_from_this();
    pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self](beast::error_code ec) { self->OnExit(ec); });
    for (std::size_t i = 0; i < outputs_.size(); ++i) ReadOutput(i);
    ReadFrame();
  }

  // stop(): the server is going away; the same as the client leaving.
  void Cancel() {
    Hangup("the server is stopping");
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

 private:
  struct Output {
    asio::posix::stream_descriptor* sd;
    FrameType type;
    bool reading = false;
    bool done = false;
    std::array<char, kReadChunk> buffer{};
  };

  asio::posix::stream_descriptor* InputSd() { return pty_ ? pty_.get() : stdin_.get(); }

  // --- client -> process -------------------------------------------------------------
  void ReadFrame() {
    if (client_gone_) return;
    ws_.async_read(in_buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->OnFrame(ec);
    });
  }

  void OnFrame(beast::error_code ec) {
    if (ec) {
      client_gone_ = true;
      if (!finished_) Hangup(absl::StrCat("the client went away (", ec.message(), ")"));
      return;
    }
    const std::string message = beast::buffers_to_string(in_buffer_.data());
    in_buffer_.consume(in_buffer_.size());
    auto frame = DecodeFrame(message);
    if (!frame.ok()) {
      spdlog::debug("session {}: ignoring a frame: {}", label_, frame.status().ToString());
      return ReadFrame();
    }
    switch (frame->type) {
      case FrameType::kStdin:
        if (InputSd() == nullptr || stdin_closed_ || frame->data.empty()) return ReadFrame();
        stdin_data_ = std::move(frame->data);
        // The next frame is read once this one is written: the client is paced by the process.
        asio::async_write(*InputSd(), asio::buffer(stdin_data_),
                          [self = shared_from_this()](beast::error_code wec, std::size_t) {
                            if (wec && wec != asio::error::operation_aborted) {
                              self->stdin_closed_ = true;  // EPIPE: the process closed stdin
                            }
                            self->ReadFrame();
                          });
        return;
      case FrameType::kStdinEof:
        if (stdin_ && !stdin_closed_) {
          beast::error_code ignored;
          stdin_->close(ignored);
          stdin_closed_ = true;
        }
        return ReadFrame();
      case FrameType::kResize:
        if (pty_) {
          struct winsize size = {};
          size.ws_col = frame->cols;
          size.ws_row = frame->rows;
          ioctl(pty_->native_handle(), TIOCSWINSZ, &size);
        }
        return ReadFrame();
      default:
        return ReadFrame();  // server-to-client types from a client: ignored
    }
  }

  // --- process -> client -------------------------------------------------------------
  void ReadOutput(std::size_t i) {
    Output& out = outputs_[i];
    if (out.done || out.reading || client_gone_) return;
    if (queued_bytes_ >= options_.max_queued_output) return;  // resumed by OnWritten
    out.reading = true;
    out.sd->async_read_some(asio::buffer(out.buffer),
                            [self = shared_from_this(), i](beast::error_code ec, std::size_t n) {
                              self->OnOutput(i, ec, n);
                            });
  }

  void OnOutput(std::size_t i, beast::error_code ec, std::size_t n) {
    Output& out = outputs_[i];
    out.reading = false;
    if (n > 0) Send(EncodeData(out.type, std::string_view(out.buffer.data(), n)));
    if (ec) {
      // EOF (pipe), EIO (pty: no slave left), or cancelled by the drain deadline.
      out.done = true;
      return MaybeFinish();
    }
    ReadOutput(i);
  }

  void Send(std::string frame) {
    if (client_gone_) return;
    queued_bytes_ += frame.size();
    out_queue_.push_back(std::move(frame));
    WriteNext();
  }

  void WriteNext() {
    if (writing_ || out_queue_.empty() || client_gone_) return;
    writing_ = true;
    ws_.binary(true);
    ws_.async_write(asio::buffer(out_queue_.front()),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) {
                      self->OnWritten(ec);
                    });
  }

  void OnWritten(beast::error_code ec) {
    writing_ = false;
    queued_bytes_ -= out_queue_.front().size();
    out_queue_.pop_front();
    if (ec) {
      client_gone_ = true;
      if (!finished_) Hangup(absl::StrCat("cannot write to the client (", ec.message(), ")"));
      return;
    }
    for (std::size_t i = 0; i < outputs_.size(); ++i) ReadOutput(i);
    if (out_queue_.empty() && closing_) return CloseWebSocket();
    WriteNext();
  }

  // --- end of the process ------------------------------------------------------------
  void OnExit(beast::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    int status = 0;
    while (waitpid(proc_.pid, &status, 0) < 0 && errno == EINTR) {
    }
    exit_status_ = ProcessExit::FromWaitStatus(status).exit_code;
    exited_ = true;
    grace_.cancel();
    beast::error_code ignored;
    pidfd_.close(ignored);
    if (client_gone_) return Teardown();
    drain_.expires_after(kDrainAfterExit);
    drain_.async_wait([self = shared_from_this()](beast::error_code wec) {
      if (wec) return;
      for (auto& out : self->outputs_) {
        beast::error_code ignored2;
        if (!out.done) out.sd->cancel(ignored2);
        if (!out.reading) out.done = true;  // paused: nothing outstanding to cancel
      }
      self->MaybeFinish();
    });
    MaybeFinish();
  }

  void MaybeFinish() {
    if (!exited_ || finished_) return;
    for (const auto& out : outputs_) {
      if (!out.done) return;
    }
    finished_ = true;
    drain_.cancel();
    spdlog::info("session {}: exited with status {}", label_, exit_status_);
    Send(EncodeExit(exit_status_));
    closing_ = true;
    if (out_queue_.empty() && !writing_) CloseWebSocket();
    Teardown();
  }

  void CloseWebSocket() {
    ws_.async_close(websocket::close_code::normal,
                    [self = shared_from_this()](beast::error_code) {
                      beast::error_code ignored;
                      beast::get_lowest_layer(self->ws_).socket().close(ignored);
                    });
  }

  // The client is gone (or the server stops) before the process ended: hang it up.
  void Hangup(const std::string& why) {
    if (hung_up_ || exited_) return Teardown();
    hung_up_ = true;
    spdlog::info("session {}: {}; hanging up", label_, why);
    kill(-proc_.pid, SIGHUP);
    beast::error_code ignored;
    if (pty_) pty_->close(ignored);  // the kernel's hangup reaches the terminal's jobs
    if (stdin_) stdin_->close(ignored);
    grace_.expires_after(std::chrono::milliseconds(options_.hangup_grace_ms));
    grace_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->exited_) kill(-self->proc_.pid, SIGKILL);
    });
    Teardown();
  }

  // Closes the process side once it has exited and the client is gone, so the io_context
  // runs out of work and the thread ends.
  void Teardown() {
    if (!exited_ || !(client_gone_ || finished_)) return;
    beast::error_code ignored;
    for (auto& out : outputs_) out.sd->close(ignored);
    if (stdin_) stdin_->close(ignored);
    drain_.cancel();
    grace_.cancel();
    if (client_gone_) beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  asio::io_context& ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  NodeProcess proc_;
  const SessionServiceOptions& options_;
  std::string label_;
  asio::posix::stream_descriptor pidfd_;
  std::unique_ptr<asio::posix::stream_descriptor> pty_, stdin_, stdout_, stderr_;
  std::vector<Output> outputs_;
  asio::steady_timer grace_, drain_;
  beast::flat_buffer in_buffer_;
  std::string stdin_data_;
  std::deque<std::string> out_queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false, closing_ = false, finished_ = false;
  bool client_gone_ = false, hung_up_ = false, exited_ = false, stdin_closed_ = false;
  int exit_status_ = 0;
};

}  // namespace

struct SessionService::Impl : std::enable_shared_from_this<SessionService::Impl> {
  SessionTargets& targets;
  auth::SecretLookup secrets;
  const Clock& clock;
  SessionServiceOptions options;

  std::mutex mu;
  std::condition_variable idle;
  bool stopping = false;                         // guarded by mu
  int active = 0;                                // guarded by mu
  uint64_t next_id = 0;                          // guarded by mu
  std::map<uint64_t, std::function<void()>> cancels;  // guarded by mu

  Impl(SessionTargets& t, auth::SecretLookup s, const Clock& c, SessionServiceOptions o)
      : targets(t), secrets(std::move(s)), clock(c), options(std::move(o)) {}

  // Checks the request; on success, the node's pid and what to run.
  StatusOr<std::pair<SessionTarget, NodeProcessSpec>> Check(const http::HttpRequest& request,
                                                            const std::string& buffered,
                                                            Refusal* refusal) {
    auto refuse = [&](Status status, int code, std::string type) {
      *refusal = RefusalFor(status, code, std::move(type));
      return status;
    };
    auto identity = auth::VerifySigV4(request, secrets, options.policy, clock.now());
    if (!identity.ok()) return refuse(identity.status(), 403, "AccessDeniedException");
    auto parsed = ParseRequest(request.query());
    if (!parsed.ok()) return refuse(parsed.status(), 400, "InvalidParameterException");
    auto pid = targets.resolve(parsed->first);
    if (!pid.ok()) {
      if (absl::IsNotFound(pid.status()) || absl::IsFailedPrecondition(pid.status())) {
        return refuse(absl::FailedPreconditionError(absl::StrCat(
                          parsed->first.str(), " is not connected: ", pid.status().message())),
                      400, "TargetNotConnected");
      }
      spdlog::error("session target {}: {}", parsed->first.str(), pid.status().ToString());
      return refuse(pid.status(), 500, "InternalFailure");
    }
    // Checked last, so that a plain GET learns why an upgrade would be refused (the client
    // asks that way: Boost 1.74's handshake drops the body of a refused upgrade).
    if (request.method != "GET" || !websocket::is_upgrade(ToBeast(request))) {
      return refuse(BadParameter(absl::StrCat(std::string(kSessionPath),
                                              " takes a WebSocket upgrade (GET with Upgrade: "
                                              "websocket); use `hyperfleet ssm start-session`")),
                    400, "InvalidParameterException");
    }
    if (!buffered.empty()) {
      return refuse(BadParameter("Data sent before the WebSocket upgrade completed"), 400,
                    "InvalidParameterException");
    }
    parsed->second.node_pid = *pid;
    parsed->second.nsenter_path = options.nsenter_path;
    parsed->second.shell = options.shell;
    parsed->second.join_cgroups = options.join_cgroups;
    return parsed;
  }

  void Serve(uint64_t id, http::HttpRequest request, int fd, std::string buffered) {
    asio::io_context ioc(1);
    tcp::socket socket(ioc);
    {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      beast::error_code ec;
      socket.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
      if (ec) {
        ::close(fd);
        return;
      }
    }
    Refusal refusal{};
    auto checked = Check(request, buffered, &refusal);
    if (!checked.ok()) {
      spdlog::info("session refused ({} {}): {}", refusal.status, refusal.type, refusal.message);
      WriteRefusal(socket, refusal);
      return;
    }
    const std::string label = absl::StrCat(checked->first.str(), checked->second.command
                                                                     ? " (command)"
                                                                     : " (shell)");
    websocket::stream<beast::tcp_stream> ws(std::move(socket));
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = std::chrono::seconds(30);
    timeouts.idle_timeout = kWebSocketIdle;
    timeouts.keep_alive_pings = true;
    ws.set_option(timeouts);
    ws.read_message_max(options.max_message_bytes);
    ws.set_option(websocket::stream_base::decorator([](websocket::response_type& response) {
      response.set(bhttp::field::server, "hyperfleet");
    }));
    beast::error_code ec;
    ws.accept(ToBeast(request), ec);
    if (ec) {
      spdlog::info("session {}: WebSocket handshake failed: {}", label, ec.message());
      return;
    }
    ws.binary(true);
    auto proc = SpawnInNode(checked->second);
    if (!proc.ok()) {
      spdlog::warn("session {}: {}", label, proc.status().ToString());
      ws.write(asio::buffer(EncodeData(FrameType::kError, std::string(proc.status().message()))), ec);
      ws.close(websocket::close_code::normal, ec);
      return;
    }
    for (const auto& warning : proc->cgroup_warnings) {
      spdlog::warn("session {}: cannot join node cgroup {}", label, warning);
    }
    spdlog::info("session {}: started pid {}", label, proc->pid);
    auto pump = std::make_shared<Pump>(ioc, std::move(ws), *proc, options, label);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) {
        asio::post(ioc, [pump] { pump->Cancel(); });
      } else {
        cancels[id] = [&ioc, weak = std::weak_ptr<Pump>(pump)] {
          asio::post(ioc, [weak] {
            if (auto p = weak.lock()) p->Cancel();
          });
        };
      }
    }
    pump->Start();
    pump.reset();
    ioc.run();
    std::lock_guard<std::mutex> lock(mu);
    cancels.erase(id);
  }
};

SessionService::SessionService(SessionTargets& targets, auth::SecretLookup secrets,
                               const Clock& clock, SessionServiceOptions options)
    : impl_(std::make_shared<Impl>(targets, std::move(secrets), clock, std::move(options))) {
  // Writes to a process's stdin after it closed it must fail with EPIPE, not kill the server.
  signal(SIGPIPE, SIG_IGN);
}

SessionService::~SessionService() { stop(); }

void SessionService::install(http::HttpServerOptions& options) {
  options.wants_upgrade = [this](const http::HttpRequest& r) { return wants(r); };
  options.on_upgrade = [this](http::HttpRequest&& r, int fd, std::string buffered) {
    accept(std::move(r), fd, std::move(buffered));
  };
}

bool SessionService::wants(const http::HttpRequest& request) const {
  return request.path() == kSessionPath;
}

void SessionService::accept(http::HttpRequest&& request, int fd, std::string buffered) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) {
      ::close(fd);
      return;
    }
    if (impl_->active >= impl_->options.max_sessions) {
      // Answered on a thread of its own, like any session, so this I/O thread never blocks.
      ++impl_->active;
      std::thread([impl = impl_, fd, max = impl_->options.max_sessions] {
        asio::io_context ioc(1);
        tcp::socket socket(ioc);
        beast::error_code ec;
        socket.assign(tcp::v4(), fd, ec);
        if (!ec) {
          WriteRefusal(socket, {400, "ThrottlingException",
                                absl::StrCat("Too many sessions open (", max, ")")});
        } else {
          ::close(fd);
        }
        std::lock_guard<std::mutex> lock(impl->mu);
        if (--impl->active == 0) impl->idle.notify_all();
      }).detach();
      return;
    }
    ++impl_->active;
    id = impl_->next_id++;
  }
  std::thread([impl = impl_, id, request = std::move(request), fd,
               buffered = std::move(buffered)]() mutable {
    pthread_setname_np(pthread_self(), "hf-session");
    try {
      impl->Serve(id, std::move(request), fd, std::move(buffered));
    } catch (const std::exception& e) {
      spdlog::error("session thread caught exception: {}", e.what());
    }
    std::lock_guard<std::mutex> lock(impl->mu);
    if (--impl->active == 0) impl->idle.notify_all();
  }).detach();
}

void SessionService::stop() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->stopping = true;
  for (auto& [id, cancel] : impl_->cancels) cancel();
  impl_->idle.wait(lock, [&] { return impl_->active == 0; });
}

int SessionService::active() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->active;
}

}  // namespace hf::session
