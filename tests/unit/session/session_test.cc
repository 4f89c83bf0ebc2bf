// The whole session path without nodes: an HttpServer with the session endpoint, whose one
// known target resolves to this test process (nsenter --all can enter our own namespaces as
// root), and the real client. Needs root (nsenter, cgroups); skipped otherwise.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/session/protocol.h"
#include "hyperfleet/session/session_client.h"
#include "hyperfleet/session/session_server.h"
#include "nlohmann/json.hpp"
#include "session/node_process.h"

namespace hf::session {
namespace {

// The tests that run the client in a forked child of this (multi-threaded) test process:
// ThreadSanitizer cannot follow a child that starts threads after such a fork ("starting
// new threads after multi-threaded fork is not supported"), so its lane skips them; the
// AddressSanitizer lane and the plain build run them.
#if defined(__SANITIZE_THREAD__)
#define HF_SKIP_FORKED_CLIENT_UNDER_TSAN() \
  GTEST_SKIP() << "the client runs in a child forked from a multi-threaded process"
#else
#define HF_SKIP_FORKED_CLIENT_UNDER_TSAN() (void)0
#endif

using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

constexpr char kRegion[] = "us-west-2";
const auth::AccessKey kKey{"AKIASESSIONTEST00001", "session-test-secret"};
constexpr char kGoodTarget[] = "sagemaker-cluster:aa11bbbbb222_worker-group-1-i-0123456789abcdef0";
constexpr char kPendingTarget[] =
    "sagemaker-cluster:aa11bbbbb222_worker-group-1-i-0000000000000000a";
constexpr char kUnknownTarget[] = "sagemaker-cluster:zz99zzzzz999_workers-i-111222333444555aa";

// The one running "node" is this process; another exists but has no init yet.
class TestTargets final : public SessionTargets {
 public:
  StatusOr<int> resolve(const SessionTarget& target) override {
    if (target.str() == kGoodTarget) return static_cast<int>(getpid());
    if (target.str() == kPendingTarget) {
      return absl::FailedPreconditionError("instance i-0000000000000000a is Pending");
    }
    return absl::NotFoundError(absl::StrCat("no cluster with id ", target.cluster_id));
  }
};

// A memfd holding `data` (readable from the start), or empty for output.
int MemFd(const std::string& data = "") {
  const int fd = memfd_create("session-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  if (!data.empty()) {
    EXPECT_EQ(write(fd, data.data(), data.size()), ssize_t(data.size()));
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string ReadAllFrom(int fd) {
  std::string out;
  char buf[4096];
  lseek(fd, 0, SEEK_SET);
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// Waits for `pid` to exit within `timeout`; its shell exit status, or nullopt on timeout.
std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const int pidfd = PidfdOpen(pid);
  if (pidfd < 0) return std::nullopt;
  pollfd p{pidfd, POLLIN, 0};
  const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
  close(pidfd);
  if (ready != 1) return std::nullopt;
  int status = 0;
  waitpid(pid, &status, 0);
  return ProcessExit::FromWaitStatus(status).exit_code;
}

// True once /proc/<pid> is gone or a zombie.
bool ProcessEnded(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() &&
         (line[close_paren + 2] == 'Z' || line[close_paren + 2] == 'X');
}

template <class Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    if (pred()) return true;
    // Polling a condition another process changes; the deadline bounds it.
    poll(nullptr, 0, 10);
  }
  return pred();
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sessions enter namespaces: needs root";
    if (access("/usr/bin/nsenter", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/nsenter";
    SessionServiceOptions options;
    options.policy.region = kRegion;
    options.policy.services = {std::string(kSigningName)};
    options.hangup_grace_ms = 500;
    service_ = std::make_unique<SessionService>(
        targets_,
        [](std::string_view id) -> std::optional<std::string> {
          if (id == kKey.access_key_id) return kKey.secret_access_key;
          return std::nullopt;
        },
        clock_, options);
    http::HttpServerOptions http_options;
    http_options.host = "127.0.0.1";
    http_options.port = 0;
    service_->install(http_options);
    auto server = http::HttpServer::Start(http_options, [](http::HttpRequest&&) {
      http::HttpResponse r;
      r.status = 404;
      return r;
    });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    endpoint_ = absl::StrCat("http://127.0.0.1:", server_->port());
  }

  void TearDown() override {
    if (server_) server_->stop();
    if (service_) service_->stop();
  }

  SessionClientOptions ClientOptions(const std::string& target,
                                     std::optional<std::string> command,
                                     auth::AccessKey key = kKey) {
    SessionClientOptions o;
    o.endpoint_url = endpoint_;
    o.target = target;
    o.command = std::move(command);
    const std::string host = absl::StrCat("127.0.0.1:", server_->port());
    o.sign = [key, host](http::HttpRequest& request) {
      auth::SignSigV4(request, key, kRegion, kSigningName, host,
                      std::chrono::system_clock::now());
    };
    return o;
  }

  struct Result {
    StatusOr<int> status = 0;
    std::string out, err;
  };

  Result Run(const std::string& target, std::optional<std::string> command,
             const std::string& input = "", auth::AccessKey key = kKey) {
    SessionClientOptions o = ClientOptions(target, std::move(command), key);
    o.stdin_fd = MemFd(input);
    o.stdout_fd = MemFd();
    o.stderr_fd = MemFd();
    Result r;
    r.status = RunSession(o);
    r.out = ReadAllFrom(o.stdout_fd);
    r.err = ReadAllFrom(o.stderr_fd);
    for (int fd : {o.stdin_fd, o.stdout_fd, o.stderr_fd}) close(fd);
    return r;
  }

  // A raw HTTP exchange with the session endpoint: status and parsed body.
  std::pair<int, nlohmann::json> RawRequest(http::HttpRequest request) {
    namespace bhttp = boost::beast::http;
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server_->port()});
    bhttp::request<bhttp::string_body> out{bhttp::verb::get, request.target, 11};
    for (const auto& [name, value] : request.headers) out.set(name, value);
    bhttp::write(socket, out);
    boost::beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> in;
    bhttp::read(socket, buffer, in);
    return {static_cast<int>(in.result_int()), nlohmann::json::parse(in.body(), nullptr, false)};
  }

  TestTargets targets_;
  SystemClock clock_;
  std::unique_ptr<SessionService> service_;
  std::unique_ptr<http::HttpServer> server_;
  std::string endpoint_;
};

TEST_F(SessionTest, CommandReturnsStatusAndSeparateStreams) {
  auto r = Run(kGoodTarget, "echo out; echo err >&2; exit 7");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 7);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_TRUE(WaitUntil([&] { return service_->active() == 0; }, std::chrono::seconds(10)));
}

TEST_F(SessionTest, CommandRunsInTheTargetsNamespacesWithStdin) {
  // The target is this process, so the command sees our namespaces and our cgroups.
  const std::string ns = std::filesystem::read_symlink("/proc/self/ns/mnt").string();
  auto r = Run(kGoodTarget, "readlink /proc/self/ns/mnt; cat; echo; test -t 0 || echo notty",
               "hello from stdin");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 0);
  EXPECT_EQ(r.out, ns + "\nhello from stdin\nnotty\n");
}

TEST_F(SessionTest, CommandGetsALoginUmaskWhateverTheServers) {
  // The quick start runs the server under umask 077; a session is a login (022) as on
  // HyperPod, or files a user's job writes in /fsx would be unreadable to the job's user.
  const mode_t before = umask(077);
  auto r = Run(kGoodTarget, "umask");
  umask(before);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(r.out, "0022\n");
}

TEST_F(SessionTest, SignalExitIs128PlusSignal) {
  auto r = Run(kGoodTarget, "kill -TERM $$");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 128 + SIGTERM);
}

TEST_F(SessionTest, UnknownTargetIsNotConnected) {
  auto r = Run(kUnknownTarget, "true");
  ASSERT_FALSE(r.status.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status.status())) << r.status.status();
  EXPECT_EQ(AwsErrorTypeOf(r.status.status()), "TargetNotConnected");
  EXPECT_THAT(std::string(r.status.status().message()), HasSubstr(kUnknownTarget));
  EXPECT_THAT(std::string(r.status.status().message()), HasSubstr("zz99zzzzz999"));

  auto pending = Run(kPendingTarget, "true");
  ASSERT_FALSE(pending.status.ok());
  EXPECT_EQ(AwsErrorTypeOf(pending.status.status()), "TargetNotConnected");
  EXPECT_THAT(std::string(pending.status.status().message()), HasSubstr("Pending"));
}

TEST_F(SessionTest, MalformedTargetIsInvalidParameter) {
  auto r = Run("sagemaker-cluster:my-cluster_workers-i-111222333444555aa", "true");
  ASSERT_FALSE(r.status.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status.status())) << r.status.status();
  EXPECT_EQ(AwsErrorTypeOf(r.status.status()), "InvalidParameterException");
  EXPECT_THAT(std::string(r.status.status().message()), HasSubstr(std::string(kTargetForm)));
}

TEST_F(SessionTest, WrongSignatureIs403) {
  auto r = Run(kGoodTarget, "true", "", {kKey.access_key_id, "wrong-secret"});
  ASSERT_FALSE(r.status.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(r.status.status())) << r.status.status();
  EXPECT_EQ(AwsErrorTypeOf(r.status.status()), "InvalidSignatureException");

  // The same on the wire: 403 before any upgrade, AWS JSON body.
  http::HttpRequest request;
  request.method = "GET";
  request.target = absl::StrCat(std::string(kSessionPath), "?target=", UriEncode(kGoodTarget));
  request.headers = {{"Connection", "Upgrade"},
                     {"Upgrade", "websocket"},
                     {"Sec-WebSocket-Version", "13"},
                     {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
  auth::SignSigV4(request, {kKey.access_key_id, "wrong-secret"}, kRegion, kSigningName,
                  absl::StrCat("127.0.0.1:", server_->port()), std::chrono::system_clock::now());
  auto [status, body] = RawRequest(request);
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body.value("__type", ""), "InvalidSignatureException");

  // Unsigned: 403 MissingAuthenticationToken; signed but not an upgrade: 400.
  request.headers.resize(4);
  auto [unsigned_status, unsigned_body] = RawRequest(request);
  EXPECT_EQ(unsigned_status, 403);
  EXPECT_EQ(unsigned_body.value("__type", ""), "MissingAuthenticationTokenException");
  request.headers.clear();
  auth::SignSigV4(request, kKey, kRegion, kSigningName,
                  absl::StrCat("127.0.0.1:", server_->port()), std::chrono::system_clock::now());
  auto [plain_status, plain_body] = RawRequest(request);
  EXPECT_EQ(plain_status, 400);
  EXPECT_EQ(plain_body.value("__type", ""), "InvalidParameterException");
}

// Reads the pty master into `transcript` until it contains `needle` after `from`.
bool WaitForOutput(int master, std::string& transcript, const std::string& needle,
                   std::size_t from, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    if (transcript.find(needle, from) != std::string::npos) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
    char buf[4096];
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) return transcript.find(needle, from) != std::string::npos;
    transcript.append(buf, static_cast<std::size_t>(n));
  }
}

TEST_F(SessionTest, InteractiveShellHasATerminalAndFollowsResizes) {
  HF_SKIP_FORKED_CLIENT_UNDER_TSAN();
  SessionClientOptions o = ClientOptions(kGoodTarget, std::nullopt);
  o.pty = true;
  o.term = "vt100";
  struct winsize size = {};
  size.ws_row = 30;
  size.ws_col = 90;
  int master = -1;
  // The client runs in a child on the slave side of a pty, as in a user's terminal.
  const pid_t child = forkpty(&master, nullptr, nullptr, &size);
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto status = RunSession(o);
    if (!status.ok()) {
      const std::string text(status.status().message());
      (void)!write(2, text.data(), text.size());
      _exit(200);
    }
    _exit(*status);
  }
  std::string transcript;
  auto say = [&](const std::string& line) {
    const std::string typed = line + "\r";
    ASSERT_EQ(write(master, typed.data(), typed.size()), ssize_t(typed.size()));
  };
  const auto timeout = std::chrono::seconds(20);

  say("tty; echo TERM=$TERM; echo M$((40+2))");
  ASSERT_TRUE(WaitForOutput(master, transcript, "M42", 0, timeout)) << transcript;
  EXPECT_THAT(transcript, HasSubstr("/dev/pts/"));
  EXPECT_THAT(transcript, HasSubstr("TERM=vt100"));

  std::size_t from = transcript.size();
  say("stty size; echo S$((1+1))");
  ASSERT_TRUE(WaitForOutput(master, transcript, "S2", from, timeout)) << transcript;
  EXPECT_THAT(transcript.substr(from), HasSubstr("30 90"));

  // Resizing our terminal sends the client SIGWINCH; it forwards the size. The signal and
  // the typed line race, so ask until the new size shows (bounded by the deadline).
  size.ws_row = 41;
  size.ws_col = 101;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &size), 0);
  bool resized = false;
  for (int attempt = 0; attempt < 20 && !resized; ++attempt) {
    from = transcript.size();
    say(absl::StrCat("stty size; echo R$((", attempt, "+1000))"));
    ASSERT_TRUE(WaitForOutput(master, transcript, absl::StrCat("R", attempt + 1000), from,
                              timeout))
        << transcript;
    resized = transcript.find("41 101", from) != std::string::npos;
  }
  EXPECT_TRUE(resized) << transcript;

  say("exit 3");
  // Keep reading so the client never blocks on a full terminal.
  std::optional<int> status;
  const auto deadline = SteadyClock::now() + timeout;
  while (!status && SteadyClock::now() < deadline) {
    WaitForOutput(master, transcript, "\x01never", transcript.size(),
                  std::chrono::milliseconds(100));
    status = WaitExit(child, std::chrono::milliseconds(0));
  }
  close(master);
  ASSERT_TRUE(status.has_value()) << transcript;
  EXPECT_EQ(*status, 3) << transcript;
  EXPECT_TRUE(WaitUntil([&] { return service_->active() == 0; }, std::chrono::seconds(10)));
}

TEST_F(SessionTest, ClientGoingAwayHangsUpTheSession) {
  HF_SKIP_FORKED_CLIENT_UNDER_TSAN();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  SessionClientOptions o = ClientOptions(kGoodTarget, "echo $$; exec sleep 1000");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    o.stdin_fd = open("/dev/null", O_RDONLY);
    o.stdout_fd = out[1];
    auto status = RunSession(o);
    _exit(status.ok() ? *status : 200);
  }
  close(out[1]);
  std::string transcript;
  ASSERT_TRUE(WaitForOutput(out[0], transcript, "\n", 0, std::chrono::seconds(20)));
  const pid_t remote = std::stoi(transcript);
  ASSERT_GT(remote, 0);
  ASSERT_FALSE(ProcessEnded(remote));
  EXPECT_EQ(service_->active(), 1);
  kill(child, SIGKILL);
  EXPECT_TRUE(WaitExit(child, std::chrono::seconds(10)).has_value());
  close(out[0]);
  EXPECT_TRUE(WaitUntil([&] { return ProcessEnded(remote); }, std::chrono::seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return service_->active() == 0; }, std::chrono::seconds(10)));
}

TEST(NodeProcess, JoinsTheNodeInitsCgroups) {
  if (geteuid() != 0) GTEST_SKIP() << "cgroup writes need root";
  // A stand-in node init in a cgroup of its own (in the first hierarchy we can write).
  auto mine = CgroupProcsFiles(getpid());
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_FALSE(mine->empty());
  const std::filesystem::path parent = std::filesystem::path(mine->front()).parent_path();
  const std::filesystem::path node_cgroup = parent / absl::StrCat("hf-session-test-", getpid());
  std::error_code ec;
  std::filesystem::create_directory(node_cgroup, ec);
  if (ec) GTEST_SKIP() << "cannot create " << node_cgroup << ": " << ec.message();

  const pid_t init = fork();
  ASSERT_GE(init, 0);
  if (init == 0) {
    execl("/bin/sleep", "sleep", "1000", nullptr);
    _exit(127);
  }
  {
    std::ofstream procs(node_cgroup / "cgroup.procs");
    procs << init;
  }
  NodeProcessSpec spec;
  spec.node_pid = init;
  spec.nsenter_path = "/usr/bin/nsenter";
  spec.shell = "/bin/bash";
  spec.command = "cat /proc/self/cgroup";
  auto proc = SpawnInNode(spec);
  ASSERT_TRUE(proc.ok()) << proc.status();
  EXPECT_TRUE(proc->cgroup_warnings.empty());
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(proc->stdout_fd, buf, sizeof buf)) > 0) output.append(buf, size_t(n));
  int status = 0;
  waitpid(proc->pid, &status, 0);
  proc->Close();
  kill(init, SIGKILL);
  waitpid(init, nullptr, 0);
  std::filesystem::remove(node_cgroup, ec);
  EXPECT_EQ(ProcessExit::FromWaitStatus(status).exit_code, 0);
  EXPECT_THAT(output, HasSubstr(absl::StrCat("/hf-session-test-", getpid())));
}

}  // namespace
}  // namespace hf::session
