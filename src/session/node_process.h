#pragma once
// Starting a process inside a node: nsenter into every namespace of the node's init, under a
// pty or with pipes, after joining the init's cgroups. Private to hf_session.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::session {

/// What to start.
struct NodeProcessSpec {
  int node_pid = 0;                    ///< host pid of the node's init
  std::string nsenter_path;            ///< util-linux nsenter
  std::string shell;                   ///< e.g. /bin/bash
  std::optional<std::string> command;  ///< `<shell> -lc <command>`; none: `<shell> -l`
  bool pty = false;                    ///< under a pseudo-terminal, else three pipes
  uint16_t cols = 80, rows = 24;       ///< initial window size (pty)
  std::string term = "xterm-256color";
  bool join_cgroups = true;            ///< move the process into the init's cgroups
};

/// A started process. File descriptors are owned (close with Close()); all are close-on-exec.
/// With a pty, `pty_master` is set and the pipe fds are -1; otherwise the reverse.
struct NodeProcess {
  pid_t pid = -1;         ///< leader of its own session and process group (setsid)
  int pidfd = -1;         ///< readable once the process has exited (pidfd_open)
  int pty_master = -1;
  int stdin_fd = -1;      ///< write end of the process's stdin
  int stdout_fd = -1;     ///< read end of its stdout
  int stderr_fd = -1;     ///< read end of its stderr
  /// Cgroups that could not be joined ("path: error"), for the log; the process runs anyway.
  std::vector<std::string> cgroup_warnings;

  /// Closes every descriptor still open (not the process).
  void Close();
};

/// The `cgroup.procs` files of every hierarchy `pid` belongs to, as seen from this process's
/// mount namespace (/proc/<pid>/cgroup matched to the cgroup and cgroup2 mounts in
/// /proc/self/mountinfo). Hierarchies that are not mounted here are skipped.
/// Errors: NotFound when /proc/<pid>/cgroup cannot be read (the process is gone).
StatusOr<std::vector<std::string>> CgroupProcsFiles(int pid);

/// Forks and execs `nsenter --target <node_pid> --all -- <shell> -l[c <command>]` in a new
/// session with a clean environment (TERM, HOME=/root, PATH, USER, LOGNAME, SHELL, LANG),
/// default signal dispositions and an empty signal mask. The child waits until the parent has
/// written its pid into the node init's cgroups (when join_cgroups), so that everything it
/// starts is accounted to the node. Errors: Internal when a pty, pipe, fork or exec fails
/// (the message says which and why); NotFound when the node's init is gone.
StatusOr<NodeProcess> SpawnInNode(const NodeProcessSpec& spec);

}  // namespace hf::session
