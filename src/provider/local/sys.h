#pragma once
// Small host helpers of the local provider: processes, cgroup hierarchies and mount points.
// Starting programs, files and randomness come from common/ (subprocess.h, fs.h, random.h).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::provider::local {

/// Runs `argv` as hf::RunCapture does (stdin /dev/null, stdout and stderr merged) and requires
/// exit status 0. What it adds to RunCapture: the error names the command and its output.
/// Errors: as RunCapture; Internal "`argv...` failed (status N): output".
Status RunOk(const std::vector<std::string>& argv);

/// Lowercase hex of SHA-256(data).
std::string Sha256Hex(std::string_view data);

/// True when `pid` runs and its command line contains every string in `needles`.
bool ProcessMatches(int pid, const std::vector<std::string>& needles);

/// Child pids of `pid` (from /proc/<pid>/task/<pid>/children).
std::vector<int> ChildPids(int pid);

/// When process `pid` started (its /proc stat starttime after the host's btime); zero when
/// unknown. A node's init starts anew at every boot, so this is the node's boot time.
SystemTime ProcessStartTime(int pid);

/// Reads a pid written as text in `path`.
std::optional<int> ReadPidFile(const std::string& path);

/// Writes `value` to the kernel file `path` (/proc/sys, cgroupfs) in place: no temporary
/// file, no creation, one write. Errors: Internal naming the value, the path and errno text.
Status WriteKernelFile(const std::string& path, std::string_view value);

/// Mount points of cgroup hierarchies (v1 and v2) under /sys/fs/cgroup, from
/// /proc/self/mountinfo. The v2 one comes first when present.
std::vector<std::string> CgroupHierarchies();

/// True when `path` is a mount point (listed in /proc/self/mountinfo).
bool IsMountPoint(const std::string& path);

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
