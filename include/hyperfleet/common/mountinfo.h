#pragma once
// The mount table of a mount namespace, from /proc/<pid>/mountinfo (proc(5)):
// the one parser for the project (cgroup hierarchies, "is this a mount point",
// mounts left under a node root).
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf {

/// One line of mountinfo. Paths have their octal escapes (\040 for a space,
/// \011, \012, \134) decoded.
struct MountEntry {
  std::string root; ///< the path within the filesystem that is mounted here
  std::string mount_point;   ///< where, in this namespace
  std::string options;       ///< per-mount options ("rw,nosuid,...")
  std::string fs_type;       ///< "ext4", "cgroup2", ...
  std::string source;        ///< "/dev/sda1", "none", ...
  std::string super_options; ///< per-superblock options (for cgroup v1: its
                             ///< controllers)
};

/// The entries of mountinfo text `text`, in order. Lines without the " - "
/// separator or with too few fields are skipped (never an error: the kernel's
/// format is fixed, and a future optional field must not break us).
std::vector<MountEntry> ParseMountInfo(std::string_view text);

/// ParseMountInfo of /proc/self/mountinfo. Errors: as ReadFile.
StatusOr<std::vector<MountEntry>> ReadMountInfo();

/// True when `dir` is a mount point in `mounts` (exact match of a decoded mount
/// point).
bool IsMountPointIn(const std::vector<MountEntry> &mounts,
                    std::string_view dir);

} // namespace hf
