#include "server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

namespace api_bench {

namespace fs = std::filesystem;

bool ServerProcess::start(const Options& o, std::string* host_port) {
  return makeDataDir(o) && spawn(o) && awaitListening(host_port);
}

bool ServerProcess::makeDataDir(const Options& o) {
  char dir_template[] = "/tmp/hf-api-bench-XXXXXX";
  if (!mkdtemp(dir_template)) {
    Log("api_bench: mkdtemp: %s", std::strerror(errno));
    return false;
  }
  data_dir_ = dir_template;
  keep_ = o.keep_data_dir;
  log_path_ = data_dir_ + "/server.log";
  if (!o.data_dir_from.empty()) {
    std::error_code ec;
    fs::copy(o.data_dir_from, data_dir_ + "/data", fs::copy_options::recursive, ec);
    if (ec) {
      Log("api_bench: cannot copy %s: %s", o.data_dir_from.c_str(), ec.message().c_str());
      return false;
    }
  }
  return true;
}

bool ServerProcess::spawn(const Options& o) {
  std::vector<std::string> args = {o.server_binary,
                                   "server",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--data-dir",
                                   data_dir_ + "/data",
                                   "--access-key-id",
                                   o.access_key_id,
                                   "--secret-access-key",
                                   o.secret_access_key,
                                   "--provider",
                                   "fake",
                                   "--fake-boot-delay-ms",
                                   std::to_string(o.boot_delay_ms),
                                   "--max-instances-per-cluster",
                                   "20000",
                                   "--io-threads",
                                   std::to_string(o.io_threads),
                                   "--region",
                                   o.region,
                                   "--log-level",
                                   o.server_log_level};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    Log("api_bench: pipe: %s", std::strerror(errno));
    return false;
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    Log("api_bench: fork: %s", std::strerror(errno));
    return false;
  }
  if (pid_ == 0) {
    // Never outlive the benchmark. SIGKILL, not SIGTERM: the server's graceful stop joins
    // its controller, which can be busy for minutes while a large cluster launches.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  return true;
}

// Reads lines until the listening line (or exit, or 60 s).
bool ServerProcess::awaitListening(std::string* host_port) {
  const auto deadline = Steady::now() + std::chrono::seconds(60);
  std::string pending;
  while (Steady::now() < deadline) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) < 0 && errno != EINTR) break;
    if (p.revents & (POLLIN | POLLHUP)) {
      char buf[4096];
      ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) break;
      pending.append(buf, static_cast<size_t>(n));
      early_output_.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        constexpr std::string_view kPrefix = "hyperfleet server listening on http://";
        auto at = line.find(kPrefix);
        if (at == std::string::npos) continue;
        std::string rest = line.substr(at + kPrefix.size());
        *host_port = rest.substr(0, rest.find_first_of(" /"));
        drain_ = std::thread([this] { drain(); });
        return true;
      }
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
  }
  Log("api_bench: the server did not report its listening address. Its output:\n%s",
      early_output_.c_str());
  return false;
}

void ServerProcess::stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 200 && !exited; ++i) {  // 10 s
      exited = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (drain_.joinable()) drain_.join();
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
  if (!data_dir_.empty()) {
    if (keep_) {
      Log("api_bench: kept data dir %s", data_dir_.c_str());
    } else {
      std::error_code ec;
      fs::remove_all(data_dir_, ec);
    }
    data_dir_.clear();
  }
}

void ServerProcess::drain() {
  std::ofstream log(log_path_, std::ios::app);
  log << early_output_;
  char buf[4096];
  ssize_t n;
  while ((n = read(out_fd_, buf, sizeof buf)) > 0) log.write(buf, n);
}

std::string DefaultServerBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "bin/hyperfleet";
  for (fs::path candidate : {self.parent_path() / "hyperfleet",
                             self.parent_path() / "bin" / "hyperfleet"}) {
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return (self.parent_path() / "hyperfleet").string();
}

}  // namespace api_bench
