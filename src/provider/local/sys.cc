#include "provider/local/sys.h"

#include <atomic>
#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hf::provider::local {
namespace fs = std::filesystem;

StatusOr<CommandResult> Run(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  // Found as HaveProgram finds it: a caller's PATH without the sbin dirs (su, cron) must not
  // hide ip or nft.
  const std::string program = FindProgram(argv[0]);
  if (program.empty()) return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": not found"));
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  }
  if (pid == 0) {
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    execv(program.c_str(), args.data());
    _exit(127);
  }
  close(pipefd[1]);
  CommandResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (result.exit_code == 127 && result.output.empty()) {
    return absl::InternalError(absl::StrCat("cannot run ", argv[0]));
  }
  return result;
}

Status RunOk(const std::vector<std::string>& argv) {
  HF_ASSIGN_OR_RETURN(CommandResult r, Run(argv));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (status ",
                                            r.exit_code, "): ", r.output));
  }
  return absl::OkStatus();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode) {
  // Unique per call: threads of one process may replace the same file at once (a launch and
  // a membership change both rewrite a node's /etc/hosts).
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  fchmod(fd, mode);  // umask must not widen or narrow it
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
    off += static_cast<std::size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string RandomHex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::ifstream in("/dev/urandom", std::ios::binary);
  in.read(raw.data(), static_cast<std::streamsize>(bytes));
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

bool ProcessMatches(int pid, const std::vector<std::string>& needles) {
  if (pid <= 0) return false;
  auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (!cmdline.ok() || cmdline->empty()) return false;  // gone, or a zombie
  for (const auto& needle : needles) {
    if (cmdline->find(needle) == std::string::npos) return false;
  }
  return true;
}

std::vector<int> ChildPids(int pid) {
  std::vector<int> out;
  auto text = ReadFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  if (!text.ok()) return out;
  for (absl::string_view part : absl::StrSplit(*text, ' ', absl::SkipWhitespace())) {
    int child = 0;
    if (absl::SimpleAtoi(part, &child)) out.push_back(child);
  }
  return out;
}

std::optional<int> ReadPidFile(const std::string& path) {
  auto text = ReadFile(path);
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

namespace {
// Fields of /proc/self/mountinfo lines: (mount point, filesystem type).
std::vector<std::pair<std::string, std::string>> Mounts() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 7) continue;
    std::size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;
    out.emplace_back(f[4], f[dash + 1]);
  }
  return out;
}
}  // namespace

std::vector<std::string> CgroupHierarchies() {
  std::vector<std::string> v2, v1;
  for (const auto& [point, type] : Mounts()) {
    if (point.rfind("/sys/fs/cgroup", 0) != 0) continue;
    if (type == "cgroup2") v2.push_back(point);
    if (type == "cgroup") v1.push_back(point);
  }
  v2.insert(v2.end(), v1.begin(), v1.end());
  return v2;
}

bool IsMountPoint(const std::string& path) {
  for (const auto& [point, type] : Mounts()) {
    if (point == path) return true;
  }
  return false;
}

std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool HaveProgram(const std::string& name) { return !FindProgram(name).empty(); }

void RemoveDirsDepthFirst(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) RemoveDirsDepthFirst(entry.path());
  }
  rmdir(dir.c_str());
}

std::vector<int> CgroupTreePids(const std::string& dir) {
  std::vector<int> pids;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return pids;
  if (auto text = ReadFile(dir + "/cgroup.procs"); text.ok()) {
    for (auto line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
    }
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      auto below = CgroupTreePids(entry.path().string());
      pids.insert(pids.end(), below.begin(), below.end());
    }
  }
  return pids;
}

bool KillCgroupTree(const std::string& rel, std::chrono::milliseconds timeout) {
  auto all = [&] {
    std::vector<int> pids;
    for (const std::string& root : CgroupHierarchies()) {
      auto more = CgroupTreePids(root + "/" + rel);
      pids.insert(pids.end(), more.begin(), more.end());
    }
    return pids;
  };
  return WaitFor(
      [&] {
        auto pids = all();
        for (int pid : pids) kill(pid, SIGKILL);
        return pids.empty();
      },
      timeout, std::chrono::milliseconds(50));
}

}  // namespace hf::provider::local
