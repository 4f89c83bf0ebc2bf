#pragma once
// A node's default shared /fsx on a registered machine (docs/ssh-provider.md "/fsx"):
// `sshfs -o passive` on the machine speaks SFTP over the control plane's own ssh connection
// to a local `sftp-server` (Debian's openssh-sftp-server) that a bubblewrap sandbox confines
// to the cluster's export directory: it sees that directory at /fsx, a read-only /usr, a
// one-line passwd and group, and no network. No credential is left on the node; the mount
// lives as long as that ssh connection, so FsxMount supervises it and mounts again whenever
// the connection ends (machine reboot, network drop, sshfs killed) until Stop().
//
// On the machine the mount point first gets a read-only bind mount of itself, so that while
// sshfs is away writes fail (EROFS) instead of landing on the machine's own disk.
//
// Programs: host: bwrap (bubblewrap), /usr/lib/openssh/sftp-server (openssh-sftp-server);
// machine: sshfs (sshfs, which brings fusermount3 from fuse3), sh, grep, mkdir, mount, umount
// (mount, coreutils). The machine needs /dev/fuse.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::provider::ssh {

/// The fsname sshfs mounts with: how the machine (and FsxPlan) tells Hyperfleet's /fsx from
/// the operator's own mount at the same place.
inline constexpr std::string_view kFsxFsname = "hyperfleet-fsx";

/// Starts one shell command line on the machine with its standard streams as given, e.g.
/// `[target](auto cmd, auto in, auto out, auto err) { return hf::ssh::Start(target, cmd, in,
/// out, err); }` (the ssh provider's; tests run it locally).
using RemoteStarter =
    std::function<StatusOr<Subprocess>(std::string_view command, Stdio in, Stdio out, Stdio err)>;

/// What FsxMount needs.
struct FsxMountOptions {
  /// The host directory shared as /fsx (`<data_dir>/ssh/clusters/<cluster-id>/fsx`); created
  /// (0755) when missing. Its parent should be owner-only: what nodes write there (setuid
  /// files included) is root's.
  std::string export_dir;
  /// A host directory for the sandbox's passwd and group files (created, 0700).
  std::string sandbox_dir;
  /// The machine's mount point (absolute, no blanks or quotes).
  std::string mount_point = "/fsx";
  /// The ssh user: root runs the command itself, another through `sudo -n`
  /// (ssh_scripts::RootCommand).
  std::string user = "root";
  RemoteStarter start_remote;
  /// Wait before mounting again after the connection ended: doubles from `retry_min` up to
  /// `retry_max` while the mounts fail, back to `retry_min` after one that held 30 s.
  std::chrono::milliseconds retry_min{500};
  std::chrono::milliseconds retry_max{30000};
  /// Names the node in log lines.
  std::string log_name;
};

/// What the supervisor has seen.
struct FsxMountState {
  bool mounted = false;  ///< the machine reported the mount up on the current connection
  int mounts = 0;        ///< connections that reached "mounted", since Start()
  int connections = 0;   ///< connections started, since Start()
  std::string last_error;  ///< the last failure (the machine's stderr line, or ours)
};

/// One node's supervised /fsx mount. Thread-safe.
class FsxMount {
 public:
  /// Checks the options and starts supervising (the first mount is under way on return).
  /// Errors: InvalidArgument naming the field (empty export_dir or sandbox_dir, a mount
  /// point that is not a plain absolute path, no start_remote); Internal when the export or
  /// sandbox directory cannot be made.
  static StatusOr<std::unique_ptr<FsxMount>> Start(FsxMountOptions options);
  ~FsxMount();  ///< Stop()
  FsxMount(const FsxMount&) = delete;
  FsxMount& operator=(const FsxMount&) = delete;

  /// Blocks until the machine reports the mount up (true) or `timeout` passes (false; the
  /// supervisor keeps trying).
  bool WaitMounted(std::chrono::milliseconds timeout);
  /// Blocks until a connection after the one that was current at the call reaches
  /// "mounted" (after a drop: the re-mount), or `timeout` (false).
  bool WaitRemounted(int after_mounts, std::chrono::milliseconds timeout);
  FsxMountState state() const;
  /// Ends the ssh connection and the sandbox (sshfs then unmounts /fsx on the machine; the
  /// read-only bind under it stays until FsxCleanupCommand) and stops supervising.
  /// Idempotent.
  void Stop();

 private:
  explicit FsxMount(FsxMountOptions options);
  void Supervise();
  /// One connection: until it ends or Stop(). True when it reached "mounted".
  bool RunConnection();

  FsxMountOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  FsxMountState state_;
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};  ///< a pipe: Stop() writes, the connection's poll wakes
  std::thread thread_;
};

/// The shell script the machine runs as root: clears stale Hyperfleet sshfs mounts from the
/// top of the mount point, makes it and binds it read-only onto itself (once), then runs
/// sshfs in passive mode in the foreground (allow_other, default_permissions, no directory
/// cache, fsname kFsxFsname) while a watcher prints "hyperfleet-fsx mounted" on stderr once
/// /proc/mounts shows it. When another file system is mounted on top (e.g. the lifecycle
/// scripts' FSx over ours) it touches nothing and exits 3 with a message on stderr.
std::string FsxRemoteCommand(std::string_view mount_point);

/// The shell script (run as root) that removes Hyperfleet's mounts (sshfs, the read-only
/// bind) from the top of the mount point on cleanup, leaving the directory; another file
/// system on top (an operator's, the lifecycle scripts') stays, with ours under it.

std::string FsxCleanupCommand(std::string_view mount_point);

/// The host's sandbox for one connection: bwrap with every namespace unshared (no network),
/// dying with its parent, no capabilities but those root's file operations need (chown,
/// dac_override, fowner, fsetid), a read-only /usr, /dev, the passwd/group of `sandbox_dir`,
/// and `export_dir` at /fsx, running sftp-server with /fsx as its start directory.
std::vector<std::string> FsxSandboxArgv(std::string_view export_dir,
                                        std::string_view sandbox_dir);

}  // namespace hf::provider::ssh
