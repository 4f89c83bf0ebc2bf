#pragma once
// Where a node's /fsx comes from on a registered machine (docs/ssh-provider.md "/fsx"),
// decided from the cluster's provisioning_parameters.json and what the machine has mounted
// at /fsx already. Pure.
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::provider::ssh {

/// Who provides /fsx.
enum class FsxSource {
  kDefault,           ///< Hyperfleet's: the cluster's export over sshfs (FsxMount)
  kLifecycleScripts,  ///< the user's FSx for Lustre, mounted by the lifecycle scripts
  kMachine,           ///< the operator's own mount, already on the machine (NFS in fstab)
};

/// The decision and why, for logs and events.
struct FsxPlan {
  FsxSource source = FsxSource::kDefault;
  std::string reason;
};

/// The plan for one node. `provisioning_parameters` is the text of the lifecycle bundle's
/// provisioning_parameters.json ("" when the bundle has none): `fsx_dns_name` and
/// `fsx_mountname` both non-empty strings mean the lifecycle scripts mount FSx at /fsx, as
/// HyperPod's mount_fsx.sh does. `fsx_mount_line` is the machine's /proc/mounts line for
/// /fsx ("" when nothing is mounted there): a mount other than Hyperfleet's own (fsname
/// kFsxFsname, or the read-only bind under it) is the operator's, kept as it is. The
/// lifecycle scripts win over a machine mount (they mount over it, as they would on
/// HyperPod). InvalidArgument when provisioning_parameters is not a JSON object, or names
/// only one of the two fsx keys, or either is not a string.
StatusOr<FsxPlan> PlanFsx(std::string_view provisioning_parameters,
                          std::string_view fsx_mount_line);

/// The remote command whose output is PlanFsx's `fsx_mount_line` for `mount_point`: the
/// first /proc/mounts line mounted there other than the read-only bind FsxMount puts under
/// its sshfs, or nothing.
std::string FsxMountProbeCommand(std::string_view mount_point);

}  // namespace hf::provider::ssh
