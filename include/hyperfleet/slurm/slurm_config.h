#pragma once
// slurm.conf as HyperPod's cluster agent writes it on a Slurm cluster's controller
// (docs/hyperpod-contract.md "The machine"): configless, node names = hostnames ip-a-b-c-d with their
// addresses, CPUs, memory and GPUs from the instance type, a `dev` partition with every node
// and one partition per worker group. Pure functions of the cluster, its nodes and the
// instance catalog; the control plane sends the result to the controller's agent with its
// node files (agentapi::AgentService).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::slurm {

/// Which instance group plays which Slurm role.
struct SlurmRoles {
  std::string controller_group;  ///< runs slurmctld (its first node is the primary)
  std::string login_group;       ///< empty when the cluster has none
  /// Worker (compute) groups and the partition each one's nodes join besides `dev`.
  std::map<std::string, std::string> worker_partitions;
};

/// Roles from the API when any group has InstanceGroups[].SlurmConfig (NodeType Controller,
/// Login or Compute; PartitionNames[0], default: the group's instance type), else from the
/// bundle's provisioning_parameters.json (controller_group, login_group, worker_groups[]
/// {instance_group_name, partition_name}; groups it does not name are workers in a partition
/// named after their instance type), as HyperPod reads them. `provisioning_parameters` may be
/// null. Errors: InvalidArgument naming the field when there is no controller group, more
/// than one, or a role names a group the cluster does not have.
StatusOr<SlurmRoles> SlurmRolesOf(const model::Cluster& cluster,
                                  const nlohmann::json& provisioning_parameters);

/// The whole slurm.conf for `cluster` with its `nodes` (nodes shutting down or without an
/// address are left out). The controller's first node (by address) is SlurmctldHost;
/// login and worker nodes get NodeName lines with CPUs (vCPUs), RealMemory (MiB, the
/// instance type's memory) and Gres=gpu:N for NVIDIA GPUs. Errors: FailedPrecondition when the
/// controller has no node with an address yet; InvalidArgument for an instance type missing
/// from `catalog`.
StatusOr<std::string> RenderSlurmConf(const model::Cluster& cluster,
                                      const std::vector<model::Node>& nodes,
                                      const SlurmRoles& roles,
                                      const model::InstanceCatalog& catalog);

/// gres.conf for the same cluster: one line per node with NVIDIA GPUs naming NVIDIA's device
/// files ("NodeName=ip-10-1-0-7 Name=gpu File=/dev/nvidia[0-7]"), and only a comment when
/// there is none. Slurm 22.05's slurmd drops every GPU without File= from what it reports, so
/// a count-only line registered 0 GPUs and drained the node (INVALID_REG). A node with
/// NVIDIA's driver has these files; a local node gets stand-ins from
/// RenderEmulatedGpusDropIn. Configless slurmds get it from slurmctld with slurm.conf.
/// Errors: as RenderSlurmConf.
StatusOr<std::string> RenderGresConf(const model::Cluster& cluster,
                                     const std::vector<model::Node>& nodes,
                                     const SlurmRoles& roles,
                                     const model::InstanceCatalog& catalog);

/// Where a node whose instance type has NVIDIA GPUs gets RenderEmulatedGpusDropIn.
inline constexpr const char* kEmulatedGpusDropInPath =
    "/etc/systemd/system/slurmd.service.d/hyperfleet-gpus.conf";

/// A systemd drop-in for slurmd on a node whose instance type has `gpus` NVIDIA GPUs: before
/// slurmd starts, a node without NVIDIA's driver gets /dev/nvidia0 .. /dev/nvidia<gpus-1> as
/// symbolic links to /dev/null where they are missing, so the File= devices gres.conf names
/// exist and slurmd registers gpu:<gpus> (GPUs emulated for scheduling only: a job sees
/// CUDA_VISIBLE_DEVICES but no GPU). Left alone: a node with /dev/nvidiactl, and a host (not
/// a container: `systemd-detect-virt -c`) whose driver is loaded (/proc/driver/nvidia) or
/// installed (`modinfo nvidia`), which makes its device files itself, maybe after slurmd
/// starts. A local node is a container: it sees its host's /proc/driver, not its GPUs.
/// Empty for `gpus` <= 0.
std::string RenderEmulatedGpusDropIn(int gpus);

/// /opt/slurm/etc/job_submit.lua of the controller (slurm.conf has JobSubmitPlugins=lua):
/// holds (priority 0) and marks (AdminComment hyperfleet-governed, unless one was given)
/// every job whose account is listed in /opt/slurm/etc/hyperfleet-governed-accounts (one
/// account per line; written by the controller's agent from the heartbeat's "governance"),
/// and refuses their array and heterogeneous jobs with a message to the user; other jobs
/// pass. A missing list governs nothing. Its slurm_job_modify refuses a priority other than 0
/// (a release) of a held job marked hyperfleet-governed or hyperfleet-held unless the caller
/// is root or SlurmUser ("slurm"), with Slurm 22.05's ESLURM_JOB_HELD. Task governance:
/// docs/governance.md "On Slurm". The program is data/slurm/job_submit.lua, embedded at
/// build time (no substitutions).
std::string RenderJobSubmitLua();

}  // namespace hf::slurm
