#include "node_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::session {
namespace {

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// A cgroup or cgroup2 mount from mountinfo.
struct CgroupMount {
  bool v2 = false;
  std::string root;                 // the cgroup path mounted there
  std::string mount_point;
  std::set<std::string> options;    // super options (controllers, name=...)
};

std::vector<CgroupMount> CgroupMounts() {
  std::vector<CgroupMount> mounts;
  const StatusOr<std::string> mountinfo = ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mounts;
  const std::vector<std::string> lines = absl::StrSplit(*mountinfo, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    // id parent major:minor root mount-point options [optional...] - fstype source super
    const auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<std::string> head = absl::StrSplit(line.substr(0, sep), ' ');
    std::vector<std::string> tail = absl::StrSplit(line.substr(sep + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (tail[0] != "cgroup" && tail[0] != "cgroup2") continue;
    CgroupMount m;
    m.v2 = tail[0] == "cgroup2";
    m.root = head[3];
    m.mount_point = head[4];
    for (auto opt : absl::StrSplit(tail[2], ',')) m.options.insert(std::string(opt));
    mounts.push_back(std::move(m));
  }
  return mounts;
}

// The child's side: async-signal-safe calls only (the parent is multi-threaded).
[[noreturn]] void ChildExit(int error_fd, int err) {
  const int value = err;
  [[maybe_unused]] auto n = write(error_fd, &value, sizeof value);
  _exit(127);
}

}  // namespace

void NodeProcess::Close() {
  for (int* fd : {&pidfd, &pty_master, &stdin_fd, &stdout_fd, &stderr_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

StatusOr<std::vector<std::string>> CgroupProcsFiles(int pid) {
  const StatusOr<std::string> cgroups = ReadFile(absl::StrCat("/proc/", pid, "/cgroup"));
  if (!cgroups.ok()) return absl::NotFoundError(absl::StrCat("no process ", pid, " (its cgroups)"));
  const std::vector<CgroupMount> mounts = CgroupMounts();
  std::vector<std::string> files;
  const std::vector<std::string> lines = absl::StrSplit(*cgroups, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    // hierarchy-id:controllers:path; v2 is "0::path".
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    const bool v2 = line.substr(0, first) == "0" && controllers.empty();
    for (const CgroupMount& m : mounts) {
      if (m.v2 != v2) continue;
      if (!v2) {
        bool all = true;
        for (auto c : absl::StrSplit(controllers, ',')) {
          if (!m.options.count(std::string(c))) all = false;
        }
        if (!all) continue;
      }
      // The mount shows the subtree at m.root; the path must lie inside it.
      std::string relative;
      if (m.root == "/") {
        relative = path;
      } else if (path == m.root || path.starts_with(m.root + "/")) {
        relative = path.substr(m.root.size());
      } else {
        continue;
      }
      if (relative == "/") relative.clear();
      files.push_back(absl::StrCat(m.mount_point, relative, "/cgroup.procs"));
      break;
    }
  }
  return files;
}

// fork and exec by hand, not common/subprocess.h: between the two the child waits until the
// parent has moved it into the node's cgroups, and takes the pty as its controlling terminal;
// posix_spawn has no hook for either.
StatusOr<NodeProcess> SpawnInNode(const NodeProcessSpec& spec) {
  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<std::string> args = {spec.nsenter_path, "--target", std::to_string(spec.node_pid),
                                   "--all", "--", spec.shell};
  if (spec.command) {
    args.push_back("-lc");
    args.push_back(*spec.command);
  } else {
    args.push_back("-l");
  }
  std::vector<std::string> env = {
      "TERM=" + spec.term,
      "HOME=/root",
      "USER=root",
      "LOGNAME=root",
      "SHELL=" + spec.shell,
      "LANG=C.UTF-8",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  };
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<std::string> cgroup_files;
  if (spec.join_cgroups) {
    HF_ASSIGN_OR_RETURN(cgroup_files, CgroupProcsFiles(spec.node_pid));
  } else if (kill(spec.node_pid, 0) != 0 && errno == ESRCH) {
    return absl::NotFoundError(absl::StrCat("no process ", spec.node_pid));
  }

  NodeProcess proc;
  // Child-side fds, closed in the parent after fork.
  int child_in = -1, child_out = -1, child_err = -1;
  std::string slave_path;
  auto fail = [&](const std::string& what) {
    const std::string message = Errno(what.c_str());
    proc.Close();
    for (int fd : {child_in, child_out, child_err}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat("cannot start a session process: ", message));
  };

  if (spec.pty) {
    proc.pty_master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (proc.pty_master < 0) return fail("posix_openpt");
    if (grantpt(proc.pty_master) != 0 || unlockpt(proc.pty_master) != 0) return fail("grantpt");
    char name[128];
    if (ptsname_r(proc.pty_master, name, sizeof name) != 0) return fail("ptsname");
    slave_path = name;
    struct winsize ws = {};
    ws.ws_col = spec.cols;
    ws.ws_row = spec.rows;
    if (ioctl(proc.pty_master, TIOCSWINSZ, &ws) != 0) return fail("TIOCSWINSZ");
    // Opened in the parent, so that output is never lost between exec and a late open.
    child_in = open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (child_in < 0) return fail("open pty slave");
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return fail("pipe");
    child_in = in[0];
    proc.stdin_fd = in[1];
    if (pipe2(out, O_CLOEXEC) != 0) return fail("pipe");
    proc.stdout_fd = out[0];
    child_out = out[1];
    if (pipe2(err, O_CLOEXEC) != 0) return fail("pipe");
    proc.stderr_fd = err[0];
    child_err = err[1];
  }
  int go[2], error_pipe[2];
  if (pipe2(go, O_CLOEXEC) != 0) return fail("pipe");
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    return fail("pipe");
  }

  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {go[0], go[1], error_pipe[0], error_pipe[1]}) close(fd);
    return fail("fork");
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    close(go[1]);  // else our own copy would keep the "go" pipe from ever reaching EOF
    close(error_pipe[0]);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
    if (setsid() < 0) ChildExit(error_pipe[1], errno);
    if (spec.pty) {
      if (ioctl(child_in, TIOCSCTTY, 0) != 0) ChildExit(error_pipe[1], errno);
      for (int target : {0, 1, 2}) {
        if (dup2(child_in, target) < 0) ChildExit(error_pipe[1], errno);
      }
    } else {
      if (dup2(child_in, 0) < 0 || dup2(child_out, 1) < 0 || dup2(child_err, 2) < 0) {
        ChildExit(error_pipe[1], errno);
      }
    }
    // Wait until the parent has moved us into the node's cgroups (EOF = go).
    char byte;
    while (read(go[0], &byte, 1) < 0 && errno == EINTR) {
    }
    // Nothing else of the server's may leak into the node, its umask included: a session
    // gets a login's 022 (as sshd and SSM give on HyperPod), not the server's (often 077).
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    umask(022);
    execve(argv[0], argv.data(), envp.data());
    ChildExit(error_pipe[1], errno);
  }

  close(go[0]);
  close(error_pipe[1]);
  for (int fd : {child_in, child_out, child_err}) {
    if (fd >= 0) close(fd);
  }
  child_in = child_out = child_err = -1;
  proc.pid = pid;
  const std::string pid_text = std::to_string(pid);
  for (const std::string& file : cgroup_files) {
    const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid_text.data(), pid_text.size()) < 0) {
      proc.cgroup_warnings.push_back(absl::StrCat(file, ": ", std::strerror(errno)));
    }
    if (fd >= 0) close(fd);
  }
  close(go[1]);  // go
  int child_errno = 0;
  ssize_t n;
  while ((n = read(error_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  close(error_pipe[0]);
  if (n > 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    proc.pid = -1;
    proc.Close();
    return absl::InternalError(absl::StrCat("cannot start ", spec.nsenter_path, ": ",
                                            std::strerror(child_errno)));
  }
  proc.pidfd = PidfdOpen(pid);
  if (proc.pidfd < 0) {
    const std::string message = Errno("pidfd_open");
    kill(-pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    proc.Close();
    return absl::InternalError(absl::StrCat("cannot start a session process: ", message));
  }
  return proc;
}

}  // namespace hf::session
