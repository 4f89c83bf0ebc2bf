#include "provider/ssh/fsx_mount.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "provider/ssh/scripts.h"

namespace hf::provider::ssh {
namespace {

constexpr std::string_view kMountedLine = "hyperfleet-fsx mounted";
constexpr std::string_view kSftpServer = "/usr/lib/openssh/sftp-server";
/// A connection that held this long resets the retry delay.
constexpr auto kHeldLongEnough = std::chrono::seconds(30);

/// Only characters that need no quoting in sh or in /proc/mounts.
bool PlainPath(std::string_view p) {
  if (p.size() < 2 || p.front() != '/' || p.back() == '/') return false;
  if (p.find("//") != std::string_view::npos || p.find("/..") != std::string_view::npos) {
    return false;
  }
  return std::all_of(p.begin(), p.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '/' || c == '_' || c == '-' || c == '.';
  });
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

namespace {

/// Shell: `top` prints what is mounted on top at $mp, from /proc/self/mountinfo (fields: id
/// parent maj:min root mount-point options [optional...] - fstype source ...): "none",
/// "ours" (Hyperfleet's sshfs, live or stale), "bind" (the read-only bind of the directory
/// onto itself: root and mount point are both $mp), or "other <source> <fstype>".
std::string TopFunction() {
  return absl::StrCat(
      "top() { awk -v m=\"$mp\" '$5 == m { for (i = 7; $i != \"-\"; i++) ; "
      "if ($(i + 2) == \"", std::string(kFsxFsname), "\") t = \"ours\"; "
      "else if ($4 == m && $6 ~ /^ro/) t = \"bind\"; "
      "else t = \"other \" $(i + 2) \" \" $(i + 1) } "
      "END { print (t == \"\" ? \"none\" : t) }' /proc/self/mountinfo; }; ");
}

}  // namespace

std::string FsxRemoteCommand(std::string_view mount_point_view) {
  const std::string mount_point(mount_point_view);
  const std::string fsname(kFsxFsname), mounted(kMountedLine);
  return absl::StrCat(
      "set -e; mp=", mount_point, "; ", TopFunction(),
      // A Hyperfleet sshfs left on top by a connection that died is stale: even stat() of
      // it fails (ENOTCONN), so it goes first. Only from the top: a file system the
      // lifecycle scripts mounted over ours is never touched.
      "t=$(top); while [ \"$t\" = ours ]; do umount -l \"$mp\"; t=$(top); done; ",
      // Underneath: the directory bound read-only onto itself, so that writes while sshfs
      // is away fail instead of landing on the machine's own disk.
      "case \"$t\" in none) mkdir -p \"$mp\"; mount --bind \"$mp\" \"$mp\"; ",
      "mount -o remount,bind,ro \"$mp\" ;; bind) ;; ",
      "*) echo \"", fsname, ": $mp has another file system on top ($t): not mounted\" >&2; ",
      "exit 3 ;; esac; ",
      "( while kill -0 $$ 2>/dev/null; do if grep -q \"^", fsname,
      " $mp fuse.sshfs \" /proc/mounts; then echo \"", mounted,
      "\" >&2; exit 0; fi; sleep 0.05; done ) </dev/null >/dev/null & ",
      "exec sshfs -f -o passive,allow_other,default_permissions,dir_cache=no,fsname=", fsname,
      " :/fsx \"$mp\"");
}

std::string FsxCleanupCommand(std::string_view mount_point_view) {
  // Only Hyperfleet's mounts, only from the top: another file system mounted over them
  // (the lifecycle scripts' FSx) stays, and so do ours under it.
  return absl::StrCat("mp=", std::string(mount_point_view), "; ", TopFunction(),
                      "t=$(top); while [ \"$t\" = ours ] || [ \"$t\" = bind ]; do "
                      "umount -l \"$mp\" || break; t=$(top); done; true");
}

std::vector<std::string> FsxSandboxArgv(std::string_view export_dir,
                                        std::string_view sandbox_dir) {
  const std::string sandbox(sandbox_dir);
  return {"bwrap",
          // Every namespace but the user namespace (root's file operations must keep
          // working on every uid: chown to the node's users).
          "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
          "--unshare-cgroup-try", "--die-with-parent", "--new-session",
          "--cap-drop", "ALL", "--cap-add", "CAP_CHOWN", "--cap-add", "CAP_DAC_OVERRIDE",
          "--cap-add", "CAP_FOWNER", "--cap-add", "CAP_FSETID",
          "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
          "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
          "--dev", "/dev",
          "--ro-bind", sandbox + "/passwd", "/etc/passwd",
          "--ro-bind", sandbox + "/group", "/etc/group",
          "--bind", std::string(export_dir), "/fsx", "--chdir", "/fsx",
          std::string(kSftpServer), "-d", "/fsx"};
}

StatusOr<std::unique_ptr<FsxMount>> FsxMount::Start(FsxMountOptions options) {
  if (options.export_dir.empty()) return absl::InvalidArgumentError("export_dir is empty");
  if (options.sandbox_dir.empty()) return absl::InvalidArgumentError("sandbox_dir is empty");
  if (!PlainPath(options.mount_point)) {
    return absl::InvalidArgumentError("mount_point must be a plain absolute path: " +
                                      options.mount_point);
  }
  if (!options.start_remote) return absl::InvalidArgumentError("start_remote is missing");
  HF_RETURN_IF_ERROR(MakeDirs(options.export_dir, 0755));
  HF_RETURN_IF_ERROR(MakeDirs(options.sandbox_dir, 0700));
  // sftp-server looks its user up; the sandbox's files name root only.
  HF_RETURN_IF_ERROR(WriteFileAtomically(options.sandbox_dir + "/passwd",
                                         "root:x:0:0:root:/fsx:/usr/sbin/nologin\n", 0644));
  HF_RETURN_IF_ERROR(WriteFileAtomically(options.sandbox_dir + "/group", "root:x:0:\n", 0644));
  std::unique_ptr<FsxMount> mount(new FsxMount(std::move(options)));
  if (pipe2(mount->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  mount->thread_ = std::thread([m = mount.get()] { m->Supervise(); });
  return mount;
}

FsxMount::FsxMount(FsxMountOptions options) : options_(std::move(options)) {}

FsxMount::~FsxMount() {
  Stop();
  CloseFd(wake_[0]);
  CloseFd(wake_[1]);
}

void FsxMount::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool FsxMount::WaitMounted(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return state_.mounted; });
}

bool FsxMount::WaitRemounted(int after_mounts, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout,
                      [&] { return state_.mounted && state_.mounts > after_mounts; });
}

FsxMountState FsxMount::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

void FsxMount::Supervise() {
  auto delay = options_.retry_min;
  while (!stop_) {
    const auto started = std::chrono::steady_clock::now();
    const bool mounted = RunConnection();
    {
      std::lock_guard lock(mu_);
      state_.mounted = false;
    }
    if (stop_) break;
    const bool held = std::chrono::steady_clock::now() - started >= kHeldLongEnough;
    if (mounted && held) delay = options_.retry_min;
    spdlog::warn("{}: /fsx connection ended; mounting again in {} ms", options_.log_name,
                 delay.count());
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, delay, [&] { return stop_.load(); });
    if (!(mounted && held)) delay = std::min(delay * 2, options_.retry_max);
  }
}

bool FsxMount::RunConnection() {
  auto fail = [&](std::string error) {
    spdlog::warn("{}: /fsx: {}", options_.log_name, error);
    std::lock_guard lock(mu_);
    state_.last_error = std::move(error);
    return false;
  };
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return fail(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  ProcessSpec spec;
  spec.argv = FsxSandboxArgv(options_.export_dir, options_.sandbox_dir);
  spec.program = "/usr/bin/bwrap";
  spec.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.in = Stdio::Fd(sv[0]);
  spec.out = Stdio::Fd(sv[0]);
  spec.err = Stdio::Null();
  spec.group = ProcessGroup::kNewGroup;
  auto server = Subprocess::Spawn(spec);
  const std::string command =
      ssh_scripts::RootCommand(options_.user, FsxRemoteCommand(options_.mount_point));
  StatusOr<Subprocess> remote = absl::UnknownError("not started");
  if (server.ok()) {
    remote = options_.start_remote(command, Stdio::Fd(sv[1]), Stdio::Fd(sv[1]), Stdio::Pipe());
  }
  close(sv[0]);
  close(sv[1]);
  if (!server.ok()) return fail("cannot start the sandbox: " + std::string(server.status().message()));
  if (!remote.ok()) return fail("cannot start sshfs: " + std::string(remote.status().message()));
  {
    std::lock_guard lock(mu_);
    ++state_.connections;
  }
  bool mounted = false;
  std::string said;     // the machine's last stderr line: why it ended, when it says
  std::string pending;  // stderr not yet ended by a newline
  int err_fd = remote->stderr_fd();
  while (!stop_) {
    pollfd fds[4] = {{wake_[0], POLLIN, 0}, {remote->pidfd(), POLLIN, 0},
                     {server->pidfd(), POLLIN, 0}, {err_fd, POLLIN, 0}};
    if (poll(fds, err_fd >= 0 ? 4 : 3, -1) < 0 && errno != EINTR) break;
    if (fds[1].revents || fds[2].revents) break;  // either end is gone
    if (err_fd >= 0 && fds[3].revents) {
      char buf[4096];
      const ssize_t n = read(err_fd, buf, sizeof buf);
      if (n <= 0) {
        err_fd = -1;  // ssh closed its stderr: it is about to exit
        continue;
      }
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
        const std::string line = pending.substr(0, nl);
        if (line == kMountedLine) {
          mounted = true;
          std::lock_guard lock(mu_);
          state_.mounted = true;
          ++state_.mounts;
          cv_.notify_all();
        } else if (!line.empty()) {
          said = line;
          (void)fail(line);
        }
      }
    }
  }
  // Either end gone (or Stop()): end the other. sshfs (or ssh) gets a moment to end by
  // itself after SIGTERM, so that it unmounts; the destructors kill and reap what is left.
  server->Kill(SIGKILL);
  remote->Kill(SIGTERM);
  pollfd gone{remote->pidfd(), POLLIN, 0};
  (void)poll(&gone, 1, 2000);
  if (auto exit = remote->TryWait(); exit && !stop_ && exit->exit_code != 0) {
    std::string why = absl::StrCat("the connection ended with status ", exit->exit_code);
    if (!said.empty()) absl::StrAppend(&why, ": ", said);
    (void)fail(std::move(why));
  }
  return mounted;
}

}  // namespace hf::provider::ssh
