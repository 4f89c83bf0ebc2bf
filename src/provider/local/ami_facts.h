#pragma once
// What a local node has of HyperPod's AMI beyond the shared node image, decided per node at
// launch (docs/nodes.md "AMI facts"): the NVIDIA driver facts every HyperPod AMI carries (a
// `nvidia` kernel module that `modinfo` finds, and an apt record of the matching
// libnvidia-compute-<major> package, which base-config's hotfix/mock-gpu-driver-deb.sh reads),
// and the storage mounts (/opt/dlami/nvme, /opt/sagemaker). Pure parts render bytes and plans;
// WriteNodeAmiFacts is the thin effect that puts them into a node's root.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"

namespace hf::provider::local {

/// Driver version a node reports when its host has no NVIDIA driver: the one of the Deep
/// Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) of 2026-10, the DLAMI family HyperPod's
/// Slurm AMI is built on (docs/nodes.md "AMI facts" says why).
inline constexpr std::string_view kStandInDriverVersion = "595.91.07";
/// Debian revision of the libnvidia-compute record: NVIDIA's CUDA apt repository names its
/// driver packages <driver>-0ubuntu1, the suffix every version of mock-gpu-driver-deb.sh tries.
inline constexpr std::string_view kDriverPackageRevision = "-0ubuntu1";
/// The node's local apt source holding the record (a flat repository, no network needed).
inline constexpr std::string_view kAmiAptDir = "/var/lib/hyperfleet-ami/apt";

/// The NVIDIA driver a node reports.
struct DriverFacts {
  std::string version;       ///< e.g. "595.91.07"
  bool from_host = false;    ///< the host's loaded driver: its modules are bound, no stand-in
};

/// One bind mount the node supervisor makes (systemd-nspawn --bind / --bind-ro).
struct NodeBind {
  std::string source;  ///< host path
  std::string target;  ///< path in the node
  bool read_only = false;
  bool operator==(const NodeBind&) const = default;
};

/// Storage HyperPod attaches to an instance (docs/hyperpod-contract.md "The machine").
struct NodeStorage {
  bool instance_store = false;  ///< the type has local NVMe: mounted at /opt/dlami/nvme
  bool secondary_ebs = false;   ///< InstanceStorageConfigs' EBS volume: mounted at /opt/sagemaker
};

/// "595" of "595.91.07": the package name's major (mock-gpu-driver-deb.sh: ${V%%.*}).
std::string DriverMajor(std::string_view version);

/// The driver version in the text of /sys/module/nvidia/version ("595.91.07\n") or of
/// /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX ... Kernel Module  595.91.07  <date>"),
/// or "" when there is none.
std::string ParseDriverVersion(std::string_view text);

/// dpkg's architecture for a `uname -m` machine ("x86_64" -> "amd64", "aarch64" -> "arm64");
/// "" for others.
std::string DpkgArchitecture(std::string_view machine);

/// A relocatable ELF object for this host's byte order and word size whose .modinfo section
/// names the module `nvidia` at `version` (what kmod's modinfo reads); it has no code and
/// cannot be loaded. `elf_machine` is the EM_* value of the host.
std::string RenderStandInModule(std::string_view version, std::string_view kernel_release,
                                int elf_machine);

/// The Packages file of the node's local apt source: one AVAILABLE (not installed) record
/// `libnvidia-compute-<major>` at `<version>-0ubuntu1` for `architecture`, with the Provides
/// of NVIDIA's package and no Depends.
std::string RenderAptPackages(std::string_view version, std::string_view architecture);

/// The sources.list.d line of that source.
std::string RenderAptSource();

/// The storage of an instance type with `nvme_gb` of local NVMe and, when `secondary_ebs`, the
/// EBS volume InstanceStorageConfigs asks for.
NodeStorage StorageOf(long nvme_gb, bool secondary_ebs);

/// The node supervisor's binds for a node whose directory is `node_dir`: each storage volume
/// from <node_dir>/volumes/<name>, and the host's /lib/modules/<release> read-only when the
/// driver facts come from the host (so nothing shadows its real module).
std::vector<NodeBind> NodeBinds(const NodeStorage& storage, const DriverFacts& driver,
                                std::string_view node_dir, std::string_view kernel_release);

/// Binds as node.json stores them (a list of {source, target, read_only}) and back; malformed
/// entries are skipped.
nlohmann::json BindsToJson(const std::vector<NodeBind>& binds);
std::vector<NodeBind> BindsFromJson(const nlohmann::json& j);

/// This host's driver: the loaded module's version (/sys/module/nvidia/version, else
/// /proc/driver/nvidia/version) with from_host, else the stand-in version.
DriverFacts HostDriverFacts();

/// This host's kernel release (`uname -r`), which nodes share.
std::string HostKernelRelease();

/// Writes the driver facts into the node root `merged` (mounted): the apt source and its
/// Packages file (also as apt's list, so apt-cache knows it before any `apt-get update`), and,
/// unless the facts come from the host, the stand-in module at
/// /lib/modules/<release>/kernel/drivers/video/nvidia.ko indexed by the image's depmod (run
/// in a chroot). Creates the source directories of `binds` under the node dir (mode 0755, as
/// a fresh file system's root). Every directory it creates is 0755 and every file 0644,
/// whatever the umask. Errors: Internal naming the path or command.
Status WriteNodeAmiFacts(const std::string& merged, const DriverFacts& driver,
                         const std::string& kernel_release, const std::vector<NodeBind>& binds);

}  // namespace hf::provider::local
