#include "hyperfleet/eks/image_registry.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::eks {
namespace {

using Ms = std::chrono::milliseconds;
constexpr auto kHealthyRun = std::chrono::seconds(60);  // a run this long resets the backoff

// True when nothing listens on 0.0.0.0:port (SO_REUSEADDR as Go's listener sets it, so a
// socket in TIME_WAIT does not count as taken).
bool PortFree(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // nothing to learn; the registry will say
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return free;
}

// Ends the registry a previous server left behind (it was SIGKILLed): only a process whose
// command line names this very config, so a reused pid is never hit.
void EndStale(const std::string& pid_file, const std::string& config) {
  auto text = ReadFile(pid_file);
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 1) {
    return;
  }
  auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (!cmdline.ok() || cmdline->find(config) == std::string::npos) return;
  spdlog::info("registry: ending pid {} left by a previous server", pid);
  const int pidfd = PidfdOpen(pid);
  ::kill(pid, SIGTERM);
  if (pidfd < 0) return;
  pollfd p{pidfd, POLLIN, 0};
  if (::poll(&p, 1, 5000) == 0) ::kill(pid, SIGKILL);
  ::poll(&p, 1, 5000);
  ::close(pidfd);
}

}  // namespace

std::string RegistryConfig(const std::string& storage_dir, uint16_t port) {
  return absl::StrCat(
      "# Written by hyperfleet server at each start (docs/kubernetes.md \"Registry and "
      "images\").\n",
      "version: 0.1\n", "log:\n  level: info\n  accesslog:\n    disabled: true\n",
      "storage:\n  filesystem:\n    rootdirectory: ", storage_dir,
      "\n  delete:\n    enabled: true\n", "http:\n  addr: 0.0.0.0:", port, "\n");
}

ImageRegistry::ImageRegistry(ImageRegistryOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<ImageRegistry>> ImageRegistry::Start(
    const ImageRegistryOptions& options) {
  std::unique_ptr<ImageRegistry> r(new ImageRegistry(options));
  const std::string program = options.binary.empty() ? "docker-registry" : options.binary;
  auto found = FindProgram(program);
  if (!found) {
    return absl::NotFoundError(absl::StrCat(
        program, " is not installed (Debian package docker-registry; scripts/setup --eks)"));
  }
  r->program_ = *found;
  HF_RETURN_IF_ERROR(MakeDirs(options.dir + "/storage"));
  const std::string config = options.dir + "/config.yml";
  HF_RETURN_IF_ERROR(
      WriteFileAtomically(config, RegistryConfig(options.dir + "/storage", options.port)));
  EndStale(options.dir + "/registry.pid", config);
  if (!PortFree(options.port)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "registry: port ", options.port,
        " is taken on this host (another registry, e.g. Debian's docker-registry service?); "
        "choose another with --registry-port, or 0 for no registry"));
  }
  r->stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (r->stop_fd_ < 0) return absl::InternalError("registry: eventfd failed");
  r->thread_ = std::thread([self = r.get()] { self->supervise(); });
  return r;
}

ImageRegistry::~ImageRegistry() { stop(); }

void ImageRegistry::stop() {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (stop_fd_ >= 0) ::close(stop_fd_);
  stop_fd_ = -1;
}

void ImageRegistry::supervise() {
  const std::string config = options_.dir + "/config.yml";
  Ms backoff(options_.first_backoff_ms);
  for (;;) {
    const int log_fd = ::open((options_.dir + "/registry.log").c_str(),
                              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ProcessSpec spec;
    spec.argv = {program_, "serve", config};
    // Its own environment: REGISTRY_* variables of the server's would override the config.
    spec.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    spec.out = log_fd >= 0 ? Stdio::Fd(log_fd) : Stdio::Null();
    spec.err = Stdio::Stdout();
    spec.group = ProcessGroup::kNewGroup;
    spec.umask = 077;
    auto child = Subprocess::Spawn(spec);
    if (log_fd >= 0) ::close(log_fd);
    const auto started = std::chrono::steady_clock::now();
    std::optional<ProcessExit> exit;
    if (!child.ok()) {
      spdlog::error("registry: {}", child.status().ToString());
    } else {
      starts_++;
      pid_ = child->pid();
      (void)WriteFileAtomically(options_.dir + "/registry.pid", absl::StrCat(child->pid(), "\n"));
      spdlog::info("registry: docker-registry pid {} on port {} (storage {}/storage)",
                   child->pid(), options_.port, options_.dir);
      pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {child->pidfd(), POLLIN, 0}};
      while (::poll(fds, 2, -1) < 0 && errno == EINTR) {
      }
      if (fds[0].revents != 0) {  // stop(): SIGTERM, then SIGKILL after 5 s
        child->Kill(SIGTERM);
        pollfd p{child->pidfd(), POLLIN, 0};
        if (::poll(&p, 1, 5000) == 0) child->Kill(SIGKILL);
        child->Wait();
        pid_ = -1;
        ::unlink((options_.dir + "/registry.pid").c_str());
        return;
      }
      exit = child->Wait();
      pid_ = -1;
    }
    const bool healthy = std::chrono::steady_clock::now() - started >= kHealthyRun;
    if (healthy) backoff = Ms(options_.first_backoff_ms);
    spdlog::warn("registry: docker-registry ended ({}); again in {} ms (see {}/registry.log)",
                 exit ? absl::StrCat("status ", exit->exit_code) : "not started",
                 backoff.count(), options_.dir);
    pollfd p{stop_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(backoff.count())) > 0) return;
    backoff = std::min(backoff * 2, Ms(options_.max_backoff_ms));
  }
}

}  // namespace hf::eks
