#pragma once
// Small host helpers of the local provider: running programs from argument vectors (never
// through a shell), files, hashes, processes and cgroup hierarchies.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::provider::local {

/// Result of a finished program.
struct CommandResult {
  int exit_code = -1;  ///< exit status, or 128 + signal
  std::string output;  ///< stdout and stderr together
};

/// Runs argv[0] (looked up in PATH) with `argv`, stdin from /dev/null, and waits.
/// Errors: Internal when it cannot be started.
StatusOr<CommandResult> Run(const std::vector<std::string>& argv);

/// Runs and requires exit status 0. Errors: Internal naming the command and its output.
Status RunOk(const std::vector<std::string>& argv);

/// Whole file as text. Errors: NotFound / Internal with the path.
StatusOr<std::string> ReadFile(const std::string& path);

/// Writes `data` to `path` atomically (temporary file + rename) with `mode`.
Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode = 0644);

/// Lowercase hex of SHA-256(data).
std::string Sha256Hex(std::string_view data);

/// `bytes` random bytes as lowercase hex (from /dev/urandom).
std::string RandomHex(std::size_t bytes);

/// True when `pid` runs and its command line contains every string in `needles`.
bool ProcessMatches(int pid, const std::vector<std::string>& needles);

/// Child pids of `pid` (from /proc/<pid>/task/<pid>/children).
std::vector<int> ChildPids(int pid);

/// Reads a pid written as text in `path`.
std::optional<int> ReadPidFile(const std::string& path);

/// Mount points of cgroup hierarchies (v1 and v2) under /sys/fs/cgroup, from
/// /proc/self/mountinfo. The v2 one comes first when present.
std::vector<std::string> CgroupHierarchies();

/// True when `path` is a mount point (listed in /proc/self/mountinfo).
bool IsMountPoint(const std::string& path);

/// The executable `name` (a path, or found in $PATH, then /usr/sbin, /sbin, /usr/bin,
/// /bin), or "" when there is none.
std::string FindProgram(const std::string& name);
/// True when FindProgram(name) finds it.
bool HaveProgram(const std::string& name);

/// Removes `dir` and every directory below it with rmdir, deepest first (cgroups).
void RemoveDirsDepthFirst(const std::string& dir);

/// Pids listed in `dir`/cgroup.procs and in every cgroup below it.
std::vector<int> CgroupTreePids(const std::string& dir);

/// SIGKILLs every process in the cgroup `rel` (e.g. "hyperfleet/<fleet>/<instance>") of every
/// hierarchy until none is left or `timeout` passes. A node's processes all live there (its
/// init, its services, shell sessions joined to it), whatever happened to their parents.
/// Returns true when the cgroups are empty.
bool KillCgroupTree(const std::string& rel, std::chrono::milliseconds timeout);

/// Waits until `done()` or `timeout` passes, polling every `step`. Returns done().
template <class F>
bool WaitFor(F done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds step = std::chrono::milliseconds(20));

}  // namespace hf::provider::local

#include <thread>
template <class F>
bool hf::provider::local::WaitFor(F done, std::chrono::milliseconds timeout,
                                  std::chrono::milliseconds step) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(step);
  }
  return true;
}
