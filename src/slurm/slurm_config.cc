#include "hyperfleet/slurm/slurm_config.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hf::data {
extern const std::string_view kJobSubmitLua;  // data/slurm/job_submit.lua, embedded
}  // namespace hf::data

namespace hf::slurm {
namespace {

using nlohmann::json;
namespace is = model::instance_status;

bool HasGroup(const model::Cluster& c, const std::string& name) {
  return c.group(name) != nullptr;
}

/// An IPv4 address as a number for ordering (0 when it does not parse).
uint32_t AddressOrder(const std::string& ip) {
  uint32_t out = 0;
  int octets = 0;
  uint32_t cur = 0;
  bool digit = false;
  for (char c : ip + ".") {
    if (c >= '0' && c <= '9') {
      cur = cur * 10 + static_cast<uint32_t>(c - '0');
      digit = true;
    } else if (c == '.' && digit && cur <= 255) {
      out = (out << 8) | cur;
      ++octets;
      cur = 0;
      digit = false;
    } else {
      return 0;
    }
  }
  return octets == 4 ? out : 0;
}

/// Live nodes of `group` with an address, by address: a replacement keeps its predecessor's
/// address, so replacing a node leaves slurm.conf as it was (no slurmctld restart).
std::vector<const model::Node*> Members(const std::vector<model::Node>& nodes,
                                        const std::string& group) {
  std::vector<const model::Node*> out;
  for (const auto& n : nodes) {
    if (n.group == group && n.status != is::kShuttingDown && !n.private_ip.empty() &&
        !n.hostname.empty()) {
      out.push_back(&n);
    }
  }
  std::sort(out.begin(), out.end(), [](const model::Node* a, const model::Node* b) {
    const uint32_t x = AddressOrder(a->private_ip), y = AddressOrder(b->private_ip);
    if (x != y) return x < y;
    if (a->hostname != b->hostname) return a->hostname < b->hostname;
    return a->instance_id < b->instance_id;
  });
  return out;
}

/// A login or worker node as Slurm sees it.
struct SlurmNode {
  const model::Node* node;
  const model::InstanceTypeSpec* spec;
  std::string partition;  ///< its group's partition besides `dev`; empty for login nodes
};

/// Login nodes first, then workers by group name, each group by address: stable output
/// for the same cluster. Errors: InvalidArgument for a type missing from `catalog`.
StatusOr<std::vector<SlurmNode>> SlurmNodes(const model::Cluster& cluster,
                                            const std::vector<model::Node>& nodes,
                                            const SlurmRoles& roles,
                                            const model::InstanceCatalog& catalog) {
  std::vector<std::string> groups;
  if (!roles.login_group.empty()) groups.push_back(roles.login_group);
  for (const auto& [g, _] : roles.worker_partitions) groups.push_back(g);
  std::vector<SlurmNode> out;
  for (const auto& group : groups) {
    const model::InstanceGroup* g = cluster.group(group);
    if (!g) continue;
    auto partition = roles.worker_partitions.find(group);
    for (const model::Node* n : Members(nodes, group)) {
      // The node's own type (a group with InstanceRequirements has several).
      const std::string& type = n->instance_type.empty() ? g->instance_type : n->instance_type;
      const model::InstanceTypeSpec* spec = catalog.find(type);
      if (!spec) {
        return absl::InvalidArgumentError(absl::StrCat("instance group ", group,
                                                       ": instance type '", type,
                                                       "' is not in the instance catalog"));
      }
      out.push_back({n, spec,
                     partition == roles.worker_partitions.end() ? "" : partition->second});
    }
  }
  return out;
}

/// The stand-in node of a cluster without login or worker nodes.
constexpr const char* kPlaceholderNode = "hyperfleet-placeholder";

int NvidiaGpus(const model::InstanceTypeSpec& spec) {
  return spec.accelerator_kind == model::AcceleratorKind::kNvidiaGpu ? spec.accelerator_count
                                                                     : 0;
}

}  // namespace

StatusOr<SlurmRoles> SlurmRolesOf(const model::Cluster& cluster,
                                  const json& provisioning_parameters) {
  SlurmRoles roles;
  bool api_roles = false;
  for (const auto& g : cluster.groups) api_roles |= g.spec.contains("SlurmConfig");
  if (api_roles) {
    for (const auto& g : cluster.groups) {
      const json sc = g.spec.value("SlurmConfig", json::object());
      const std::string type = sc.value("NodeType", "Compute");
      if (type == "Controller") {
        if (!roles.controller_group.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "InstanceGroups[].SlurmConfig.NodeType: more than one Controller group (",
              roles.controller_group, ", ", g.name, ")"));
        }
        roles.controller_group = g.name;
      } else if (type == "Login") {
        roles.login_group = g.name;
      } else {
        const json names = sc.value("PartitionNames", json::array());
        roles.worker_partitions[g.name] =
            names.empty() ? g.instance_type : names[0].get<std::string>();
      }
    }
  } else if (provisioning_parameters.is_object()) {
    roles.controller_group = provisioning_parameters.value("controller_group", "");
    roles.login_group = provisioning_parameters.value("login_group", "");
    for (const auto& w : provisioning_parameters.value("worker_groups", json::array())) {
      if (!w.is_object()) continue;
      const std::string name = w.value("instance_group_name", "");
      if (!HasGroup(cluster, name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "provisioning_parameters.json: worker_groups names instance group '", name,
            "', which cluster ", cluster.name, " does not have"));
      }
      roles.worker_partitions[name] =
          w.value("partition_name", cluster.group(name)->instance_type);
    }
    for (const auto& g : cluster.groups) {
      if (g.name != roles.controller_group && g.name != roles.login_group &&
          !roles.worker_partitions.count(g.name)) {
        roles.worker_partitions[g.name] = g.instance_type;
      }
    }
  }
  if (roles.controller_group.empty()) {
    return absl::InvalidArgumentError(
        "no Slurm controller group: set InstanceGroups[].SlurmConfig.NodeType to Controller "
        "for one group, or controller_group in provisioning_parameters.json");
  }
  if (roles.worker_partitions.count(roles.controller_group)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "instance group ", roles.controller_group,
        " is the Slurm controller group and cannot also be a worker group (worker_groups / "
        "SlurmConfig.NodeType)"));
  }
  if (!roles.login_group.empty() && roles.worker_partitions.count(roles.login_group)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "instance group ", roles.login_group,
        " is the Slurm login group and cannot also be a worker group"));
  }
  for (const auto& [what, name] : {std::pair{"controller_group", roles.controller_group},
                                   std::pair{"login_group", roles.login_group}}) {
    if (!name.empty() && !HasGroup(cluster, name)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " names instance group '", name,
                                                     "', which cluster ", cluster.name,
                                                     " does not have"));
    }
  }
  return roles;
}

StatusOr<std::string> RenderSlurmConf(const model::Cluster& cluster,
                                      const std::vector<model::Node>& nodes,
                                      const SlurmRoles& roles,
                                      const model::InstanceCatalog& catalog) {
  const auto controllers = Members(nodes, roles.controller_group);
  if (controllers.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "controller group ", roles.controller_group, " has no node with an address yet"));
  }
  const model::Node& primary = *controllers.front();
  std::string out = absl::StrCat(
      "# slurm.conf of cluster ", cluster.name, ", written by the Hyperfleet control plane.\n",
      "# Scaling and node replacement rewrite it: local edits may be overwritten.\n",
      "ClusterName=", cluster.name, "\n",
      "SlurmctldHost=", primary.hostname, "(", primary.private_ip, ")\n",
      "SlurmctldParameters=enable_configless\n",
      // Instance types larger than the host must not drain their nodes.
      "SlurmdParameters=config_overrides\n",
      "AuthType=auth/munge\nCredType=cred/munge\nSlurmUser=slurm\nSlurmdUser=root\n",
      // A requeued job waits out the step credential lifetime before it may start again
      // (22.05: 120 s by default; values under 5 are refused and mean 120). 5 s lets a job
      // requeued after a node fault (srun --auto-resume, sbatch --requeue) start again at once.
      "AuthInfo=cred_expire=5\n",
      "SlurmctldPort=6817\nSlurmdPort=6818\n",
      "StateSaveLocation=/var/spool/slurmctld\nSlurmdSpoolDir=/var/spool/slurmd\n",
      "SlurmctldPidFile=/run/slurmctld.pid\nSlurmdPidFile=/run/slurmd.pid\n",
      "SlurmctldLogFile=/var/log/slurm/slurmctld.log\nSlurmdLogFile=/var/log/slurm/slurmd.log\n",
      "ProctrackType=proctrack/linuxproc\n",
      "# Required for auto-resume (srun --auto-resume=1), as on HyperPod.\n",
      "TaskPlugin=task/none\n",
      "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n",
      "SchedulerType=sched/backfill\n",
      // Start a batch job as it is submitted (22.05 waits up to 3 s by default), and look at
      // the whole queue every 2 s instead of 60: a requeued job becomes eligible with no event
      // that would run the scheduler, so it waited up to a minute more (measured 10-25 s).
      "SchedulerParameters=batch_sched_delay=0,sched_interval=2\n",
      "MpiDefault=none\nReturnToService=1\n",
      // Task governance (docs/governance.md "On Slurm"): job_submit.lua holds the jobs of
      // governed accounts at submission; the control plane releases them on admission.
      "JobSubmitPlugins=lua\n");
  HF_ASSIGN_OR_RETURN(auto members, SlurmNodes(cluster, nodes, roles, catalog));
  std::string node_lines;
  std::map<std::string, std::vector<std::string>> partitions;  // name -> node names
  std::vector<std::string> all;
  bool gpus = false;
  for (const SlurmNode& m : members) {
    const model::Node& n = *m.node;
    const auto memory_mib = static_cast<long long>(std::floor(m.spec->memory_gib * 1024));
    absl::StrAppend(&node_lines, "NodeName=", n.hostname, " NodeHostname=", n.hostname,
                    " NodeAddr=", n.private_ip, " CPUs=", m.spec->vcpus,
                    " RealMemory=", memory_mib);
    if (NvidiaGpus(*m.spec) > 0) {
      absl::StrAppend(&node_lines, " Gres=gpu:", NvidiaGpus(*m.spec));
      gpus = true;
    }
    absl::StrAppend(&node_lines, " State=UNKNOWN\n");
    all.push_back(n.hostname);
    if (!m.partition.empty()) partitions[m.partition].push_back(n.hostname);
  }
  if (gpus) absl::StrAppend(&out, "GresTypes=gpu\n");
  absl::StrAppend(&out, "Include accounting.conf\n\n", node_lines);
  // Every partition exists even without nodes (a worker group scaled to 0): slurmctld
  // refuses to start without any partition, and jobs queued for an empty one wait.
  for (const auto& [group, name] : roles.worker_partitions) {
    if (cluster.group(group)) partitions[name];
  }
  if (all.empty()) {
    // slurmctld 22.05 exits with "no nodes configured": a FUTURE node is never contacted
    // and sinfo does not show it.
    absl::StrAppend(&out,
                    "# No login or worker node yet: partitions are empty, and Slurm needs a "
                    "node defined.\nNodeName=", kPlaceholderNode, " State=FUTURE CPUs=1\n");
  }
  auto nodes_of = [](const std::vector<std::string>& members, const std::string& list) {
    return members.empty() ? std::string() : absl::StrCat(" Nodes=", list);
  };
  absl::StrAppend(&out, "\nPartitionName=dev", nodes_of(all, "ALL"),
                  " Default=YES MaxTime=INFINITE State=UP\n");
  for (const auto& [name, members] : partitions) {
    if (name == "dev") continue;  // `dev` already has every node
    absl::StrAppend(&out, "PartitionName=", name, nodes_of(members, absl::StrJoin(members, ",")),
                    " MaxTime=INFINITE State=UP\n");
  }
  return out;
}

StatusOr<std::string> RenderGresConf(const model::Cluster& cluster,
                                     const std::vector<model::Node>& nodes,
                                     const SlurmRoles& roles,
                                     const model::InstanceCatalog& catalog) {
  HF_ASSIGN_OR_RETURN(auto members, SlurmNodes(cluster, nodes, roles, catalog));
  std::string out = absl::StrCat("# gres.conf of cluster ", cluster.name,
                                 ", written by the Hyperfleet control plane.\n");
  for (const SlurmNode& m : members) {
    if (const int gpus = NvidiaGpus(*m.spec); gpus > 0) {
      // File= is required: 22.05 drops file-less GPUs from slurmd's report (0 < N: drained).
      absl::StrAppend(&out, "NodeName=", m.node->hostname, " Name=gpu File=",
                      gpus == 1 ? std::string("/dev/nvidia0")
                                : absl::StrCat("/dev/nvidia[0-", gpus - 1, "]"),
                      "\n");
    }
  }
  return out;
}

std::string RenderEmulatedGpusDropIn(int gpus) {
  if (gpus <= 0) return "";
  std::vector<std::string> devices;
  for (int i = 0; i < gpus; ++i) devices.push_back(absl::StrCat("/dev/nvidia", i));
  // systemd expands $VAR in command lines: $$ passes a literal $ to the shell. A host with
  // NVIDIA's driver (loaded: /proc/driver/nvidia; or installed, not loaded yet) makes the
  // device files itself, maybe after slurmd starts: a link there would take the path of a
  // real GPU. A container (a local node) sees its host's /proc/driver but none of its GPUs.
  return absl::StrCat(
      "# Written by the Hyperfleet control plane: this instance type has ", gpus,
      " NVIDIA GPU(s) and gres.conf names\n"
      "# them by their device files. Without NVIDIA's driver (a local node) they are links "
      "to /dev/null,\n# so slurmd registers the GPUs for scheduling (no GPU is usable).\n"
      "[Service]\n"
      "ExecStartPre=/bin/sh -c 'test -e /dev/nvidiactl && exit 0; "
      "if ! systemd-detect-virt -q -c; then test -e /proc/driver/nvidia && exit 0; "
      "modinfo nvidia >/dev/null 2>&1 && exit 0; fi; for d in ",
      absl::StrJoin(devices, " "),
      "; do test -e \"$$d\" || ln -sfn /dev/null \"$$d\" || exit 1; done'\n");
}

std::string RenderJobSubmitLua() { return std::string(data::kJobSubmitLua); }

}  // namespace hf::slurm
