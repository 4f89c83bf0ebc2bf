// Runs node image recipe scripts: see recipe_runner.h.
#include "provider/recipe_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace hf::provider::internal {
namespace {

constexpr std::string_view kStepMarker = "@@step ";

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

StatusOr<RecipeRun> RunRecipeScript(const std::string& script, const std::vector<std::string>& args,
                                    const std::vector<std::string>& extra_env,
                                    const std::string& log_path,
                                    const std::function<void(std::string_view)>& log) {
  std::vector<std::string> argv_s = {"bash", script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=/root",
      "LC_ALL=C",
      "DEBIAN_FRONTEND=noninteractive",
  };
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  // Built before fork: the child of a threaded process may only make async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::ofstream log_file(log_path, std::ios::trunc);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(err)));
  }
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close_range(3, ~0U, 0);
    ::umask(kRecipeUmask);  // the caller's (e.g. 077) would make the image unreadable to daemons
    if (::chdir("/") != 0) ::_exit(126);
    ::execve("/bin/bash", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);

  RecipeRun result;
  std::string pending;
  auto emit = [&](std::string line) {
    if (line.rfind(kStepMarker, 0) == 0) result.last_step = line.substr(kStepMarker.size());
    log_file << line << '\n';
    if (log) log(line);
    result.tail.push_back(std::move(line));
    if (result.tail.size() > kRecipeTailLines) result.tail.pop_front();
  };
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = pending.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      emit(std::move(line));
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) emit(std::move(pending));
  ::close(fds[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", ErrnoText(errno)));
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace hf::provider::internal
