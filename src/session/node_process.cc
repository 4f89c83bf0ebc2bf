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
#include "hyperfleet/common/mountinfo.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::session {
namespace {

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// A cgroup or cgroup2 mount.
struct CgroupMount {
  bool v2 = false;
  std::string root;                 // the cgroup path mounted there
  std::string mount_point;
  std::set<std::string> options;    // super options (controllers, name=...)
};

std::vector<CgroupMount> CgroupMounts() {
  std::vector<CgroupMount> mounts;
  const StatusOr<std::vector<MountEntry>> entries = ReadMountInfo();
  if (!entries.ok()) return mounts;
  for (const MountEntry& entry : *entries) {
    if (entry.fs_type != "cgroup" && entry.fs_type != "cgroup2") continue;
    CgroupMount m;
    m.v2 = entry.fs_type == "cgroup2";
    m.root = entry.root;
    m.mount_point = entry.mount_point;
    for (auto opt : absl::StrSplit(entry.super_options, ',')) m.options.insert(std::string(opt));
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

namespace {

// `nsenter --target <pid> --all -- <shell> -l[c <command>]`.
std::vector<std::string> SessionArgs(const NodeProcessSpec& spec) {
  std::vector<std::string> args = {spec.nsenter_path, "--target", std::to_string(spec.node_pid),
                                   "--all", "--", spec.shell};
  if (spec.command) {
    args.push_back("-lc");
    args.push_back(*spec.command);
  } else {
    args.push_back("-l");
  }
  return args;
}

// A login's environment, nothing of the server's.
std::vector<std::string> SessionEnv(const NodeProcessSpec& spec) {
  return {
      "TERM=" + spec.term,
      "HOME=/root",
      "USER=root",
      "LOGNAME=root",
      "SHELL=" + spec.shell,
      "LANG=C.UTF-8",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  };
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The child's ends of its standard streams (with a pty, `in` is the pty slave for all
// three), closed in the parent after fork.
struct ChildFds {
  int in = -1, out = -1, err = -1;
  void Close() {
    for (int* fd : {&in, &out, &err}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
};

// Opens the pty (its master in `proc`, its slave in `child`) or three pipes. Returns the
// name of the call that failed (errno says why), nullptr on success.
const char* OpenStdio(const NodeProcessSpec& spec, NodeProcess& proc, ChildFds& child) {
  if (spec.pty) {
    proc.pty_master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (proc.pty_master < 0) return "posix_openpt";
    if (grantpt(proc.pty_master) != 0 || unlockpt(proc.pty_master) != 0) return "grantpt";
    char name[128];
    if (ptsname_r(proc.pty_master, name, sizeof name) != 0) return "ptsname";
    struct winsize ws = {};
    ws.ws_col = spec.cols;
    ws.ws_row = spec.rows;
    if (ioctl(proc.pty_master, TIOCSWINSZ, &ws) != 0) return "TIOCSWINSZ";
    // Opened in the parent, so that output is never lost between exec and a late open.
    child.in = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (child.in < 0) return "open pty slave";
    return nullptr;
  }
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return "pipe";
  child.in = in[0];
  proc.stdin_fd = in[1];
  if (pipe2(out, O_CLOEXEC) != 0) return "pipe";
  proc.stdout_fd = out[0];
  child.out = out[1];
  if (pipe2(err, O_CLOEXEC) != 0) return "pipe";
  proc.stderr_fd = err[0];
  child.err = err[1];
  return nullptr;
}

// The child after fork: async-signal-safe calls only. Leads a new session with the pty as
// its controlling terminal (or the pipes as its streams), waits for EOF on `go_fd` (the
// parent has moved it into the node's cgroups), then execs; on failure writes the errno to
// `error_fd`.
[[noreturn]] void ExecChild(bool pty, const ChildFds& child, int go_fd, int error_fd,
                            char* const argv[], char* const envp[]) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  if (setsid() < 0) ChildExit(error_fd, errno);
  if (pty) {
    if (ioctl(child.in, TIOCSCTTY, 0) != 0) ChildExit(error_fd, errno);
    for (int target : {0, 1, 2}) {
      if (dup2(child.in, target) < 0) ChildExit(error_fd, errno);
    }
  } else {
    if (dup2(child.in, 0) < 0 || dup2(child.out, 1) < 0 || dup2(child.err, 2) < 0) {
      ChildExit(error_fd, errno);
    }
  }
  // Wait until the parent has moved us into the node's cgroups (EOF = go).
  char byte;
  while (read(go_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  // Nothing else of the server's may leak into the node, its umask included: a session
  // gets a login's 022 (as sshd and SSM give on HyperPod), not the server's (often 077).
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  umask(022);
  execve(argv[0], argv, envp);
  ChildExit(error_fd, errno);
}

// Writes `pid` into each cgroup.procs file; the ones that fail go to `warnings`.
void JoinCgroups(const std::vector<std::string>& files, pid_t pid,
                 std::vector<std::string>& warnings) {
  const std::string pid_text = std::to_string(pid);
  for (const std::string& file : files) {
    const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid_text.data(), pid_text.size()) < 0) {
      warnings.push_back(absl::StrCat(file, ": ", std::strerror(errno)));
    }
    if (fd >= 0) close(fd);
  }
}

// The parent after fork: joins the child to the cgroups, lets it go and waits for its exec
// (EOF on `error_read`) or the errno of its failure; then opens its pidfd. Closes both fds.
StatusOr<NodeProcess> FinishStart(const NodeProcessSpec& spec, NodeProcess proc, pid_t pid,
                                  const std::vector<std::string>& cgroup_files, int go_write,
                                  int error_read) {
  proc.pid = pid;
  JoinCgroups(cgroup_files, pid, proc.cgroup_warnings);
  close(go_write);  // go
  int child_errno = 0;
  ssize_t n;
  while ((n = read(error_read, &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  close(error_read);
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

}  // namespace

// fork and exec by hand, not common/subprocess.h: between the two the child waits until the
// parent has moved it into the node's cgroups, and takes the pty as its controlling terminal;
// posix_spawn has no hook for either.
StatusOr<NodeProcess> SpawnInNode(const NodeProcessSpec& spec) {
  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<std::string> args = SessionArgs(spec);
  std::vector<std::string> env = SessionEnv(spec);
  const std::vector<char*> argv = CStrings(args);
  const std::vector<char*> envp = CStrings(env);

  std::vector<std::string> cgroup_files;
  if (spec.join_cgroups) {
    HF_ASSIGN_OR_RETURN(cgroup_files, CgroupProcsFiles(spec.node_pid));
  } else if (kill(spec.node_pid, 0) != 0 && errno == ESRCH) {
    return absl::NotFoundError(absl::StrCat("no process ", spec.node_pid));
  }

  NodeProcess proc;
  ChildFds child;
  auto fail = [&](const char* what) {
    const std::string message = Errno(what);
    proc.Close();
    child.Close();
    return absl::InternalError(absl::StrCat("cannot start a session process: ", message));
  };
  if (const char* failed = OpenStdio(spec, proc, child)) return fail(failed);
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
    close(go[1]);  // else our own copy would keep the "go" pipe from ever reaching EOF
    close(error_pipe[0]);
    ExecChild(spec.pty, child, go[0], error_pipe[1], argv.data(), envp.data());
  }
  close(go[0]);
  close(error_pipe[1]);
  child.Close();
  return FinishStart(spec, std::move(proc), pid, cgroup_files, go[1], error_pipe[0]);
}

}  // namespace hf::session
